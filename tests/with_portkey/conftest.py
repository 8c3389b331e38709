"""The Portkey suite: calltap on both sides of a real Portkey gateway (`@portkey-ai/gateway`).

Every test here carries the `portkey` marker and runs only when `make portkey` has installed the
gateway into `tests/with_portkey/gateway/node_modules` (from the committed package-lock.json);
before, each is skipped with a reason that says so. In CI (`CI` set, as `.ci/run` runs) a missing
install fails every test instead: `.ci/run` runs `make portkey`, so a skip there would hide a
broken install step. One Portkey process serves a whole module: the `forwarding` stack lists the
pairing headers in `x-portkey-forward-headers` (pairs by header), the `fingerprint` stack does
not (Portkey then forwards no client header, and calltap pairs by fingerprint). A test that
names a release (`portkey_release`, parametrized indirectly) gets that release's gateway,
forwarding the pairing headers: 1.9.8 for the request bugs 1.15.2 fixed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from portkey_stack import RELEASE, STAMP, STARTS, Stack, open_stack

HERE = Path(__file__).parent
MISSING = (
    f"Portkey suite off: {STAMP.relative_to(HERE.parents[1])} is missing; run `make portkey`"
    f" to install @portkey-ai/gateway {RELEASE} from tests/with_portkey/gateway/package-lock.json,"
    " then rerun pytest"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip = not STAMP.exists() and not os.environ.get("CI")
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.portkey)
            if skip:
                item.add_marker(pytest.mark.skip(reason=MISSING))


@pytest.fixture(scope="session", autouse=True)
def _portkey_installed() -> None:
    """In CI, where nothing here is skipped, a missing install fails every test with the reason
    (before any stack tries to start a gateway that is not there)."""
    if not STAMP.exists():
        pytest.fail(MISSING)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if STARTS:
        started = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in STARTS.items())
        terminalreporter.write_line(f"Portkey ready after: {started}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def forwarding(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """Portkey with `x-portkey-forward-headers: x-request-id,traceparent` on every request."""
    directory = tmp_path_factory.mktemp("portkey-forwarding")
    async with open_stack("forwarding", directory, forward=True) as stack:
        yield stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def fingerprint(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """Portkey with its default: no client header reaches the provider."""
    directory = tmp_path_factory.mktemp("portkey-fingerprint")
    async with open_stack("fingerprint", directory, forward=False) as stack:
        yield stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def portkey_release(request: pytest.FixtureRequest,
                          tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """The release named by the test's parameter, listing the pairing headers in
    `x-portkey-forward-headers`; one gateway per release and module."""
    release: str = request.param
    directory = tmp_path_factory.mktemp(f"portkey-{release}")
    async with open_stack("forwarding", directory, forward=True, release=release) as stack:
        yield stack
