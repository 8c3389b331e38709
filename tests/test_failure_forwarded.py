"""A provider stream that broke off, answered by the gateway with an error, is faithful.

LiteLLM 1.97.0 meets a provider that resets mid-stream with an error frame in the client's stream
(or an HTTP 500 when nothing was sent yet): the client learns the truth. Earlier releases passed
the cut answer off as finished (`finish_reason: "stop"`, litellm #33404), which stays a divergence.
"""

from __future__ import annotations

import json

from calltap.codes import Code
from calltap.compare import compare_captures
from calltap.transcript import Capture
from fixtures.chat_stream import chunk, delta, sse

CHAT = "/v1/chat/completions"
TEXT = ["The ", "weather ", "in Taipei"]


def provider_cut() -> bytes:
    """Text chunks, then the connection drops: no finish reason, no [DONE]."""
    return sse([chunk([delta(role="assistant", content="")]),
                *(chunk([delta(content=part)]) for part in TEXT)], done=False)


def gateway_error_frame() -> bytes:
    error = {"error": {"message": "litellm.APIConnectionError: Response payload is not completed",
                       "type": None, "param": None, "code": "500"}}
    return sse([chunk([delta(role="assistant", content="")]),
                *(chunk([delta(content=part)]) for part in TEXT), error], done=False)


def gateway_masked_stop() -> bytes:
    return sse([chunk([delta(role="assistant", content="")]),
                *(chunk([delta(content=part)]) for part in TEXT),
                chunk([delta(finish_reason="stop")])])


def test_an_error_frame_after_a_provider_cut_is_the_failure_forwarded() -> None:
    comparison = compare_captures(Capture(provider_cut(), CHAT, status=200),
                                  Capture(gateway_error_frame(), CHAT, status=200))
    assert comparison.verdict == "equal"
    assert comparison.findings == []
    assert Code.ERROR_IN_STREAM in [f.code for f in comparison.downstream.findings]
    assert Code.DONE_MISSING in [f.code for f in comparison.upstream.findings]


def test_an_error_status_after_a_provider_cut_is_the_failure_forwarded() -> None:
    body = json.dumps({"error": {"message": "Response payload is not completed",
                                 "type": "api_connection_error", "code": "500"}}).encode()
    comparison = compare_captures(Capture(provider_cut(), CHAT, status=200),
                                  Capture(body, CHAT, status=500))
    assert (comparison.verdict, comparison.findings) == ("equal", [])


def test_a_cut_passed_off_as_a_finished_answer_is_still_a_divergence() -> None:
    comparison = compare_captures(Capture(provider_cut(), CHAT, status=200),
                                  Capture(gateway_masked_stop(), CHAT, status=200))
    assert comparison.verdict == "diverged"
    assert Code.FINISH_REASON_CHANGED in [f.code for f in comparison.findings]


def test_an_error_after_a_whole_provider_answer_is_still_a_divergence() -> None:
    whole = sse([chunk([delta(content="".join(TEXT))]), chunk([delta(finish_reason="stop")])])
    comparison = compare_captures(Capture(whole, CHAT, status=200),
                                  Capture(gateway_error_frame(), CHAT, status=200))
    assert comparison.verdict == "diverged"
    codes = {f.code for f in comparison.findings}
    assert {Code.ERROR_IN_STREAM, Code.DONE_MISSING} <= codes
