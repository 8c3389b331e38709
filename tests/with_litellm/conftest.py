"""The LiteLLM suite: calltap on both sides of a real LiteLLM proxy.

Every test here carries the `litellm` marker and runs only when `.venv-litellm` has been built
by `make litellm` (`.ci/run` builds it, so CI always runs the suite); otherwise each is skipped
with a reason that says so. One LiteLLM process serves a whole module, since it takes seconds
to start: the `forwarding` stack forwards the client's `x-*` headers (pairs by header), the
`fingerprint` stack forwards none (pairs by fingerprint).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from litellm_stack import STAMP, STARTS, Stack, open_stack

HERE = Path(__file__).parent
SKIP_REASON = (
    f"LiteLLM suite off: {STAMP.parent.name} is not built; run `make litellm` to install"
    " litellm[proxy] from tests/with_litellm/requirements.txt, then rerun pytest"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ready = STAMP.exists()
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.litellm)
            if not ready:
                item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if STARTS:
        started = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in STARTS.items())
        terminalreporter.write_line(f"LiteLLM ready after: {started}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def forwarding(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """LiteLLM with `forward_client_headers_to_llm_api: true`."""
    directory = tmp_path_factory.mktemp("forwarding")
    async with open_stack("forwarding", directory, forward_headers=True) as stack:
        yield stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def fingerprint(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """LiteLLM with its default: no client header reaches the provider."""
    directory = tmp_path_factory.mktemp("fingerprint")
    async with open_stack("fingerprint", directory, forward_headers=False) as stack:
        yield stack
