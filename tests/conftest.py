"""Suite-wide settings and fixtures: property tests judge behaviour, never speed.

No deadline: a loaded 2-core machine must not fail a correct example. Under CI the examples are
derandomized, so a run is repeatable; on a developer's machine each run explores new ones.
`make mutation` runs the CI examples without shrinking a failure, and the example tests before the
property tests: mutmut stops a mutant's run at its first failing test, and most mutants are killed
by an example test in milliseconds where a property test would take a second or more.
`client` is an HTTP client that hands back the bytes as they came (no decompression); `provider`
is a fake provider on loopback.
"""

import os
from collections.abc import AsyncIterator

import aiohttp
import pytest
from hypothesis import Phase, settings

from calltap.fakes import FakeProvider

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True)
settings.register_profile(
    "mutation", settings.get_profile("ci"), phases=[Phase.explicit, Phase.reuse, Phase.generate]
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under the mutation profile, property tests run after every example test."""
    if config.getoption("hypothesis_profile", None) == "mutation":
        items.sort(key=lambda item: getattr(getattr(item, "obj", None), "is_hypothesis_test",
                                            False))


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        yield session


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as fake:
        yield fake
