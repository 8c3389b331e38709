"""A comparison in which one side could not be read says nothing across the sides.

An upstream in a dialect calltap does not read (Ollama's `/api/generate` NDJSON, a proxy's HTML
error page) used to give a faithful gateway a fatal CHOICE_ADDED. Now such a comparison holds only
the warnings, so it is inconclusive; each side's own findings stay in its transcript.
"""

from __future__ import annotations

import pytest

from calltap.codes import Code, Severity
from calltap.compare import compare_captures
from calltap.transcript import Capture
from fixtures.chat_stream import call_start, chunk, delta, sse

NDJSON = (
    b'{"model":"llama3.2","created_at":"2026-12-01T10:00:00Z","response":"Oslo","done":false}\n'
    b'{"model":"llama3.2","created_at":"2026-12-01T10:00:01Z","response":"","done":true,'
    b'"done_reason":"stop","prompt_eval_count":12,"eval_count":9}\n'
)
"""Ollama's `/api/generate` stream: NDJSON, but of no dialect calltap reads."""
ONE_LINE = NDJSON.splitlines(keepends=True)[1]
"""One NDJSON line is a JSON object, but of no dialect calltap reads, whatever the path says."""
CHAT = "/v1/chat/completions"
HTML = b"<html><body><h1>502 Bad Gateway</h1></body></html>\n"


def chat_with_gap() -> bytes:
    """A readable downstream with a defect of its own: its one call at index 1."""
    return sse(
        [
            chunk([delta(tool_calls=[call_start(1, "call_1", "weather", '{"city": "Oslo"}')])]),
            chunk([delta(finish_reason="tool_calls")]),
        ]
    )


@pytest.mark.parametrize("unreadable", [NDJSON, ONE_LINE, HTML], ids=["ndjson", "line", "html"])
@pytest.mark.parametrize("side", ["upstream", "downstream"])
def test_an_unreadable_side_leaves_only_warnings_and_each_sides_own_findings(
    unreadable: bytes, side: str
) -> None:
    readable = Capture(chat_with_gap(), path=CHAT)
    captures = {"upstream": readable, "downstream": readable, side: Capture(unreadable, CHAT)}
    comparison = compare_captures(captures["upstream"], captures["downstream"])
    assert comparison.verdict == "inconclusive"
    assert comparison.findings[0].code is Code.JSON_INVALID
    assert {(f.severity, f.side) for f in comparison.findings} == {(Severity.WARNING, side)}
    other = comparison.downstream if side == "upstream" else comparison.upstream
    assert [f.code for f in other.findings if f.severity is Severity.FATAL] == [
        Code.TOOL_CALL_INDEX_GAP
    ]
