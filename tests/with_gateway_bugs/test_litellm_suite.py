"""A real LiteLLM divergence kept as a regression case, and the suite run against two releases.

LiteLLM 1.82.0 drops a tool schema's legacy `definitions` on the way to Anthropic (litellm
#26692, see test_litellm_request_bugs.py): calltap records it as TOOL_SCHEMA_CHANGED. `calltap
scan --diverged --export-cases` turns the recording into a case, and `calltap replay --suite`
runs it against a LiteLLM whose provider base URL is the replay's cassette: the buggy release
diverges again (the suite fails, with that code in the JUnit failure), the fixed release 1.97.0
sends the schema whole (the suite passes). The cassette answers the fixed release although its
request differs from the recorded one in the very schema the divergence was about.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from gateway_stack import GatewayStack, litellm_config, stamp, venv
from junitparser import Failure, JUnitXml
from test_litellm_request_bugs import MODELS, legacy_definitions
from tests.with_litellm.litellm_stack import MASTER_KEY, free_port, start_litellm, stop_litellm

pytestmark = pytest.mark.asyncio(loop_scope="module")

FIXED = "1.97.0"
REPLAY_TIMEOUT = 180


async def run_suite(release: str, cases: Path, workdir: Path) -> tuple[int, str, JUnitXml]:
    """`calltap replay --suite CASES` against `release`'s LiteLLM, its provider the cassette."""
    back = free_port()
    port = free_port()
    directory = workdir / f"replay-{release}"
    directory.mkdir()
    litellm = await start_litellm(directory, port,
                                  litellm_config(f"http://127.0.0.1:{back}", MODELS),
                                  executable=venv(release) / "bin" / "litellm")
    try:
        report = directory / "report.xml"
        run = subprocess.run(
            [sys.executable, "-m", "calltap", "replay", "--suite", str(cases),
             "--gateway", f"http://127.0.0.1:{port}", "--back", f"127.0.0.1:{back}",
             "--pace", "none", "--junit", str(report), "--github",
             "--header", f"Authorization: Bearer {MASTER_KEY}"],
            capture_output=True, text=True, timeout=REPLAY_TIMEOUT, check=False)
    finally:
        stop_litellm(litellm)
    return run.returncode, run.stdout + run.stderr, JUnitXml.fromfile(str(report))


@pytest.mark.parametrize("gateway", ["1.82.0"], indirect=True)
async def test_a_recorded_litellm_bug_fails_the_suite_on_its_release_and_passes_on_the_fix(
        gateway: GatewayStack, tmp_path: Path) -> None:
    if not stamp(FIXED).exists():
        pytest.skip(f"LiteLLM {FIXED} is not installed: run `make gateway-bugs`")
    await legacy_definitions(gateway, "litellm-26692-suite")
    await gateway.expect_request_caught("litellm-26692-suite", {"TOOL_SCHEMA_CHANGED"},
                                        answers=frozenset({"TOOL_CALL_IDS_REMAPPED"}))
    cases = tmp_path / "cases"
    exported = subprocess.run(
        [sys.executable, "-m", "calltap", "scan", str(gateway.calltap.recordings), "--diverged",
         "--export-cases", str(cases)],
        capture_output=True, text=True, timeout=60, check=False)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    (case,) = [path.name for path in cases.iterdir()]
    assert case.startswith("tool-schema-changed-v1-chat-completions-")

    buggy, output, junit = await run_suite(gateway.release, cases, tmp_path)
    assert buggy == 1, output
    (testcase,) = [testcase for suite in junit for testcase in suite]
    (failure,) = testcase.result
    assert isinstance(failure, Failure) and failure.type == "TOOL_SCHEMA_CHANGED"
    assert failure.message.startswith("diverged again: recorded diverged (")
    assert failure.message.count("TOOL_SCHEMA_CHANGED") == 2  # recorded, and replayed again
    assert f"::error file={cases / case}/README.md,title=calltap case {case} diverged again%3A" \
           " TOOL_SCHEMA_CHANGED" in output

    fixed, output, junit = await run_suite(FIXED, cases, tmp_path)
    assert fixed == 0, output
    (testcase,) = [testcase for suite in junit for testcase in suite]
    assert testcase.is_passed and testcase.name == case
    assert "::error" not in output
