"""The `--json` object users' scripts read, redaction, and the rich tables."""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from calltap.compare import check_capture, compare_captures
from calltap.report import check_json, comparison_json, render_check, render_comparison
from calltap.transcript import Capture

FIXTURES = Path(__file__).parent / "fixtures"
CASES = tomllib.loads((FIXTURES / "cases.toml").read_text())["case"]
PLANTED = [
    "Taipei",
    "weather",
    "clock",
    "call_",
    "chatcmpl",
    "Zanzibar",
    "search_flights",
    "TPE",
    "9007199254740993",
    "Provider returned error",
    "night market",
    "Preheat",
]
"""Names, argument values, ids and text the fixtures carry; none may survive redaction."""


def capture(name: str) -> Capture:
    return Capture((FIXTURES / "openai_chat" / name).read_bytes())


def seed_comparison():
    return compare_captures(capture("seed.upstream.sse"), capture("seed.one-call.sse"))


def test_comparison_json_is_the_design_object() -> None:
    report = comparison_json(seed_comparison())
    assert list(report) == ["verdict", "upstream", "downstream", "findings"]
    assert report["verdict"] == "diverged"
    assert report["upstream"] == {
        "dialect": "openai.chat",
        "framing": "sse",
        "events": 12,
        "bytes": len((FIXTURES / "openai_chat" / "seed.upstream.sse").read_bytes()),
        "choices": 1,
        "tool_calls": 2,
        "finish_reasons": ["tool_calls"],
        "usage": {"input_tokens": 82, "output_tokens": 41},
        "findings": [],
    }
    assert report["downstream"]["tool_calls"] == 1
    dropped, changed = report["findings"]
    assert dropped == {
        "code": "TOOL_CALLS_DROPPED",
        "severity": "fatal",
        "side": "downstream",
        "choice": 0,
        "count": 1,
        "position": {"event": 5, "byte": 1619},
        "detail": "missing downstream: clock",
    }
    assert (changed["code"], changed["severity"]) == ("TOOL_CALL_SET_CHANGED", "fatal")
    assert json.loads(json.dumps(report)) == report


def test_side_findings_carry_their_side_and_shared_defects_stay_on_the_sides() -> None:
    report = comparison_json(
        compare_captures(capture("error.upstream.sse"), capture("error.faithful.sse"))
    )
    assert report["verdict"] == "equal"
    assert report["findings"] == []
    for side in ("upstream", "downstream"):
        findings = report[side]["findings"]
        assert [f["code"] for f in findings] == [
            "ERROR_IN_STREAM",
            "FINISH_REASON_MISSING",
            "DONE_MISSING",
        ]
        assert {f["side"] for f in findings} == {side}


def test_a_finding_without_position_has_null_event_and_byte() -> None:
    silent = Capture(b": keep-alive\n\n", path="/v1/chat/completions")
    report = comparison_json(compare_captures(capture("text.upstream.sse"), silent))
    dropped = next(f for f in report["findings"] if f["code"] == "CHOICE_DROPPED")
    assert dropped["position"] == {"event": None, "byte": None}
    assert (dropped["severity"], dropped["choice"]) == ("fatal", 0)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case["name"])
def test_redacted_json_holds_no_names_values_ids_or_text(case: dict) -> None:
    comparison = compare_captures(capture_of(case["upstream"]), capture_of(case["downstream"]))
    redacted = json.dumps(comparison_json(comparison, redact=True))
    for planted in PLANTED:
        assert planted not in redacted
    assert '"detail"' not in redacted


def capture_of(relative: str) -> Capture:
    return Capture((FIXTURES / relative).read_bytes())


def test_unredacted_json_does_carry_the_details_redaction_removes() -> None:
    report = json.dumps(
        comparison_json(
            compare_captures(capture("seed.upstream.sse"), capture("seed.all-index-0.sse"))
        )
    )
    assert "Taipei" in report
    assert "call_Ck7mR2bLs5nY" in report


def test_redacted_table_holds_no_names_values_ids_or_text() -> None:
    comparison = compare_captures(capture("seed.upstream.sse"), capture("seed.all-index-0.sse"))
    redacted = render(lambda console: render_comparison(comparison, console, redact=True))
    plain = render(lambda console: render_comparison(comparison, console))
    assert "Taipei" in plain
    for planted in PLANTED:
        assert planted not in redacted
    assert "TOOL_CALLS_DROPPED" in redacted


def test_table_starts_with_the_verdict_and_explains_each_finding() -> None:
    output = render(lambda console: render_comparison(seed_comparison(), console))
    assert output.splitlines()[0] == "verdict: diverged"
    assert "tool calls the provider made are missing from what the client got" in output
    assert "5:1619" in output


def test_check_json_mirrors_one_side() -> None:
    result = check_capture(capture("error.upstream.sse"))
    report = check_json(result)
    assert list(report) == ["verdict", "capture", "findings"]
    assert report["verdict"] == "defective"
    assert report["capture"]["events"] == 4
    assert [f["code"] for f in report["findings"]] == [
        "ERROR_IN_STREAM",
        "FINISH_REASON_MISSING",
        "DONE_MISSING",
    ]
    redacted = json.dumps(check_json(result, redact=True))
    assert "Provider returned error" not in redacted
    assert "Provider returned error" in json.dumps(report)


def test_check_table() -> None:
    output = render(
        lambda console: render_check(check_capture(capture("text.upstream.sse")), console)
    )
    assert output.splitlines()[0] == "verdict: clean"
    assert "no findings" in output


def render(draw) -> str:
    buffer = io.StringIO()
    draw(Console(file=buffer, width=200, color_system=None))
    return buffer.getvalue()
