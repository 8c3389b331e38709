"""OpenAI Chat Completions: `chat.completion.chunk` streams and `chat.completion` JSON bodies.

How a stream is read, the way a careful client reads it:
- Text is `delta.content` joined per choice; choices are keyed by their `index` (0 when absent), so
  `n > 1` streams with interleaved chunks reduce to one choice each.
- Tool calls accumulate by `index`. The first fragment of an index carries id, type and name; later
  fragments may omit them, repeat them, send `"id": null` or `"name": ""`: none of that starts a new
  call or renames one. A different non-empty id on an index already in use is TOOL_CALL_ID_CONFLICT,
  and the fragment still accumulates into that index, as a client keyed by index would do.
- A tool-call delta without `index` is TOOL_CALL_INDEX_MISSING (one finding per choice, at the
  first such delta, with the number of such deltas as its count). It starts a new call when it
  carries an id that differs from the latest call's id (or when there is no call yet), and
  otherwise continues the latest call, as clients that tolerate such streams do.
- A streamed choice's tool-call indexes must run 0, 1, 2, … in order of first appearance: the
  official SDKs' stream accumulators keep calls in a list indexed by it, and a call first seen at
  1 with none at 0 (a translator that kept the provider's output or block index), or a skipped
  index, makes them fail. Each index first seen elsewhere than the next free place counts in one
  TOOL_CALL_INDEX_GAP per choice, at the first such delta. A JSON body's calls have no index.
- A streamed choice without an integer `index` (Portkey's last chunk after a provider error:
  `{"finish_reason": "overloaded_error", "delta": {"content": ""}}`) is CHOICE_INDEX_MISSING: the
  openai SDK's accumulator indexes its list of choices by it and raises `TypeError`. One finding
  per stream (its `choice` is null: the choice has no index), at the first such choice, counting
  them; the choice is read as choice 0, as a tolerant client would.
- Each streamed choice's deltas are folded the way the openai SDK's `ChatCompletionStreamState`
  folds them (`chat_deltas`): a delta field holding a list of objects (an extension such as
  LiteLLM's `thinking_blocks`, at any depth) that the SDK must merge by `index` while an entry
  has none (or one that is not an integer) is DELTA_LIST_INDEX_MISSING: one finding per choice,
  at the first chunk the SDK raises on, counting such chunks. `delta.tool_calls` entries without
  an integer index are TOOL_CALL_INDEX_MISSING alone (the SDK fails on the first of them, not
  only when one recurs), so the same defect is never reported twice; a list inside a tool call
  is DELTA_LIST_INDEX_MISSING's.
- A legacy `delta.function_call` accumulates into the call at index 0.
- `choices: []` chunks (usage, Azure's `prompt_filter_results` preamble) and `usage: null` on every
  chunk are normal; the last non-null usage wins.
- `data: [DONE]` (the whole payload) ends the stream; a `[DONE]` inside content or arguments is
  text. Events after it are counted but not read: a client has stopped listening.
- A payload with a truthy `error` is kept, and is ERROR_IN_STREAM unless the status is 4xx/5xx.
- `event: ping` blocks are ignored; a payload that is not a JSON object is JSON_INVALID.

A JSON body (`chat.completion`) reads `choices[].message` the same way; its tool calls carry no
index, so each takes its position in the list.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from calltap.codes import Code
from calltap.dialects import openai_chat_request
from calltap.dialects.base import Framing
from calltap.dialects.chat_blocks import TERMINAL, BlockReader
from calltap.dialects.chat_deltas import DeltaShape
from calltap.dialects.common import (
    OPENAI_FINISH_REASONS,
    PendingCall,
    Reducer,
    chat_conversation,
    finish,
    invalid_payload,
    issue_findings,
    normalize_finish_reason,
    normalize_usage,
    position_of,
    record_error,
)
from calltap.jsonvalues import JsonInvalid, load_envelope
from calltap.sse import Blocks, Event
from calltap.transcript import Choice, Finding, Position, Transcript

NAME = "openai.chat"
PATHS = ("/chat/completions",)
FRAMING: Framing = "sse"
UNREADABLE = object()
"""A payload that is not JSON at all (already recorded as JSON_INVALID)."""


def sniff(payload: Any) -> bool:
    """True when a decoded stream payload or JSON body belongs to Chat Completions."""
    if not isinstance(payload, dict):
        return False
    kind = payload.get("object")
    if kind in ("chat.completion.chunk", "chat.completion"):
        return True
    choices = payload.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return "delta" in choices[0] or "message" in choices[0]
    return "prompt_filter_results" in payload and isinstance(choices, list)


conversation = chat_conversation
REQUEST = openai_chat_request


def usage_requested(request: bytes) -> bool:
    """Whether a Chat Completions request body asks for usage in its answer: a streamed one only
    with `stream_options.include_usage: true`, a whole one always. A body that cannot be read
    counts as asking, so that a usage the client may have wanted is never excused."""
    try:
        body = orjson.loads(request)
    except orjson.JSONDecodeError:
        return True
    if not isinstance(body, dict) or body.get("stream") is not True:
        return True
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


class _Call(PendingCall):
    """One tool call being accumulated; `fragments` counts the deltas that named its index."""

    __slots__ = ("fragments",)

    def __init__(self, index: int, call_id: Any, name: Any, position: Position) -> None:
        super().__init__(index, call_id, name, position)
        self.fragments = 0


class _Choice:
    """One choice while its events are read: its text, its calls by index, its deltas as the
    SDK folds them, and the findings that count fragments without an index, calls at a gap and
    list entries the SDK cannot merge."""

    __slots__ = ("calls", "choice", "deltas", "index_gap", "index_missing", "latest",
                 "list_index", "text")

    def __init__(self, choice: Choice) -> None:
        self.choice = choice
        self.text: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.latest: _Call | None = None
        self.index_missing: Finding | None = None
        self.index_gap: Finding | None = None
        self.deltas = DeltaShape()
        self.list_index: Finding | None = None

    def list_failure(self, failure: str, event: Event, findings: list[Finding]) -> None:
        """A chunk the SDK raises on while merging a list (`DeltaShape.fold`); one
        DELTA_LIST_INDEX_MISSING per choice counts them."""
        finding = self.list_index
        if finding is None:
            finding = self.list_index = Finding(
                Code.DELTA_LIST_INDEX_MISSING, choice=self.choice.index, count=0,
                position=position_of(event), detail=failure,
            )
            findings.append(finding)
        finding.count = (finding.count or 0) + 1

    def gap(self, index: int, position: Position, findings: list[Finding]) -> None:
        """A call first seen at an index other than the next free place; one finding per choice
        counts them."""
        finding = self.index_gap
        if finding is None:
            expected = len(self.calls)
            finding = self.index_gap = Finding(
                Code.TOOL_CALL_INDEX_GAP,
                choice=self.choice.index,
                count=0,
                position=position,
                detail=f"index {index} first seen where {expected} was expected",
            )
            findings.append(finding)
        finding.count = (finding.count or 0) + 1

    def without_index(self, call_id: Any, event: Event, findings: list[Finding]) -> int:
        """Where a streamed fragment without index goes; one finding per choice counts them."""
        finding = self.index_missing
        if finding is None:
            finding = Finding(Code.TOOL_CALL_INDEX_MISSING, choice=self.choice.index, count=0)
            finding.position = position_of(event)
            self.index_missing = finding
            findings.append(finding)
        finding.count = (finding.count or 0) + 1
        latest = self.latest
        if latest is not None and (not call_id or call_id == latest.id):
            return latest.index
        return max(self.calls, default=-1) + 1


class _Reducer(BlockReader, Reducer):
    """Accumulates one body's choices; `stream` and `body` are the two ways in.

    This is the comparator's hot path: per event it does one envelope decode and a few dict
    lookups (a text delta of a body of plain blocks, a few attribute reads: `blocks`), builds a
    Position only when something is recorded, and takes the slow path (`locate`) only when a
    call starts, changes id or name, or comes without an index.
    """

    NAME = NAME

    def __init__(self, streaming: bool, status: int | None) -> None:
        super().__init__(streaming, status)
        self.part = "delta" if streaming else "message"
        self.choices: dict[Any, _Choice] = {}
        self.choice_index_missing: Finding | None = None

    @classmethod
    def reduce_blocks(cls, blocks: Blocks, *, status: int | None = None) -> Transcript:
        """A transcript from a body of plain blocks, the same as `reduce_events` of its events."""
        return cls(streaming=True, status=status).blocks(blocks)

    def stream(self, events: Iterable[Event]) -> Transcript:
        events = iter(events)
        event = None
        terminal = False
        for event in events:
            if event.data == TERMINAL:
                terminal = True
                break
            if event.type != "ping":
                self.read(event)
        self.drain(events, event, terminal)
        return self.result()

    def read(self, event: Event) -> None:
        """One event's payload: orjson reads it, or `strict_payload` what orjson rejects."""
        try:
            payload = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            payload = self.strict_payload(event)
        if payload.__class__ is dict:
            self.payload(payload, event)
        elif payload is not UNREADABLE:
            self.transcript.findings.append(
                invalid_payload("payload is not a JSON object", position_of(event))
            )

    def strict_payload(self, event: Event) -> Any:
        """A payload orjson rejects, read by `load_envelope` with its issues recorded, or
        UNREADABLE."""
        findings = self.transcript.findings
        try:
            payload, issues = load_envelope(event.data)
        except JsonInvalid as error:
            findings.append(invalid_payload(error, position_of(event)))
            return UNREADABLE
        findings.extend(issue_findings(issues, position_of(event)))
        return payload

    def read_body(self, payload: dict[str, Any]) -> None:
        self.payload(payload, None)

    def payload(self, payload: dict[str, Any], event: Event | None) -> None:
        self.envelope(payload.get("error"), payload.get("usage"), event)
        entries = payload.get("choices")
        if entries.__class__ is not list:
            return
        part = self.part
        for entry in entries:
            if entry.__class__ is dict:
                self.entry(entry.get("index"), entry.get(part), entry.get("finish_reason"), event)

    def envelope(self, error: Any, usage: Any, event: Event | None) -> None:
        """A payload's `error` and `usage`."""
        if error:
            record_error(self.transcript, error, self.status, position_of(event))
        if usage:
            normalized = normalize_usage(usage)
            if normalized is not None:
                self.transcript.usage = normalized
                self.transcript.usage_position = position_of(event)

    def entry(self, index: Any, delta: Any, reason: Any, event: Event | None) -> None:
        """One entry of `choices`: its index, its delta (or message) and its finish reason."""
        if index.__class__ is not int:
            if event is not None:
                self.without_index(event)
            index = 0
        state = self.choices.get(index) or self.new_choice(index, event)
        if delta.__class__ is dict:
            content = delta.get("content")
            if event is not None and not (content.__class__ is str and len(delta) == 1
                                          and "content" in state.deltas.message):
                # (a text delta after the first changes nothing the SDK could fail on)
                failure = state.deltas.fold(delta)
                if failure is not None:
                    state.list_failure(failure, event, self.transcript.findings)
            if content and content.__class__ is str:
                state.text.append(content)
            fragments = delta.get("tool_calls")
            if fragments and fragments.__class__ is list:
                self.tool_calls(state, fragments, event)
            if "function_call" in delta:
                self.legacy_call(state, delta["function_call"], event)
        if reason:
            if reason.__class__ is not str:
                reason = repr(reason)
            choice = state.choice
            choice.raw_finish_reason = reason
            choice.finish_reason = normalize_finish_reason(reason, OPENAI_FINISH_REASONS)
            choice.finish_position = position_of(event)

    def without_index(self, event: Event) -> None:
        """A streamed choice without an integer index; one finding per stream counts them."""
        finding = self.choice_index_missing
        if finding is None:
            finding = self.choice_index_missing = Finding(
                Code.CHOICE_INDEX_MISSING, count=0, position=position_of(event),
                detail="a choice without an integer index (read as choice 0)",
            )
            self.transcript.findings.append(finding)
        finding.count = (finding.count or 0) + 1

    def new_choice(self, index: int, event: Event | None) -> _Choice:
        """The state of a choice seen for the first time (without an integer index: 0)."""
        state = self.choices[index] = _Choice(Choice(index=index, position=position_of(event)))
        return state

    def legacy_call(self, state: _Choice, function: Any, event: Event | None) -> None:
        if function and function.__class__ is dict:
            self.tool_calls(state, [{"index": 0, "function": function}], event)

    def tool_calls(self, state: _Choice, fragments: list[Any], event: Event | None) -> None:
        calls = state.calls
        for order, fragment in enumerate(fragments):
            if fragment.__class__ is not dict:
                continue
            function = fragment.get("function")
            if function.__class__ is not dict:
                function = {}
            index = fragment.get("index")
            call = calls.get(index) if index.__class__ is int else None
            if call is None or (fragment.get("id") or call.id) != call.id or not call.name:
                call = self.locate(state, fragment, function, order, event)
            state.latest = call
            call.fragments += 1
            arguments = function.get("arguments")
            if arguments and arguments.__class__ is str:
                call.parts.append(arguments)

    def locate(
        self,
        state: _Choice,
        fragment: dict[str, Any],
        function: dict[str, Any],
        order: int,
        event: Event | None,
    ) -> _Call:
        """The call a fragment belongs to when it starts one, renames, changes id or lacks index."""
        call_id = fragment.get("id")
        if call_id.__class__ is not str:
            call_id = None
        index = fragment.get("index")
        streamed_index = event is not None and index.__class__ is int
        if index.__class__ is not int:
            index = (order if event is None
                     else state.without_index(call_id, event, self.transcript.findings))
        call = state.calls.get(index)
        if call is None:
            position = position_of(event)
            if streamed_index and index != len(state.calls):
                state.gap(index, position, self.transcript.findings)
            call = state.calls[index] = _Call(index, call_id, function.get("name"), position)
            return call
        if call_id and call.id and call_id != call.id:
            self.transcript.findings.append(
                Finding(
                    Code.TOOL_CALL_ID_CONFLICT,
                    choice=state.choice.index,
                    position=position_of(event),
                    detail=f"index {index}: {call.id} then {call_id}",
                )
            )
        elif call_id and not call.id:
            call.id = call_id
        name = function.get("name")
        if not call.name and name.__class__ is str:
            call.name = name
        return call

    def result(self) -> Transcript:
        transcript = self.transcript
        for index in sorted(self.choices):
            state = self.choices[index]
            choice = state.choice
            choice.text = "".join(state.text)
            for key in sorted(state.calls):
                call = state.calls[key]
                choice.tool_calls.append(call.tool_call("".join(call.parts), call.fragments))
            transcript.choices[index] = choice
        return finish(transcript)


reduce_events = _Reducer.reduce_events
reduce_blocks = _Reducer.reduce_blocks
reduce_json = _Reducer.reduce_json
