"""The model of one pair's page, from recorded bytes: pure data, no I/O, no HTML.

Both legs are read again with the comparator (the same reading as `calltap compare`), so every
position on the page is one the findings name. Per choice the page sets the two legs side by
side: text, tool calls (decoded arguments pretty-printed; a call with no equal on the other side
is marked), finish reason. Each leg keeps its raw events (ordinal, byte offset, type, data) as the
framing decoded them, and each finding links to the event it points at in each leg: its own
position on its side, and on the other side the place that finding is about (the dropped call,
the upstream finish reason, …). With the pair's recorded requests, the page also sets the two
Asks side by side (`asks`: what the client asked, what the provider was asked) and lists the
request findings with the rest, each linked to the tool, turn or setting it is about.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from calltap import eventstream, ndjson, sse
from calltap.codes import Code
from calltap.compare import call_key, check, compare
from calltap.compare_pair import with_requests
from calltap.compare_requests import PairRequests
from calltap.dialects import transcribe, usage_requested
from calltap.dialects.content import EncodingError, decode_content
from calltap.dialects.framing import STREAM_FRAMINGS, sniff_framing
from calltap.report import check_json, comparison_json
from calltap.transcript import Capture, Choice, Finding, Position, ToolCall, Transcript, Usage
from calltap.view.asks import RequestsView, requests_view

MAX_EVENTS = 2000
"""Raw events listed per leg; the rest are in the raw file."""
MAX_DATA = 4000
"""Characters of one raw event's data shown; the rest are in the raw file."""
FOLD_LINES = 12
FOLD_CHARS = 600
"""Arguments longer than this are folded (a click unfolds them)."""
SIDES = ("upstream", "downstream")
SEVERITY_RANK = {"fatal": 0, "negotiable": 1, "warning": 2, "cosmetic": 3}


@dataclass(slots=True)
class RawEvent:
    ordinal: int
    offset: int
    kind: str
    data: str
    cut: bool
    anchor: str
    pointed: bool = False


@dataclass(slots=True)
class CallView:
    name: str
    arguments: str
    folded: bool
    id: str | None
    index: int | None
    fragments: int
    state: str
    """`kept` (an equal call is on the other side), `missing` (upstream, not downstream) or
    `extra` (downstream only)."""
    link: str | None


@dataclass(slots=True)
class ChoiceView:
    text: str
    finish_reason: str | None
    raw_finish_reason: str | None
    calls: list[CallView]
    finish_link: str | None


@dataclass(slots=True)
class ChoiceRow:
    index: int
    upstream: ChoiceView | None
    downstream: ChoiceView | None


@dataclass(slots=True)
class FindingView:
    code: str
    severity: str
    side: str | None
    choice: int | None
    count: int | None
    event: int | None
    byte: int | None
    detail: str
    explanation: str
    links: dict[str, str] = field(default_factory=dict)
    turn: int | None = None
    """A request finding's turn: the index of the client's turn it is about."""
    tool: str | None = None
    """A request finding's tool, by name."""
    places: list[tuple[str, str]] = field(default_factory=list)
    """Where a request finding is marked among the Asks, as (label, anchor)."""


@dataclass(slots=True)
class LegView:
    side: str
    dialect: str
    framing: str | None
    events: int
    bytes: int
    usage: Usage | None
    terminal_seen: bool
    findings: list[FindingView]
    raw: list[RawEvent]
    raw_total: int


@dataclass(slots=True)
class PairPage:
    verdict: str
    findings: list[FindingView]
    choices: list[ChoiceRow]
    legs: dict[str, LegView]
    report: dict[str, Any]
    """The comparison (or check) object of `calltap compare --json`."""
    structural: dict[str, Any]
    """The same, redacted: codes, severities, positions and counts only."""
    requests: RequestsView | None = None
    """Both Asks, when the pair's requests were recorded and compared."""

    @property
    def headline(self) -> FindingView | None:
        """The finding to read first: the first of the worst severity."""
        ranked = sorted(self.findings, key=lambda f: SEVERITY_RANK.get(f.severity, 9))
        return ranked[0] if ranked else None


def build_page(upstream: Capture | None, downstream: Capture | None, *,
               request: bytes | None = None, requests: PairRequests | None = None) -> PairPage:
    """The page of a pair (both captures) or of a single leg (one of them); `request` is the
    client's request body, which says whether it asked for usage; `requests` the pair's
    recorded requests, compared and shown with the answers (a pair's page only)."""
    captures = {side: capture for side, capture in zip(SIDES, (upstream, downstream), strict=True)
                if capture is not None}
    if not captures:
        raise ValueError("a page needs at least one capture")
    transcripts = {side: transcribe(capture) for side, capture in captures.items()}
    asks: RequestsView | None = None
    if len(transcripts) == 2:
        asked = request is None or usage_requested(transcripts["downstream"].dialect, request)
        result = with_requests(compare(transcripts["upstream"], transcripts["downstream"],
                                       usage_requested=asked), requests)
        verdict, findings = result.verdict, result.findings
        report, structural = comparison_json(result), comparison_json(result, redact=True)
        if result.requests is not None:
            asks = requests_view(result.requests, result.request_attempts)
    else:
        single = check(next(iter(transcripts.values())))
        verdict, findings = single.verdict, single.findings
        report, structural = check_json(single), check_json(single, redact=True)
    raws = {side: raw_events(capture, side) for side, capture in captures.items()}
    marks = _call_marks(transcripts)
    views = [_finding_view(f, f.side or _only(transcripts), transcripts, raws, marks)
             for f in findings]
    legs = {side: _leg_view(side, transcripts[side], raws[side], marks) for side in transcripts}
    for view in views + [f for leg in legs.values() for f in leg.findings]:
        _point(raws, view.links)
    if asks is not None:
        asked_views = [view for view in views if view.side == "request"]
        for view, places in zip(asked_views, asks.places, strict=True):
            view.places = places
    return PairPage(verdict, views, _choice_rows(transcripts, raws, marks), legs, report,
                    structural, asks)


def raw_events(capture: Capture, side: str) -> tuple[list[RawEvent], int]:
    """A leg's frames as the framing decoded them (at most MAX_EVENTS), then the bytes after
    the last whole frame as an `incomplete` entry (what a cut capture or an unreadable body
    holds), and how many entries there are."""
    try:
        body = decode_content(capture.body, capture.content_encoding)
    except EncodingError:
        return [], 0
    framing = sniff_framing(body, capture.content_type)
    if framing == "json":
        text = body.decode("utf-8", "replace")
        return [_raw(side, 0, 0, "body", text)], 1
    shown: list[RawEvent] = []
    total = 0
    frames = STREAM_FRAMINGS[framing](body)
    for ordinal, offset, kind, data in _frames(frames):
        total += 1
        if len(shown) < MAX_EVENTS:
            shown.append(_raw(side, ordinal, offset, kind, data))
    cut = frames.cut()
    if cut is not None and cut.length:
        tail = body[cut.offset : cut.offset + cut.length].decode("utf-8", "replace")
        shown.append(_raw(side, total, cut.offset, "incomplete", tail))
        total += 1
    return shown, total


def anchor(side: str, ordinal: int) -> str:
    return f"{side}-event-{ordinal}"


def _frames(frames: Any) -> Iterator[tuple[int, int, str, str]]:
    for frame in frames:
        if isinstance(frame, sse.Event):
            yield frame.ordinal, frame.offset, frame.type or "message", frame.data
        elif isinstance(frame, ndjson.Line):
            yield frame.ordinal, frame.offset, "line", frame.text
        elif isinstance(frame, eventstream.Message):
            headers = frame.headers
            kind = headers.get(":event-type") or headers.get(":exception-type") or "message"
            yield (frame.ordinal, frame.offset, str(kind),
                   frame.payload.decode("utf-8", "replace"))


def _raw(side: str, ordinal: int, offset: int, kind: str, data: str) -> RawEvent:
    cut = len(data) > MAX_DATA
    return RawEvent(ordinal, offset, kind, data[:MAX_DATA], cut, anchor(side, ordinal))


def _only(transcripts: dict[str, Transcript]) -> str:
    return next(iter(transcripts))


def _link(raws: dict[str, tuple[list[RawEvent], int]], side: str,
          position: Position | None) -> str | None:
    """The anchor of the event a position points at (by ordinal, else by byte offset)."""
    if position is None or side not in raws:
        return None
    events = raws[side][0]
    if position.event is not None:
        return anchor(side, position.event) if position.event < len(events) else None
    if position.byte is None or not events:
        return None
    before = [event for event in events if event.offset <= position.byte]
    return before[-1].anchor if before else events[0].anchor


def _point(raws: dict[str, tuple[list[RawEvent], int]], links: dict[str, str]) -> None:
    targets = set(links.values())
    for events, _ in raws.values():
        for event in events:
            if event.anchor in targets:
                event.pointed = True


Marks = dict[tuple[str, int], list[str]]
"""Per (side, choice): each call's state, in the choice's call order."""


def _call_marks(transcripts: dict[str, Transcript]) -> Marks:
    """Which calls have an equal call on the other side (a multiset match by name and decoded
    arguments, as the comparator matches them)."""
    marks: Marks = {}
    up, down = transcripts.get("upstream"), transcripts.get("downstream")
    for side, transcript in transcripts.items():
        for index, choice in transcript.choices.items():
            marks[(side, index)] = ["kept"] * len(choice.tool_calls)
    if up is None or down is None:
        return marks
    for index in up.choices.keys() & down.choices.keys():
        waiting: dict[Any, list[int]] = defaultdict(list)
        for order, call in enumerate(up.choices[index].tool_calls):
            waiting[call_key(call)].append(order)
        for order, call in enumerate(down.choices[index].tool_calls):
            if waiting.get(call_key(call)):
                waiting[call_key(call)].pop(0)
            else:
                marks[("downstream", index)][order] = "extra"
        for orders in waiting.values():
            for order in orders:
                marks[("upstream", index)][order] = "missing"
    for index in up.choices.keys() - down.choices.keys():
        marks[("upstream", index)] = ["missing"] * len(up.choices[index].tool_calls)
    return marks


def _missing_call(up: Transcript, choice: int | None, marks: Marks) -> Position | None:
    states = marks.get(("upstream", choice or 0), [])
    calls = up.choices[choice or 0].tool_calls if (choice or 0) in up.choices else []
    return next((call.position for call, state in zip(calls, states, strict=True)
                 if state == "missing"), None)


def _up_choice(attribute: str) -> Callable[[Transcript, int | None, Marks], Position | None]:
    def position(up: Transcript, choice: int | None, _marks: Marks) -> Position | None:
        found = up.choices.get(choice or 0)
        return getattr(found, attribute) if found is not None else None
    return position


COUNTERPARTS: dict[Code, Callable[[Transcript, int | None, Marks], Position | None]] = {
    Code.TOOL_CALLS_DROPPED: _missing_call,
    Code.TOOL_CALL_SET_CHANGED: _missing_call,
    Code.TOOL_CALL_ARGUMENTS_CHANGED: _missing_call,
    Code.TEXT_CHANGED: _up_choice("position"),
    Code.CHOICE_DROPPED: _up_choice("position"),
    Code.FINISH_REASON_CHANGED: _up_choice("finish_position"),
    Code.FINISH_REASON_MISSING: _up_choice("finish_position"),
    Code.DONE_MISSING: lambda up, _choice, _marks: up.end_position,
    Code.USAGE_MISSING: lambda up, _choice, _marks: up.usage_position,
    Code.USAGE_CHANGED: lambda up, _choice, _marks: up.usage_position,
}
"""Where upstream holds what a downstream finding is about."""


def _finding_view(finding: Finding, side: str, transcripts: dict[str, Transcript],
                  raws: dict[str, tuple[list[RawEvent], int]], marks: Marks) -> FindingView:
    position = finding.position
    links: dict[str, str] = {}
    own = _link(raws, side, position)
    if own is not None:
        links[side] = own
    counterpart = COUNTERPARTS.get(finding.code)
    if side == "downstream" and counterpart is not None and "upstream" in transcripts:
        other = _link(raws, "upstream", counterpart(transcripts["upstream"], finding.choice,
                                                    marks))
        if other is not None:
            links["upstream"] = other
    return FindingView(
        code=str(finding.code), severity=str(finding.severity), side=side,
        choice=finding.choice, count=finding.count,
        event=position.event if position else None, byte=position.byte if position else None,
        detail=finding.detail, explanation=finding.code.explanation, links=links,
        turn=finding.turn, tool=finding.tool,
    )


def _leg_view(side: str, transcript: Transcript, raw: tuple[list[RawEvent], int],
              marks: Marks) -> LegView:
    """A leg's facts and the findings of that side alone, linked to its own events."""
    raws = {side: raw}
    findings = [_finding_view(f, side, {side: transcript}, raws, marks)
                for f in transcript.findings]
    return LegView(side, transcript.dialect, transcript.framing, transcript.events,
                   transcript.bytes, transcript.usage, transcript.terminal_seen, findings,
                   raw[0], raw[1])


def _choice_rows(transcripts: dict[str, Transcript],
                 raws: dict[str, tuple[list[RawEvent], int]], marks: Marks) -> list[ChoiceRow]:
    indexes = sorted({index for t in transcripts.values() for index in t.choices})
    rows = []
    for index in indexes:
        views = {side: _choice_view(side, t.choices[index], raws, marks)
                 for side, t in transcripts.items() if index in t.choices}
        rows.append(ChoiceRow(index, views.get("upstream"), views.get("downstream")))
    return rows


def _choice_view(side: str, choice: Choice, raws: dict[str, tuple[list[RawEvent], int]],
                 marks: Marks) -> ChoiceView:
    states = marks.get((side, choice.index), ["kept"] * len(choice.tool_calls))
    calls = [_call_view(call, state, _link(raws, side, call.position))
             for call, state in zip(choice.tool_calls, states, strict=True)]
    return ChoiceView(choice.text, choice.finish_reason, choice.raw_finish_reason, calls,
                      _link(raws, side, choice.finish_position))


def _call_view(call: ToolCall, state: str, link: str | None) -> CallView:
    arguments = pretty_arguments(call)
    folded = arguments.count("\n") >= FOLD_LINES or len(arguments) > FOLD_CHARS
    return CallView(call.name, arguments, folded, call.id, call.index, call.fragments, state,
                    link)


def pretty_arguments(call: ToolCall) -> str:
    """The decoded arguments, indented; the raw text when they are not JSON."""
    if call.decoded is None:
        return call.arguments
    try:
        return json.dumps(call.decoded.value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return call.arguments
