"""A compared pair as an OpenTelemetry span's data: sans-IO (no SDK, no socket, no clock).

The span is calltap's hop on the client's trace: its parent is the span the client's
`traceparent` names, as the front saw it. When the client sent none, the front minted one and
forwarded it, so the gateway's own spans name that minted id as their parent: calltap's span
takes that id and becomes the trace's root, with the gateway's spans beneath it. A client that
sent a traceparent unsampled gets no span (calltap keeps to the sampling decision of the trace it
joins).

Named and attributed by the OpenTelemetry GenAI conventions from what the client got (the
downstream leg); where the provider's leg says otherwise (another model asked for, other finish
reasons or token counts), `calltap.upstream.*` says so beside it. Each breaking finding is a
`gen_ai.evaluation.result` event whose explanation is the code's fixed sentence and its place:
no argument value, no text, no tool name leaves unless `content` is on.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from calltap.proxy.hooks import Alarm, PairCompared
from calltap.proxy.ids import parse_traceparent
from calltap.proxy.relay import Leg

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "calltap.divergence"
SAMPLED = 0x01
ERROR_VERDICTS = frozenset({"diverged", "defective"})
OPERATIONS = {"google.gemini": "generate_content"}
"""gen_ai.operation.name by dialect; every other dialect is a chat."""
PROVIDERS = {"openai.chat": "openai", "openai.responses": "openai",
             "anthropic.messages": "anthropic", "bedrock.converse": "aws.bedrock",
             "google.gemini": "gcp.gemini", "ollama.chat": "ollama"}
"""gen_ai.provider.name by the dialect the provider spoke (the conventions' well-known names)."""

Attributes = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    timestamp: int
    """Nanoseconds since the epoch."""
    attributes: Attributes


@dataclass(frozen=True, slots=True)
class PairSpan:
    """Everything the exporter needs to write the span, ids as integers."""

    name: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    start: int
    end: int
    attributes: Attributes
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None
    """The status description when the status is ERROR (the breaking codes, or the verdict)."""
    kind: int = SPAN_KIND_CLIENT
    """A pair's span is a client's call (CLIENT); a probe's or replay's run is INTERNAL."""


def pair_span(event: PairCompared, *, content: bool = False,
              bits: Callable[[int], int] = random.getrandbits) -> PairSpan | None:
    """The span of a finalized capture of a compared route, or None (a route calltap does not
    compare, an unsampled trace). `bits(n)` gives random ids."""
    recording = event.recording
    leg = recording.downstream or event.chosen
    if leg is None or not leg.compared:
        return None
    context = _context(leg, bits)
    if context is None:
        return None
    trace_id, span_id, parent = context
    attributes = genai_attributes(event, leg)
    name = f"{attributes['gen_ai.operation.name']} {attributes.get('gen_ai.request.model', '')}"
    attributes.update(_calltap_attributes(event))
    start = _nanos(leg.started)
    end = max(start, _nanos(leg.finished or leg.started))
    events = [finding_event(alarm, end, content=content) for alarm in event.alarms]
    breaking = list(dict.fromkeys(str(alarm.finding.code) for alarm in event.alarms))
    error = None
    if breaking:
        error = ", ".join(breaking)
    elif event.verdict in ERROR_VERDICTS:
        error = event.verdict
    if error is not None:
        attributes["error.type"] = breaking[0] if breaking else str(event.verdict)
    return PairSpan(name.rstrip(), trace_id, span_id, parent, start, end, attributes, events,
                    error)


def _context(leg: Leg, bits: Callable[[int], int]) -> tuple[int, int, int | None] | None:
    """(trace id, span id, parent span id) from the traceparent the leg arrived with or the
    one the front minted for it; a new trace when there is neither; None when unsampled."""
    header = next((value for name, value in leg.request_headers
                   if name.lower() == "traceparent"), None)
    if header is not None and parse_traceparent(header) is not None:
        _, trace, parent, flags = header.strip(" \t")[:55].split("-")
        if not int(flags, 16) & SAMPLED:
            return None
        return int(trace, 16), bits(64) or 1, int(parent, 16)
    if leg.traceparent is not None:
        _, trace, minted, _flags = leg.traceparent.split("-")
        return int(trace, 16), int(minted, 16), None
    return bits(128) or 1, bits(64) or 1, None


def genai_attributes(event: PairCompared, leg: Leg) -> Attributes:
    """The GenAI conventions' attributes, from the client's side of the pair; the provider's
    side beside them under `calltap.upstream.` where it differs."""
    report = event.document.get("comparison") or event.document.get("check") or {}
    client = report.get("downstream") or report.get("capture") or {}
    provider = report.get("upstream") or {}
    asks = report.get("requests") or {}
    asked, sent = asks.get("downstream") or {}, asks.get("upstream") or {}
    dialect = client.get("dialect") or provider.get("dialect") or asked.get("dialect")
    provider_dialect = provider.get("dialect") or dialect
    provider_leg = event.chosen or leg
    if provider_dialect == "anthropic.messages" and "/model/" in provider_leg.path:
        provider_dialect = "bedrock.converse"  # Claude on Bedrock: InvokeModel's path
    attributes: Attributes = {
        "gen_ai.operation.name": OPERATIONS.get(dialect or "", "chat"),
    }
    _put(attributes, "gen_ai.provider.name", PROVIDERS.get(provider_dialect or ""))
    _put(attributes, "gen_ai.request.model", asked.get("model") or sent.get("model"))
    _put(attributes, "gen_ai.request.stream", asked.get("stream"))
    _put(attributes, "gen_ai.response.finish_reasons", client.get("finish_reasons") or None)
    usage = client.get("usage") or {}
    _put(attributes, "gen_ai.usage.input_tokens", usage.get("input_tokens"))
    _put(attributes, "gen_ai.usage.output_tokens", usage.get("output_tokens"))
    _put(attributes, "gen_ai.response.time_to_first_chunk", _first_chunk(leg))
    _put(attributes, "http.response.status_code", leg.status)
    if provider:
        _differing(attributes, "calltap.upstream.request.model", sent.get("model"),
                   attributes.get("gen_ai.request.model"))
        _differing(attributes, "calltap.upstream.finish_reasons",
                   provider.get("finish_reasons") or None,
                   attributes.get("gen_ai.response.finish_reasons"))
        theirs = provider.get("usage") or {}
        for name in ("input_tokens", "output_tokens"):
            _differing(attributes, f"calltap.upstream.usage.{name}", theirs.get(name),
                       usage.get(name))
    if event.chosen is not None and event.chosen is not leg:
        _put(attributes, "calltap.upstream.time_to_first_chunk", _first_chunk(event.chosen))
        _put(attributes, "calltap.upstream.status_code", event.chosen.status)
    return attributes


def _calltap_attributes(event: PairCompared) -> Attributes:
    recording = event.recording
    attributes: Attributes = {
        "calltap.request_id": recording.key,
        "calltap.mode": event.mode,
        "calltap.attempts": len(recording.attempts),
        "calltap.capture": str(recording.directory),
        "calltap.codes": list(event.codes),
    }
    _put(attributes, "calltap.verdict", event.verdict)
    _put(attributes, "calltap.pairing", recording.pairing)
    if recording.orphan:
        attributes["calltap.orphaned"] = True
    if event.skipped is not None:
        attributes["calltap.skipped"] = event.skipped.reason
    return attributes


def finding_event(alarm: Alarm, timestamp: int, *, content: bool = False) -> SpanEvent:
    """One breaking finding as a `gen_ai.evaluation.result` event. Its explanation is the
    code's fixed sentence and where the finding is (choice, turn, count); the finding's
    detail and tool name, which may quote the traffic, only with `content`."""
    finding = alarm.finding
    place = [f"{name} {value}" for name, value in
             (("choice", finding.choice), ("turn", finding.turn), ("count", finding.count))
             if value is not None]
    explanation = finding.code.explanation + (f" ({', '.join(place)})" if place else "")
    attributes: Attributes = {
        "gen_ai.evaluation.name": EVALUATION_NAME,
        "gen_ai.evaluation.score.label": str(finding.code),
        "gen_ai.evaluation.explanation": explanation,
        "calltap.severity": str(alarm.severity),
        "calltap.alarm": alarm.event,
    }
    _put(attributes, "calltap.side", alarm.side)
    for name in ("choice", "turn", "count"):
        _put(attributes, f"calltap.{name}", getattr(finding, name))
    if content:
        _put(attributes, "calltap.detail", finding.detail or None)
        _put(attributes, "calltap.tool", finding.tool)
    return SpanEvent(EVALUATION_EVENT, timestamp, attributes)


def _put(attributes: Attributes, name: str, value: Any) -> None:
    if value is not None:
        attributes[name] = value


def _differing(attributes: Attributes, name: str, value: Any, client: Any) -> None:
    if value is not None and value != client:
        attributes[name] = value


def _first_chunk(leg: Leg) -> float | None:
    if leg.first_byte_at is None:
        return None
    return round(max(0.0, leg.first_byte_at - leg.started), 6)


def _nanos(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
