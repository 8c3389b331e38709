"""The Phoenix suite: calltap exporting its spans to a real Arize Phoenix.

Every test here carries the `phoenix` marker and runs only when `.venv-phoenix` has been built by
`make phoenix` (`.ci/run` builds it and sets CALLTAP_REQUIRE_PHOENIX, so CI fails rather than
skips without it); elsewhere each is skipped with a reason that says so.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from phoenix_stack import STAMP, STARTS

HERE = Path(__file__).parent
REASON = (
    f"Phoenix suite off: {STAMP.parent.name} is not built; run `make phoenix` to install"
    " arize-phoenix from tests/with_phoenix/requirements.txt, then rerun pytest"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.phoenix)


@pytest.fixture(scope="module", autouse=True)
def phoenix_built() -> None:
    if not STAMP.exists():
        if os.environ.get("CALLTAP_REQUIRE_PHOENIX") or os.environ.get("CI"):
            pytest.fail(REASON)
        pytest.skip(REASON)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if STARTS:
        started = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in STARTS.items())
        terminalreporter.write_line(f"Phoenix ready after: {started}")
