"""ERROR_DROPPED: an error object the provider sent never reached the client.

Before this code, an upstream error in a 200 stream whose downstream copy simply lost it compared
equal: the upstream side defects are not divergences, and nothing else differed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from calltap.codes import Code, Severity
from calltap.compare import check, compare
from calltap.dialects import transcribe
from calltap.report import comparison_json
from calltap.transcript import Capture, Transcript
from fixtures.chat_stream import chunk, delta, sse

ERROR = {"error": {"message": "Provider returned error", "code": 502, "type": "upstream_error"}}


def read(body: bytes, **capture: Any) -> Transcript:
    return transcribe(Capture(body, **capture))


def text_stream(*tail: dict[str, Any]) -> bytes:
    """Two text chunks, then `tail`, and no finish reason nor [DONE]: a stream that broke off."""
    head = [
        chunk([delta(role="assistant", content="")]),
        chunk([delta(content="Here are three ideas")]),
    ]
    return sse([*head, *tail], done=False)


def test_the_code_is_fatal_and_explained() -> None:
    assert Code.ERROR_DROPPED.severity is Severity.FATAL
    assert Code.ERROR_DROPPED.explanation == (
        "an error object the provider sent never reached the client"
    )


def test_an_error_lost_from_an_otherwise_identical_stream_is_error_dropped() -> None:
    downstream = read(text_stream())
    comparison = compare(read(text_stream(ERROR)), downstream)
    assert comparison.verdict == "diverged"
    [finding] = comparison.findings
    assert (finding.code, finding.side, finding.choice, finding.count) == (
        Code.ERROR_DROPPED,
        "downstream",
        None,
        1,
    )
    assert finding.position == downstream.end_position
    assert finding.detail == "upstream_error: 502: Provider returned error"


def test_an_error_that_reached_the_client_in_another_shape_is_not_dropped() -> None:
    other = {"error": {"message": "Bad gateway", "code": 502}}
    comparison = compare(read(text_stream(ERROR)), read(text_stream(other)))
    assert comparison.verdict == "equal"
    assert comparison.findings == []


def test_an_error_status_body_downstream_carries_the_error() -> None:
    body = json.dumps({"error": {"message": "upstream failed", "type": "server_error"}}).encode()
    downstream = read(body, path="/v1/chat/completions", status=502)
    comparison = compare(read(text_stream(ERROR)), downstream)
    assert Code.ERROR_DROPPED not in {finding.code for finding in comparison.findings}


def test_an_error_only_downstream_is_error_in_stream_not_error_dropped() -> None:
    """The provider's stream was whole; the gateway put an error in the client's. (After a
    provider stream that broke off, that error is the failure forwarded: see
    test_failure_forwarded.py.)"""
    finished = chunk([delta(finish_reason="stop")])
    upstream = text_stream(finished) + b"data: [DONE]\n\n"
    downstream = text_stream(ERROR, finished) + b"data: [DONE]\n\n"
    comparison = compare(read(upstream), read(downstream))
    assert [finding.code for finding in comparison.findings] == [Code.ERROR_IN_STREAM]


@pytest.mark.parametrize("count", [2, 3])
def test_the_count_is_the_number_of_upstream_error_objects(count: int) -> None:
    comparison = compare(read(text_stream(*[ERROR] * count)), read(text_stream()))
    [finding] = comparison.findings
    assert (finding.code, finding.count) == (Code.ERROR_DROPPED, count)


def test_a_single_side_check_never_says_dropped() -> None:
    result = check(read(text_stream(ERROR)))
    assert Code.ERROR_DROPPED not in {finding.code for finding in result.findings}


def test_the_redacted_report_keeps_the_code_and_drops_the_message() -> None:
    comparison = compare(read(text_stream(ERROR)), read(text_stream()))
    redacted = comparison_json(comparison, redact=True)
    assert [finding["code"] for finding in redacted["findings"]] == ["ERROR_DROPPED"]
    assert redacted["findings"][0]["severity"] == "fatal"
    assert "Provider returned error" not in json.dumps(redacted)
    assert "Provider returned error" in json.dumps(comparison_json(comparison))
