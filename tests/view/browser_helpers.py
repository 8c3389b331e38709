"""`calltap view` and `calltap serve` as real subprocesses on loopback for the browser tests,
and where their screenshots go."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("CALLTAP_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SCREENSHOTS = Path(os.environ.get("CALLTAP_SCREENSHOTS", "build/screenshots"))
"""Where the browser tests leave their screenshots of the list and of a pair page."""
CALLTAP = [sys.executable, "-m", "calltap"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running(command: list[str], *, env: dict[str, str] | None = None) -> Iterator[
        tuple[subprocess.Popen[str], str]]:
    """A calltap subprocess and the first line it prints; stopped (and waited for) at exit."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, **(env or {})})
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, f"{command} printed nothing"
        yield process, line
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def view(tree: Path, tmp: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`calltap view TREE` on a free loopback port; yields its base URL."""
    port = free_port()
    command = [*CALLTAP, "view", str(tree), "--listen", f"127.0.0.1:{port}",
               "--index", str(tmp / f"index-{port}.sqlite"), *extra]
    with running(command, env=env):
        yield f"http://127.0.0.1:{port}/"


@contextmanager
def serve(tree: Path) -> Iterator[dict[str, str]]:
    """`calltap serve`'s topology (fake provider, fake gateway, calltap); yields its URLs."""
    script = Path(__file__).with_name("serve_topology.py")
    with running([sys.executable, str(script), str(tree)],
                 env={"XDG_CACHE_HOME": str(tree.parent / "cache")}) as (_process, line):
        yield json.loads(line)


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=False)
