"""What the demo records replays with one command: every pair `calltap demo --recordings DIR`
kept, through the demo's own fake gateway, to the same verdict and codes."""

from __future__ import annotations

import subprocess
import sys

from calltap.demo import SCENARIOS


def test_every_demo_pair_replays_to_its_recorded_verdict_and_codes(demo_tree):
    result = subprocess.run(
        [sys.executable, "-m", "calltap", "replay", str(demo_tree), "--demo-gateway"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(SCENARIOS)} reproduced, 0 different, 0 cannot" in result.stdout
    assert result.stderr == ""


def test_one_divergence_replays_with_one_command(demo_pairs):
    result = subprocess.run(
        [sys.executable, "-m", "calltap", "replay", str(demo_pairs["merge-indexes"]),
         "--demo-gateway", "--pace", "none"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("TOOL_CALLS_DROPPED") == 2  # recorded, and replayed beside it
    assert "1 reproduced, 0 different, 0 cannot" in result.stdout
