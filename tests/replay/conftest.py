"""Recorded divergences to replay: `demo_tree` is what `calltap demo --recordings DIR` leaves, one
pair per injected defect and translated route, recorded through the fake gateway."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from calltap import recordings


@pytest.fixture(scope="session")
def demo_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recordings `calltap demo --recordings DIR` keeps."""
    root = tmp_path_factory.mktemp("demo") / "recordings"
    subprocess.run([sys.executable, "-m", "calltap", "demo", "--recordings", str(root)],
                   check=True, capture_output=True, timeout=120)
    return root


@pytest.fixture(scope="session")
def demo_pairs(demo_tree: Path) -> dict[str, Path]:
    """The demo's pair directories by what the client asked the fake gateway for: the defect's
    name, `+<route>` when it translated (`none`, `drop-second-call`, `none+anthropic`, …)."""
    pairs: dict[str, Path] = {}
    for directory in recordings.capture_directories(demo_tree):
        headers = orjson.loads((directory / recordings.PAIR_JSON).read_bytes())["legs"][
            "downstream"]["request_headers"]
        name = headers.get("x-fake-gateway-defect", "none")
        if "x-fake-gateway-translate" in headers:
            name += "+" + headers["x-fake-gateway-translate"]
        pairs.setdefault(name, directory)
    return pairs
