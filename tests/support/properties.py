"""How many examples a property test runs.

A test names its count at hypothesis's default budget of 100 examples; the loaded profile's budget
scales it. The CI and developer profiles keep the default, so there a test runs what it names.
`make mutation` loads a budget of 25: a surviving mutant runs every test that reaches its code, and
property tests are most of that time, so there each runs a quarter of its examples (at least 10).
"""

from typing import Any

from hypothesis import settings

DEFAULT_BUDGET = 100
FEWEST = 10


def examples(count: int, **options: Any) -> settings:
    """Settings for a property test of `count` examples at the default budget, scaled by the
    profile loaded when the test module is imported."""
    scaled = count * settings.default.max_examples // DEFAULT_BUDGET
    return settings(max_examples=max(scaled, min(count, FEWEST)), **options)
