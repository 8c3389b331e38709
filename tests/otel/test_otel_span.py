"""The span a compared pair becomes, from data alone: where it sits on the trace, what it is named
and says, its findings as evaluation events, and nothing of the traffic unless content is on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from calltap.codes import Code
from calltap.otel.span import EVALUATION_EVENT, pair_span
from calltap.proxy.capture import Claim
from calltap.proxy.hooks import Alarm, PairCompared, Recording
from calltap.proxy.relay import Leg
from calltap.transcript import Finding

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
MINTED = f"00-{'ab' * 16}-{'cd' * 8}-01"


def leg(side: str, headers: list[tuple[str, str]] | None = None, *, started: float = 100.0,
        path: str = "/v1/chat/completions") -> Leg:
    made = Leg(side, "POST", path, headers or [], started)
    made.first_byte_at, made.finished, made.status = started + 0.25, started + 1.5, 200
    made.compared = True
    return made


def side(finish: list[str], usage: dict[str, int] | None,
         dialect: str = "openai.chat") -> dict[str, Any]:
    return {"dialect": dialect, "finish_reasons": finish, "usage": usage, "findings": []}


def compared(downstream: Leg | None, upstream: Leg | None, *, alarms: list[Alarm] | None = None,
             verdict: str = "equal", report: dict[str, Any] | None = None) -> PairCompared:
    recording = Recording("req-1", Claim(Path("/recordings/2026-12-05/req-1")), "pair",
                          downstream=downstream, attempts=[upstream] if upstream else [],
                          pairing="header")
    if report is None:
        report = {"verdict": verdict,
                  "upstream": side(["tool_calls"], {"input_tokens": 82, "output_tokens": 41}),
                  "downstream": side(["tool_calls"], {"input_tokens": 82, "output_tokens": 41}),
                  "requests": {"downstream": {"dialect": "openai.chat", "model": "gpt-4o-mini",
                                              "stream": True},
                               "upstream": {"dialect": "openai.chat", "model": "gpt-4o-mini",
                                            "stream": True}}}
    alarms = alarms or []
    return PairCompared(recording, {"comparison": report}, "compare", None, verdict=verdict,
                        codes=[str(alarm.finding.code) for alarm in alarms], alarms=alarms,
                        chosen=upstream)


def dropped(detail: str = "missing downstream: clock", tool: str | None = None) -> Alarm:
    return Alarm("divergence", Finding(Code.TOOL_CALLS_DROPPED, "downstream", 0, 1,
                                       detail=detail, tool=tool), "downstream")


def test_the_span_is_a_child_of_the_clients_span_on_its_trace() -> None:
    traceparent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    span = pair_span(compared(leg("downstream", [("TraceParent", traceparent)]),
                              leg("upstream")), bits=lambda n: 7)
    assert span is not None
    assert (span.trace_id, span.parent_span_id) == (int(CLIENT_TRACE, 16), int(CLIENT_SPAN, 16))
    assert span.span_id == 7
    assert (span.start, span.end) == (100_000_000_000, 101_500_000_000)


def test_a_minted_traceparent_makes_calltaps_span_the_root_the_gateway_names() -> None:
    client = leg("downstream")
    client.traceparent = MINTED
    span = pair_span(compared(client, leg("upstream")))
    assert span is not None
    assert (span.trace_id, span.span_id, span.parent_span_id) == (
        int("ab" * 16, 16), int("cd" * 8, 16), None)


def test_an_unsampled_client_trace_gets_no_span() -> None:
    traceparent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-00"
    assert pair_span(compared(leg("downstream", [("traceparent", traceparent)]),
                              leg("upstream"))) is None


def test_an_invalid_traceparent_starts_a_trace_of_its_own() -> None:
    span = pair_span(compared(leg("downstream", [("traceparent", "00-zz-01")]), leg("upstream")),
                     bits=lambda n: (1 << n) - 1)
    assert span is not None
    assert span.parent_span_id is None
    assert span.trace_id == (1 << 128) - 1


def test_a_route_calltap_does_not_compare_gets_no_span() -> None:
    other = leg("downstream")
    other.compared = False
    assert pair_span(compared(other, None)) is None


def test_the_span_is_named_and_attributed_by_the_genai_conventions() -> None:
    span = pair_span(compared(leg("downstream"), leg("upstream", started=100.1)))
    assert span is not None
    assert span.name == "chat gpt-4o-mini"
    attributes = span.attributes
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) \
        == (82, 41)
    assert attributes["gen_ai.response.time_to_first_chunk"] == 0.25
    assert attributes["calltap.upstream.time_to_first_chunk"] == 0.25
    assert attributes["calltap.verdict"] == "equal"
    assert attributes["calltap.pairing"] == "header"
    assert attributes["calltap.attempts"] == 1
    assert attributes["calltap.capture"] == "/recordings/2026-12-05/req-1"
    assert not any(name.startswith("calltap.upstream.usage") for name in attributes)
    assert span.error is None and span.events == []


def test_the_providers_leg_is_named_beside_where_it_differs() -> None:
    report = {"verdict": "diverged",
              "upstream": side(["tool_calls"], {"input_tokens": 82, "output_tokens": 41},
                               "anthropic.messages"),
              "downstream": side(["stop"], {"input_tokens": 10, "output_tokens": 4}),
              "requests": {"downstream": {"dialect": "openai.chat", "model": "claude"},
                           "upstream": {"dialect": "anthropic.messages",
                                        "model": "claude-sonnet-4-5"}}}
    span = pair_span(compared(leg("downstream"), leg("upstream", path="/v1/messages"),
                              report=report, verdict="diverged"))
    assert span is not None
    attributes = span.attributes
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["calltap.upstream.request.model"] == "claude-sonnet-4-5"
    assert attributes["calltap.upstream.finish_reasons"] == ["tool_calls"]
    assert attributes["calltap.upstream.usage.input_tokens"] == 82
    assert span.error == "diverged"


def test_gemini_generates_content_and_bedrock_claude_is_bedrock() -> None:
    gemini = {"verdict": "equal", "upstream": side(["STOP"], None, "google.gemini"),
              "downstream": side(["STOP"], None, "google.gemini")}
    span = pair_span(compared(leg("downstream"), leg("upstream"), report=gemini))
    assert span is not None
    assert span.attributes["gen_ai.operation.name"] == "generate_content"
    assert span.attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert span.name == "generate_content"
    claude = {"verdict": "equal", "upstream": side([], None, "anthropic.messages"),
              "downstream": side([], None, "anthropic.messages")}
    bedrock = leg("upstream", path="/model/anthropic.claude-3-5-sonnet/invoke")
    span = pair_span(compared(leg("downstream"), bedrock, report=claude))
    assert span is not None
    assert span.attributes["gen_ai.provider.name"] == "aws.bedrock"


def test_a_breaking_finding_is_an_error_and_an_evaluation_event() -> None:
    span = pair_span(compared(leg("downstream"), leg("upstream"), alarms=[dropped()],
                              verdict="diverged"))
    assert span is not None
    assert span.error == "TOOL_CALLS_DROPPED"
    assert span.attributes["error.type"] == "TOOL_CALLS_DROPPED"
    (event,) = span.events
    assert event.name == EVALUATION_EVENT
    assert event.timestamp == span.end
    assert event.attributes == {
        "gen_ai.evaluation.name": "calltap.divergence",
        "gen_ai.evaluation.score.label": "TOOL_CALLS_DROPPED",
        "gen_ai.evaluation.explanation": Code.TOOL_CALLS_DROPPED.explanation
        + " (choice 0, count 1)",
        "calltap.severity": "fatal",
        "calltap.alarm": "divergence",
        "calltap.side": "downstream",
        "calltap.choice": 0,
        "calltap.count": 1,
    }


def test_content_on_adds_the_findings_detail_and_tool() -> None:
    alarm = Alarm("divergence", Finding(Code.REQUEST_TOOL_DROPPED, "request", turn=2,
                                        detail="dropped: weather", tool="weather"), "request")
    span = pair_span(compared(leg("downstream"), leg("upstream"), alarms=[alarm]), content=True)
    assert span is not None
    (event,) = span.events
    assert event.attributes["calltap.detail"] == "dropped: weather"
    assert event.attributes["calltap.tool"] == "weather"
    assert event.attributes["calltap.turn"] == 2


secrets = st.text(st.characters(codec="utf-8", categories=["L", "N"]), min_size=12,
                  max_size=40)


@given(detail=secrets, tool=secrets, content=st.booleans())
def test_no_captured_text_leaves_unless_content_is_on(detail: str, tool: str,
                                                      content: bool) -> None:
    """Whatever a finding's detail and tool name hold (text and argument values quoted from the
    traffic), they appear in no attribute of the span or its events without `content`."""
    span = pair_span(compared(leg("downstream"), leg("upstream"),
                              alarms=[dropped(detail, tool)], verdict="diverged"),
                     content=content)
    assert span is not None
    exported = json.dumps([span.name, span.attributes, span.error,
                           [event.attributes for event in span.events]], ensure_ascii=False)
    assert (detail in exported) is content
    assert (tool in exported) is content
