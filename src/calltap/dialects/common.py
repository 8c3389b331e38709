"""What every dialect reducer shares: the reducer base, a call being accumulated, positions,
finish-reason normalization, usage, findings, the side rules; and what chat-like requests share.

A reducer turns one dialect's events into choices, calls and findings; the rules that do not depend
on the dialect (decoding each call's arguments, a missing finish reason, a missing terminal marker,
an error object inside a 2xx body, JSON issues in an envelope) live here so that every dialect
applies them the same way.

Empty arguments: a call whose joined argument fragments are empty (or only whitespace) decodes as
`{}`, the value a client calls the function with; it is not TOOL_ARGUMENTS_INVALID. Against an
upstream call with real arguments it still compares as TOOL_CALL_ARGUMENTS_CHANGED, which is how a
gateway that re-splits or loses argument fragments shows up.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any, ClassVar, Protocol

import orjson

from calltap.codes import Code
from calltap.dialects.base import Conversation
from calltap.jsonvalues import JsonInvalid, JsonIssue, decode_strict, load_envelope
from calltap.transcript import Finding, FinishReason, Position, ToolCall, Transcript, Usage

OPENAI_FINISH_REASONS: Mapping[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
    "error": "error",
}

EMPTY_ARGUMENTS = "{}"
BODY = Position(None, 0)
"""Where everything in a JSON body is: no event, the start of the body."""


class Frame(Protocol):
    """What every framing's frame tells about where it is: `sse.Event`, `ndjson.Line`,
    `eventstream.Message`."""

    @property
    def ordinal(self) -> int: ...

    @property
    def offset(self) -> int: ...


def position_of(event: Frame | None) -> Position:
    """Where a frame starts; BODY for what a JSON body holds (no frame)."""
    return BODY if event is None else Position(event.ordinal, event.offset)


class Reducer(ABC):
    """Accumulates one body of a dialect; `stream` and `body` are the two ways in.

    A dialect module subclasses it, names itself in NAME, and exports the two class methods as its
    `reduce_events` and `reduce_json`.
    """

    NAME: ClassVar[str]

    def __init__(self, streaming: bool, status: int | None) -> None:
        self.transcript = Transcript(dialect=self.NAME, streaming=streaming)
        self.status = status

    @classmethod
    def reduce_events(cls, events: Iterable[Any], *, status: int | None = None) -> Transcript:
        """A transcript from the frames of a stream (in the dialect's framing), read once, in
        order."""
        return cls(streaming=True, status=status).stream(events)

    @classmethod
    def reduce_json(cls, payload: Any, *, status: int | None = None) -> Transcript:
        """A transcript from a non-streaming body (already decoded)."""
        return cls(streaming=False, status=status).body(payload)

    def body(self, payload: Any) -> Transcript:
        """A JSON body: everything in it is at BODY; a body that is not an object says nothing."""
        self.transcript.end_position = BODY
        if payload.__class__ is dict:
            self.read_body(payload)
        return self.result()

    @abstractmethod
    def stream(self, events: Iterable[Any]) -> Transcript:
        """Read the frames in order up to the terminal marker, then `result`."""

    def drain(self, events: Iterator[Frame], last: Frame | None, terminal: bool) -> None:
        """Count the events after the terminal marker (counted, never read) and note where the
        stream ended: at the terminal marker, else at its last event."""
        transcript = self.transcript
        if terminal:
            transcript.terminal_seen = True
            transcript.end_position = position_of(last)
        rest = deque(events, maxlen=1)
        if rest:
            last = rest[0]
        if last is not None:
            transcript.events = last.ordinal + 1
            if not terminal:
                transcript.end_position = position_of(last)

    @abstractmethod
    def read_body(self, payload: dict[str, Any]) -> None:
        """Read a JSON body's object."""

    @abstractmethod
    def result(self) -> Transcript:
        """The transcript, once everything was read; ends with `finish`."""


class PendingCall:
    """A tool call being accumulated: id and name as its start gives them, fragments joined once,
    at the end."""

    __slots__ = ("id", "index", "name", "parts", "position")

    def __init__(self, index: int, call_id: Any, name: Any, position: Position) -> None:
        self.index = index
        self.id = call_id if call_id.__class__ is str and call_id else None
        self.name = name if name.__class__ is str else ""
        self.parts: list[str] = []
        self.position = position

    def tool_call(self, arguments: str, fragments: int) -> ToolCall:
        return ToolCall(
            name=self.name,
            arguments=arguments,
            id=self.id,
            index=self.index,
            fragments=fragments,
            position=self.position,
        )


def normalize_finish_reason(raw: Any, table: Mapping[str, FinishReason]) -> Any:
    """The normalized finish reason, or None when absent.

    An unknown non-empty reason passes through unchanged, so that two legs that disagree on an
    unknown reason still compare as different instead of both collapsing to one value.
    """
    if raw is None or raw == "":
        return None
    return table.get(raw, raw)


def normalize_usage(usage: Any) -> Usage | None:
    """Prompt/completion/total tokens from an OpenAI-style usage object (None when it is absent)."""
    if not isinstance(usage, dict):
        return None
    prompt = _tokens(usage.get("prompt_tokens", usage.get("input_tokens")))
    completion = _tokens(usage.get("completion_tokens", usage.get("output_tokens")))
    total = _tokens(usage.get("total_tokens"))
    if total is None and prompt is not None and completion is not None:
        total = prompt + completion
    if prompt is None and completion is None and total is None:
        return None
    return Usage(prompt, completion, total)


def _tokens(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_expected(status: int | None) -> bool:
    """True for a 4xx/5xx response, where an error object is the answer rather than a defect."""
    return status is not None and status >= 400


def record_error(
    transcript: Transcript, error: Any, status: int | None, position: Position | None
) -> None:
    """Keep an error object; inside a 2xx (or unknown-status) body it is ERROR_IN_STREAM."""
    transcript.errors.append(error)
    if not error_expected(status):
        transcript.findings.append(
            Finding(Code.ERROR_IN_STREAM, position=position, detail=_error_summary(error))
        )


def _error_summary(error: Any) -> str:
    if isinstance(error, dict):
        parts = [str(error[key]) for key in ("type", "code", "message") if error.get(key)]
        return ": ".join(parts)
    return str(error)


def issue_findings(
    issues: Iterable[JsonIssue], position: Position | None, choice: int | None = None
) -> list[Finding]:
    """Warnings for a payload's JSON issues (UNSAFE_INTEGER, DUPLICATE_KEY, NON_FINITE_NUMBER)."""
    return [
        Finding(issue.code, choice=choice, position=position, detail=f"at {issue.path}")
        for issue in issues
    ]


def invalid_payload(error: Exception | str, position: Position | None) -> Finding:
    """A JSON_INVALID warning for a payload that could not be read."""
    return Finding(Code.JSON_INVALID, position=position, detail=str(error))


def read_object(data: str | bytes, frame: Frame, findings: list[Finding]) -> dict[str, Any] | None:
    """A frame's payload object, or None with a JSON_INVALID warning when it is not JSON or not
    an object. orjson reads it first, since almost every payload is plain JSON; `load_envelope`
    reads what orjson rejects, with its issues recorded."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            text = data.decode() if isinstance(data, bytes) else data
            payload, issues = load_envelope(text)
        except (UnicodeDecodeError, JsonInvalid) as error:
            findings.append(invalid_payload(error, position_of(frame)))
            return None
        findings.extend(issue_findings(issues, position_of(frame)))
    if payload.__class__ is not dict:
        findings.append(invalid_payload("payload is not a JSON object", position_of(frame)))
        return None
    return payload


def decode_arguments(call: ToolCall, choice: int, findings: list[Finding]) -> None:
    """Decode a call's joined arguments strictly into `call.decoded`, recording what is wrong."""
    try:
        decoded = decode_strict(_argument_text(call))
    except JsonInvalid as error:
        findings.append(_invalid_arguments(call, choice, str(error)))
        return
    call.decoded = decoded
    findings.extend(issue_findings(decoded.issues, call.position, choice))


def finish(transcript: Transcript, *, marker: bool = True) -> Transcript:
    """Apply the side rules every dialect shares, once the reducer has seen the whole body.

    Each call's arguments are decoded; a choice without a finish reason is FINISH_REASON_MISSING; a
    stream that never carried its terminal marker is DONE_MISSING. A dialect whose streams have no
    such marker (Gemini's ends with its last finish reason) passes `marker=False`: its end is
    judged by the finish reasons alone, never by a marker it was never meant to send.
    """
    findings = transcript.findings
    for index, choice in transcript.choices.items():
        for call in choice.tool_calls:
            decode_arguments(call, index, findings)
        if choice.finish_reason is None:
            findings.append(
                Finding(Code.FINISH_REASON_MISSING, choice=index, position=transcript.end_position)
            )
    if marker and transcript.streaming and not transcript.terminal_seen:
        findings.append(Finding(Code.DONE_MISSING, position=transcript.end_position))
    return transcript


def canonical_arguments(value: Any) -> str:
    """The argument text of a call whose arguments arrived as a JSON value (a whole `input`).

    Compact, key order kept, non-ASCII kept, so `decode_strict` reads back the same value; an
    integer too long for `int` (held as a Decimal) is written as the double a client would read.
    """
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), default=_decimal_as_double
    )


def _decimal_as_double(value: Any) -> float:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def flag_cut_call(call: ToolCall, choice: int, findings: list[Finding], reason: str) -> None:
    """A call the stream never closed: its arguments may be a cut prefix of what was meant.

    Arguments that no longer decode become TOOL_ARGUMENTS_INVALID in `finish`; a prefix that still
    decodes (no fragment yet, or a cut right after a closing brace) gets that finding here, so a
    cut call is never taken for a complete one.
    """
    try:
        decode_strict(_argument_text(call))
    except JsonInvalid:
        return
    findings.append(_invalid_arguments(call, choice, reason))


def _argument_text(call: ToolCall) -> str:
    """The text a call's arguments decode from: empty (or blank) arguments are `{}`."""
    return call.arguments if call.arguments.strip() else EMPTY_ARGUMENTS


def _invalid_arguments(call: ToolCall, choice: int, reason: str) -> Finding:
    return Finding(
        Code.TOOL_ARGUMENTS_INVALID,
        choice=choice,
        position=call.position,
        detail=f"{call.name}: {reason}",
    )


def chat_conversation(request: dict[str, Any]) -> Conversation | None:
    """The conversation of a request whose `messages` already speak the fingerprint's vocabulary
    (Chat Completions, Messages, Ollama); tools from `tools` and the legacy `functions`."""
    messages = request.get("messages")
    if messages.__class__ is not list:
        return None
    return Conversation(messages, tool_names(request.get("tools"), request.get("functions")))


def tool_names(*tool_lists: Any) -> list[str]:
    """The names in lists of tools: `function.name` (Chat Completions, Ollama), else `name`
    (Messages, Responses, the legacy `functions`)."""
    names: list[str] = []
    for tools in tool_lists:
        if tools.__class__ is not list:
            continue
        for tool in tools:
            if tool.__class__ is not dict:
                continue
            function = tool.get("function")
            name = function.get("name") if function.__class__ is dict else tool.get("name")
            if name.__class__ is str:
                names.append(name)
    return names


def usage_always_given(request: bytes) -> bool:
    """The `usage_requested` of a dialect whose answers always carry usage, asked or not."""
    return True
