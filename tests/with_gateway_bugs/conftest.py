"""The gateway-bugs suite: publicly reported bugs of real LiteLLM releases, caught by calltap.

Each test names the release it runs (`gateway` is parametrized indirectly with it) and carries
the `gateway_bugs` marker. A release runs only once its venv is built (`make gateway-bugs`, from
`releases/<release>/requirements.txt`); `.ci/run` builds them all, so CI always runs the suite.
Before, each test is skipped with a reason that names the missing venv and the command. One
LiteLLM process serves every test of a module that names its release, since it takes seconds
to start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from gateway_stack import STARTS, GatewayStack, open_stack, stamp, venv

HERE = Path(__file__).parent


def _skip_reason(release: str) -> str:
    return (f"LiteLLM {release} is not installed: {venv(release).name} is not built; run"
            " `make gateway-bugs` to build it, then rerun pytest")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not item.path.is_relative_to(HERE):
            continue
        item.add_marker(pytest.mark.gateway_bugs)
        release = getattr(item, "callspec", None) and item.callspec.params.get("gateway")
        if release and not stamp(release).exists():
            item.add_marker(pytest.mark.skip(reason=_skip_reason(release)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if STARTS:
        started = ", ".join(f"{release} {seconds:.1f} s" for release, seconds in STARTS.items())
        terminalreporter.write_line(f"LiteLLM releases ready after: {started}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gateway(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GatewayStack]:
    """The release named by the test's parameter, serving the module's MODELS."""
    release: str = request.param
    directory = tmp_path_factory.mktemp(f"litellm-{release}")
    async with open_stack(release, directory, request.module.MODELS) as stack:
        yield stack
