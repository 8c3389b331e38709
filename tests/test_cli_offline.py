"""`calltap compare`, `calltap check` and `calltap scan` as a user runs them: real subprocesses."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "openai_chat"
EXAMPLES = Path(__file__).parent.parent / "examples" / "recordings"


def calltap(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "calltap", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


def fixture(name: str) -> Path:
    return FIXTURES / name


def assert_usage_error(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == message + "\n"


# --- compare -------------------------------------------------------------------------------------


def test_compare_prints_the_verdict_then_each_finding_explained() -> None:
    result = calltap("compare", fixture("seed.upstream.sse"), fixture("seed.one-call.sse"))
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == "verdict: diverged"
    assert "TOOL_CALLS_DROPPED" in result.stdout
    assert "tool calls the provider made are missing from what the client got" in result.stdout
    assert "missing downstream: clock" in result.stdout
    assert result.stderr == ""


def test_compare_redact_leaves_out_names_and_values() -> None:
    result = calltap(
        "compare", fixture("seed.upstream.sse"), fixture("seed.all-index-0.sse"), "--redact"
    )
    assert result.returncode == 1
    assert "TOOL_CALLS_DROPPED" in result.stdout
    for planted in ("clock", "weather", "Taipei", "call_"):
        assert planted not in result.stdout


def test_compare_equal_exits_0_and_inconclusive_exits_3() -> None:
    equal = calltap("compare", fixture("seed.upstream.sse"), fixture("seed.remapped.sse"), "--json")
    assert equal.returncode == 0
    assert json.loads(equal.stdout)["verdict"] == "equal"
    cut = calltap("compare", fixture("text.upstream.sse"), fixture("text.cut-mid-event.sse"))
    assert cut.returncode == 3
    assert cut.stdout.startswith("verdict: inconclusive")


def test_compare_reads_the_leg_metadata_from_a_pair_json_beside_the_files(tmp_path: Path) -> None:
    body = fixture("eof.upstream.sse").read_bytes()
    (tmp_path / "upstream.sse").write_bytes(gzip.compress(body))
    (tmp_path / "downstream.sse").write_bytes(body)
    write_pair(tmp_path, upstream={"content-encoding": "gzip"}, upstream_ended="capture_truncated")
    result = calltap("compare", tmp_path / "upstream.sse", tmp_path / "downstream.sse", "--json")
    report = json.loads(result.stdout)
    assert report["upstream"]["findings"][-1]["code"] == "CAPTURE_TRUNCATED"
    assert report["upstream"]["choices"] == 1
    assert result.returncode == 3


@pytest.mark.parametrize("command", ["compare", "check"])
def test_a_missing_file_is_a_usage_error(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "nope.sse"
    files = [missing, fixture("seed.upstream.sse")] if command == "compare" else [missing]
    result = calltap(command, *files)
    assert_usage_error(result, f"calltap {command}: cannot read '{missing}': no such file")


def test_a_directory_given_as_a_file_is_a_usage_error(tmp_path: Path) -> None:
    result = calltap("compare", fixture("seed.upstream.sse"), tmp_path)
    assert_usage_error(result, f"calltap compare: cannot read '{tmp_path}': is a directory")


def test_an_empty_file_is_a_usage_error(tmp_path: Path) -> None:
    empty = tmp_path / "downstream.sse"
    empty.write_bytes(b"")
    result = calltap("check", empty)
    assert_usage_error(result, f"calltap check: cannot read '{empty}': empty file")


def test_an_unreadable_path_is_a_usage_error(tmp_path: Path) -> None:
    """A path through a regular file fails to open for every user, root included."""
    plain = tmp_path / "upstream.sse"
    plain.write_bytes(b"data: [DONE]\n\n")
    beyond = plain / "downstream.sse"
    result = calltap("check", beyond)
    assert_usage_error(result, f"calltap check: cannot read '{beyond}': Not a directory")


@pytest.mark.parametrize(
    "args",
    [
        ("compare", "a.sse"),
        ("compare", "a.sse", "b.sse", "--colour"),
        ("check",),
        ("scan", "--recursive", "."),
    ],
)
def test_bad_arguments_exit_2_with_only_a_message_on_stderr(args: tuple[str, ...]) -> None:
    result = calltap(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "error:" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["compare", "check", "scan"])
def test_help_teaches_with_exit_codes_and_examples(command: str) -> None:
    result = calltap(command, "--help")
    assert result.returncode == 0
    assert "exit codes:" in result.stdout
    assert f"calltap {command} " in result.stdout.split("examples:")[1]


# --- check ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "verdict", "code"),
    [
        ("seed.upstream.sse", "clean", 0),
        ("seed.done-stripped.sse", "defective", 1),
        ("text.cut-mid-event.sse", "inconclusive", 3),
    ],
)
def test_check_verdicts_and_exit_codes(name: str, verdict: str, code: int) -> None:
    result = calltap("check", fixture(name), "--json")
    assert result.returncode == code
    assert json.loads(result.stdout)["verdict"] == verdict


def test_check_table_and_redacted_json() -> None:
    table = calltap("check", fixture("error.upstream.sse"))
    assert table.returncode == 1
    assert table.stdout.splitlines()[0] == "verdict: defective"
    assert "Provider returned error" in table.stdout
    redacted = calltap("check", fixture("error.upstream.sse"), "--json", "--redact")
    report = json.loads(redacted.stdout)
    assert [f["code"] for f in report["findings"]] == [
        "ERROR_IN_STREAM",
        "FINISH_REASON_MISSING",
        "DONE_MISSING",
    ]
    assert "Provider" not in redacted.stdout
    assert "Zanzibar" not in redacted.stdout


# --- scan ----------------------------------------------------------------------------------------


def write_pair(
    directory: Path,
    *,
    upstream: dict[str, str] | None = None,
    upstream_ended: str = "complete",
) -> None:
    leg = {"method": "POST", "path": "/v1/chat/completions", "status": 200}
    pair = {
        "request_id": directory.name,
        "pairing": "header",
        "legs": {
            "downstream": {**leg, "response_headers": {}, "ended": "complete"},
            "upstream": {**leg, "response_headers": upstream or {}, "ended": upstream_ended},
        },
    }
    (directory / "pair.json").write_text(json.dumps(pair))


def record(root: Path, request_id: str, upstream: str | None, downstream: str | None) -> Path:
    directory = root / "2026-11-30" / request_id
    directory.mkdir(parents=True)
    if upstream:
        shutil.copy(fixture(upstream), directory / "upstream.sse")
    if downstream:
        shutil.copy(fixture(downstream), directory / "downstream.sse")
    return directory


def test_scan_summarises_a_recordings_tree(tmp_path: Path) -> None:
    record(tmp_path, "req-equal", "seed.upstream.sse", "seed.remapped.sse")
    record(tmp_path, "req-dropped", "seed.upstream.sse", "seed.one-call.sse")
    gzipped = record(tmp_path, "req-gzip", None, "text.faithful.sse")
    (gzipped / "upstream.sse").write_bytes(gzip.compress(fixture("text.upstream.sse").read_bytes()))
    write_pair(gzipped, upstream={"Content-Encoding": "gzip"})
    record(tmp_path, "req-single", None, "seed.done-stripped.sse")
    partial = record(tmp_path, "req-partial", "seed.upstream.sse", None)
    (partial / "downstream.sse.partial").write_bytes(b"data: {")

    result = calltap("scan", tmp_path, "--json")
    summary = json.loads(result.stdout)
    assert result.returncode == 1
    assert summary["captures"] == 5
    assert summary["verdicts"] == {"equal": 2, "diverged": 1, "defective": 1, "clean": 1}
    assert summary["codes"]["TOOL_CALLS_DROPPED"] == 1
    assert summary["codes"]["DONE_MISSING"] == 1
    assert summary["not_equal"] == [
        {
            "capture": "2026-11-30/req-dropped",
            "kind": "pair",
            "verdict": "diverged",
            "codes": ["TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED"],
        },
        {
            "capture": "2026-11-30/req-single",
            "kind": "downstream",
            "verdict": "defective",
            "codes": ["DONE_MISSING"],
        },
    ]


def chat_request(*tools: str) -> dict[str, object]:
    """A Chat Completions request offering these function tools."""
    return {"model": "gpt-4o", "stream": True,
            "messages": [{"role": "user", "content": "What is the weather?"}],
            "tools": [{"type": "function", "function": {"name": name, "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}}}}
                for name in tools]}


def test_scan_compares_the_recorded_requests_too(tmp_path: Path) -> None:
    """Equal answers, but the provider was offered one of the client's two tools."""
    directory = record(tmp_path, "req-asked", "seed.upstream.sse", "seed.litellm.sse")
    write_pair(directory)
    pair = json.loads((directory / "pair.json").read_text())
    for side, tools in (("downstream", ("weather", "clock")), ("upstream", ("weather",))):
        (directory / f"{side}.request").write_text(json.dumps(chat_request(*tools)))
        pair["legs"][side]["request_file"] = f"{side}.request"
    (directory / "pair.json").write_text(json.dumps(pair))

    result = calltap("scan", tmp_path, "--json")
    summary = json.loads(result.stdout)
    assert result.returncode == 1
    assert summary["verdicts"] == {"diverged": 1}
    assert summary["codes"] == {"REQUEST_TOOL_DROPPED": 1}
    assert summary["not_equal"] == [{"capture": "2026-11-30/req-asked", "kind": "pair",
                                     "verdict": "diverged", "codes": ["REQUEST_TOOL_DROPPED"]}]
    table = calltap("scan", tmp_path)
    assert "REQUEST_TOOL_DROPPED" in table.stdout and "2026-11-30/req-asked" in table.stdout


def test_scan_exit_codes_follow_the_worst_verdict(tmp_path: Path) -> None:
    record(tmp_path, "req-1", "seed.upstream.sse", "seed.litellm.sse")
    equal = calltap("scan", tmp_path)
    assert equal.returncode == 0
    assert equal.stdout.startswith("1 captures: 1 equal")
    record(tmp_path, "req-2", "text.upstream.sse", "text.cut-mid-event.sse")
    assert calltap("scan", tmp_path).returncode == 3
    record(tmp_path, "req-3", "n2.upstream.sse", "n2.choice-dropped.sse")
    worst = calltap("scan", tmp_path)
    assert worst.returncode == 1
    assert "2026-11-30/req-3" in worst.stdout


def test_scan_of_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "recordings"
    assert_usage_error(
        calltap("scan", missing), f"calltap scan: cannot read '{missing}': no such directory"
    )
    file = fixture("seed.upstream.sse")
    assert_usage_error(
        calltap("scan", file), f"calltap scan: cannot read '{file}': not a directory"
    )


def test_the_bundled_examples_say_what_their_readme_says() -> None:
    result = calltap("scan", EXAMPLES, "--json")
    summary = json.loads(result.stdout)
    assert result.returncode == 1
    verdicts = {entry["capture"]: entry["codes"] for entry in summary["not_equal"]}
    assert verdicts == {
        "2026-11-30/masked-eof": ["FINISH_REASON_CHANGED", "USAGE_CHANGED"],
        "2026-11-30/tool-calls-dropped": ["TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED"],
    }
    assert summary["verdicts"] == {"equal": 1, "diverged": 2}
