"""Suite-wide settings and fixtures: property tests judge behaviour, never speed.

No deadline: a loaded 2-core machine must not fail a correct example. Under CI the examples are
derandomized, so a run is repeatable; on a developer's machine each run explores new ones.
`make mutation` runs a quarter of the CI examples (`tests/support/properties.py`) without
shrinking a failure, and a mutant's tests fastest first: mutmut stops a mutant's run at its first
failing test, and most mutants are killed by a test of milliseconds where a property test or a
command run in a subprocess would take a second or more. The durations are those mutmut measured
on the unmutated code (`mutmut-stats.json` in the directory it runs the tests from); without them,
property tests run after every example test.
`client` is an HTTP client that hands back the bytes as they came (no decompression); `provider`
is a fake provider on loopback.
"""

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest
from hypothesis import Phase, settings

from calltap.fakes import FakeProvider

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True)
settings.register_profile(
    "mutation",
    settings.get_profile("ci"),
    max_examples=25,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


MUTMUT_STATS = Path("mutmut-stats.json")
_durations: dict[str, float] = {}
"""Read once per process that has them: mutmut forks each mutant's run from one that collected."""


def _unmutated_durations() -> dict[str, float]:
    """Each test's duration on the unmutated code, as mutmut recorded it; empty before it has."""
    if not _durations:
        with contextlib.suppress(OSError, orjson.JSONDecodeError, KeyError):
            _durations.update(orjson.loads(MUTMUT_STATS.read_bytes())["duration_by_test"])
    return _durations


def _is_property_test(item: pytest.Item) -> bool:
    return getattr(getattr(item, "obj", None), "is_hypothesis_test", False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under the mutation profile, a mutant's tests run fastest first (property tests last when
    no duration is known)."""
    if config.getoption("hypothesis_profile", None) != "mutation":
        return
    durations = _unmutated_durations()
    if durations:
        items.sort(key=lambda item: durations.get(item.nodeid, 0.0))
    else:
        items.sort(key=_is_property_test)


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        yield session


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as fake:
        yield fake
