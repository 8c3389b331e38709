"""`calltap demo` as users run it: a real subprocess, no configuration, no network."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from calltap.demo import SCENARIOS, conversation
from calltap.fakes import DEFECTS
from calltap.fakes.translate import TRANSLATION_DEFECTS


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "calltap", "demo", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


REQUEST_DEFECTS = [name for name, defect in DEFECTS.items() if defect.request is not None]
ROUTES = ("Anthropic Messages", "OpenAI Responses", "Ollama", "Bedrock Converse", "Gemini",
          "Anthropic on Bedrock")


def test_demo_catches_every_defect_and_exits_0():
    result = run_demo()
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (*DEFECTS, *TRANSLATION_DEFECTS):
        assert name in result.stdout
    for name in REQUEST_DEFECTS:
        assert f"{name} ({conversation(DEFECTS[name]).label})" in result.stdout
    for route in ROUTES:
        assert f"none (via {route})" in result.stdout
        assert f"none (conversation via {route})" in result.stdout
        assert f"lose-second-tool-use (via {route})" in result.stdout
    assert len(SCENARIOS) == len(DEFECTS) + 4 + 3 * len(ROUTES)
    assert f"{len(SCENARIOS)}/{len(SCENARIOS)} as expected" in result.stdout
    assert "MISSED" not in result.stdout
    assert '"event"' not in result.stdout
    assert result.stderr == ""


def test_demo_keeps_captures_and_log_when_asked(tmp_path: Path):
    recordings = tmp_path / "demo"
    result = run_demo("--recordings", str(recordings))
    assert result.returncode == 0, result.stdout + result.stderr
    log = [json.loads(line) for line in (recordings / "calltap.log").read_text().splitlines()]
    compared = [line for line in log if line["event"] == "pair.compared"]
    pairs = sorted(recordings.glob("*/*/pair.json"))
    assert len(compared) == len(pairs) == len(SCENARIOS)
    dialects = {
        json.loads(pair.read_bytes())["comparison"]["upstream"]["dialect"] for pair in pairs
    }
    assert dialects == {
        "openai.chat",
        "anthropic.messages",
        "openai.responses",
        "ollama.chat",
        "bedrock.converse",
        "google.gemini",
    }
    dropped = [line for line in log if line.get("code") == "TOOL_CALLS_DROPPED"]
    assert dropped and all(line["event"] == "divergence" for line in dropped)
    assert str(recordings / "calltap.log") in result.stdout
    recorded = [json.loads(pair.read_bytes()) for pair in pairs]
    by_defect = {pair["legs"]["downstream"]["request_headers"].get("x-fake-gateway-defect"): pair
                 for pair in recorded}
    for name in REQUEST_DEFECTS:
        comparison = by_defect[name]["comparison"]
        request_codes = {f["code"] for f in comparison["findings"] if f["side"] == "request"}
        assert comparison["verdict"] == "diverged"
        assert request_codes == set(DEFECTS[name].codes), name
        assert any(line["event"] == "divergence" and line.get("side") == "request"
                   and line["request_id"] == by_defect[name]["request_id"] for line in log)
    equal = [pair for pair in recorded if pair["comparison"]["verdict"] == "equal"]
    assert len(equal) == sum(scenario.defect.verdict == "equal" for scenario in SCENARIOS)


def test_demo_help_teaches_what_it_does():
    result = subprocess.run(
        [sys.executable, "-m", "calltap", "demo", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "X-Fake-Gateway-Defect" in result.stdout
    assert "--recordings DIR" in result.stdout
