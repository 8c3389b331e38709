"""Suite-wide settings and fixtures: property tests judge behaviour, never speed.

No deadline: a loaded 2-core machine must not fail a correct example. Under CI the examples are
derandomized, so a run is repeatable; on a developer's machine each run explores new ones.
`make mutation` runs the CI examples without shrinking a failure: a mutant is killed by the first
failing example, and shrinking it would only cost time.
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


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        yield session


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as fake:
        yield fake
