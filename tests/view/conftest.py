"""Fixtures of the view's browser tests: the system Chromium driven through Playwright (never a
downloaded browser), and the recordings `calltap demo` keeps."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CALLTAP, CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium, for one module: Playwright's sync API keeps an event loop running in this
    thread while it is open, which the asynchronous tests of later modules need free."""
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} missing: apt-get install chromium (CI installs it in .ci/run)"
        if os.environ.get("CALLTAP_REQUIRE_BROWSER") or os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def demo_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recordings `calltap demo --recordings DIR` keeps."""
    root = tmp_path_factory.mktemp("demo") / "recordings"
    subprocess.run([*CALLTAP, "demo", "--recordings", str(root)], check=True,
                   capture_output=True, timeout=120)
    return root
