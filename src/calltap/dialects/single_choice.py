"""The reducer shapes of the dialects that answer with one choice.

`SingleChoiceReducer` accumulates the one choice (index 0) of Anthropic Messages, OpenAI
Responses, Ollama and Bedrock Converse: text pieces, calls by index, a restart after content
began, cut calls. `TypedEventReducer` adds the SSE loop the first two share.

Anthropic Messages and OpenAI Responses stream payloads that name their own `type` (the `event:`
line stands in only when a payload has none), answer with one choice that begins at the first
event belonging to it, and mark where each tool call ends (`content_block_stop`; the `.done`
events): a call that never got its end is a cut call. Both read every payload through
`load_envelope`, a JSON_INVALID warning for one that is not JSON or not an object. Chat
Completions shares none of that (its terminal is a `data: [DONE]` that is not JSON, it has many
choices and no end of a call) and keeps its own loop, which the comparator's throughput depends
on.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from calltap.codes import Code
from calltap.dialects.common import (
    Frame,
    PendingCall,
    Reducer,
    finish,
    flag_cut_call,
    invalid_payload,
    issue_findings,
    normalize_finish_reason,
    position_of,
)
from calltap.jsonvalues import JsonInvalid, load_envelope
from calltap.sse import Event
from calltap.transcript import Choice, Finding, FinishReason, Position, Transcript


class EndedCall(PendingCall):
    """A call whose end the stream marks; `whole` is its arguments as stated in one piece."""

    __slots__ = ("closed", "whole")

    def __init__(self, index: int, call_id: Any, name: Any, position: Position) -> None:
        super().__init__(index, call_id, name, position)
        self.whole = ""
        """The whole arguments as the dialect states them apart from fragments; used without any."""
        self.closed = False


Call = TypeVar("Call", bound=EndedCall)


class SingleChoiceReducer(Reducer, Generic[Call]):
    """Accumulates one body's single choice: its text, and its calls (of the dialect's `Call`
    class) by index. A subclass reads its framing's frames in `stream`."""

    CUT: ClassVar[str]
    """The detail of a cut call, with `{index}`: what the call never got."""

    def __init__(self, streaming: bool, status: int | None) -> None:
        super().__init__(streaming, status)
        self.choice: Choice | None = None
        self.text: list[str] = []
        self.calls: dict[int, Call] = {}
        self.began = False
        """Content has begun: a block or output item started, or text or a call arrived."""
        self.restart: Finding | None = None

    def start(self, event: Frame | None) -> Choice:
        """The choice, begun at the first event that belongs to it."""
        if self.choice is None:
            self.choice = Choice(index=0, position=position_of(event))
        return self.choice

    def restarted(self, event: Frame) -> None:
        """The message starts (again): after content began, that is a retried attempt spliced
        into the stream, one STREAM_RESTARTED counting every such start."""
        if not (self.began or self.text or self.calls):
            return
        finding = self.restart
        if finding is None:
            finding = self.restart = Finding(Code.STREAM_RESTARTED, choice=0, count=0,
                                             position=position_of(event))
            self.transcript.findings.append(finding)
        finding.count = (finding.count or 0) + 1

    def take_finish(
        self, reason: Any, table: Mapping[str, FinishReason], event: Frame | None
    ) -> None:
        """A stated finish reason, normalized by `table`, at `event`; none stated changes
        nothing."""
        if not reason:
            return
        if reason.__class__ is not str:
            reason = repr(reason)
        choice = self.start(event)
        choice.raw_finish_reason = reason
        choice.finish_reason = normalize_finish_reason(reason, table)
        choice.finish_position = position_of(event)

    def take_text(self, text: Any, event: Frame | None) -> None:
        """A piece of the answer's text: a non-empty string, which begins the choice."""
        if text and text.__class__ is str:
            self.start(event)
            self.text.append(text)

    def gather(self) -> Choice | None:
        """The choice with its text and its calls in index order, each cut call flagged."""
        choice = self.choice
        if choice is None:
            return None
        findings = self.transcript.findings
        choice.text = "".join(self.text)
        for index in sorted(self.calls):
            pending = self.calls[index]
            parts = pending.parts
            call = pending.tool_call("".join(parts) if parts else pending.whole, 1 + len(parts))
            choice.tool_calls.append(call)
            if not pending.closed:
                flag_cut_call(call, 0, findings, self.CUT.format(index=index))
        self.transcript.choices[0] = choice
        return choice

    def result(self) -> Transcript:
        self.gather()
        return finish(self.transcript)


class TypedEventReducer(SingleChoiceReducer[Call]):
    """A single-choice SSE dialect whose payloads name their own `type`: the loop Anthropic
    Messages and OpenAI Responses share."""

    TERMINALS: ClassVar[frozenset[str]]
    """The payload types that end the stream; events after one are counted but not read."""

    def stream(self, events: Iterable[Event]) -> Transcript:
        findings = self.transcript.findings
        events = iter(events)
        event = None
        terminal = False
        for event in events:
            try:
                payload, issues = load_envelope(event.data)
            except JsonInvalid as error:
                findings.append(invalid_payload(error, position_of(event)))
                continue
            if issues:
                findings.extend(issue_findings(issues, position_of(event)))
            if payload.__class__ is not dict:
                findings.append(invalid_payload("payload is not a JSON object", position_of(event)))
                continue
            kind = payload.get("type")
            if kind.__class__ is not str:
                kind = event.type
            if kind in self.TERMINALS:
                terminal = True
                self.terminal(payload, event)
                break
            self.event(kind, payload, event)
        self.drain(events, event, terminal)
        return self.result()

    def terminal(self, payload: dict[str, Any], event: Event) -> None:
        """What the terminal payload itself says; by default nothing."""

    @abstractmethod
    def event(self, kind: str, payload: dict[str, Any], event: Event) -> None:
        """One payload before the terminal one, by its type."""
