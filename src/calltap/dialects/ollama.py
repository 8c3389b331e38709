"""Ollama `/api/chat`: NDJSON streams (`application/x-ndjson`) and whole JSON bodies.

How a stream is read, the way Ollama's own clients read it:
- Each line is one JSON object (`ndjson` frames it); a line that is not JSON, or not an object,
  is JSON_INVALID and skipped; a line with bytes that are not UTF-8 is JSON_INVALID at the first
  of them and still read.
- One choice, index 0, that begins at the first line with a `message`.
- Text is every `message.content` joined in order; `message.thinking` is not text.
- `message.tool_calls[]` holds whole calls (`{"function": {"name", "arguments": {…}}}`, an `index`
  in `function` and an `id` in newer releases): a call never arrives in fragments, so each is one
  call with its arguments object written as JSON (`common.canonical_arguments`; arguments given
  as a string are taken as they are). Calls are numbered in order of appearance across lines,
  which is their index; `function.index` is not trusted over that order.
- `done: true` is the terminal marker; lines after it are counted but not read. Without it the
  stream is DONE_MISSING.
- `done_reason` is the finish reason: `stop` is stop, or tool_calls when the answer holds calls;
  `length` is length; others (`load`, `unload`) pass through. A final line without
  `done_reason` (releases before it existed) finished normally: stop, or tool_calls.
- Usage is `prompt_eval_count` (prompt) and `eval_count` (completion) of the final line; the
  total is their sum.
- A line with a truthy `error` keeps it; inside a 2xx it is ERROR_IN_STREAM.

A JSON body (`"stream": false`) is the final line with the whole message: read the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from calltap.dialects import ollama_request
from calltap.dialects.base import Framing
from calltap.dialects.common import (
    canonical_arguments,
    chat_conversation,
    finish,
    invalid_payload,
    position_of,
    read_object,
    record_error,
    usage_always_given,
)
from calltap.dialects.single_choice import EndedCall, SingleChoiceReducer
from calltap.ndjson import Line
from calltap.transcript import FinishReason, Position, Transcript, Usage

NAME = "ollama.chat"
PATHS = ("/api/chat",)
FRAMING: Framing = "ndjson"
DONE_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length"}
IMPLIED_REASON = "stop"
"""What a final line without `done_reason` means."""


def sniff(payload: Any) -> bool:
    """True for a chat line or body: a boolean `done` beside a `message` object."""
    return (
        payload.__class__ is dict
        and payload.get("done").__class__ is bool
        and payload.get("message").__class__ is dict
    )


class _Reducer(SingleChoiceReducer[EndedCall]):
    """Ollama chat: text and whole calls per line, the final line's reason and counts."""

    NAME = NAME
    CUT = "call {index} never ended"

    def stream(self, events: Iterable[Line]) -> Transcript:
        lines = iter(events)
        line = None
        terminal = False
        for line in lines:
            payload = self.decode(line)
            if payload is None:
                continue
            self.payload(payload, line)
            if payload.get("done") is True:
                terminal = True
                break
        self.drain(lines, line, terminal)
        return self.result()

    def decode(self, line: Line) -> dict[str, Any] | None:
        """The line's object, a bad UTF-8 byte recorded; None when it cannot be read."""
        findings = self.transcript.findings
        if line.invalid_utf8 is not None:
            findings.append(invalid_payload(f"byte {line.invalid_utf8} is not UTF-8",
                                            Position(line.ordinal, line.invalid_utf8)))
        return read_object(line.text, line, findings)

    def payload(self, payload: dict[str, Any], line: Line | None) -> None:
        """One line, or the whole body (`line` None)."""
        error = payload.get("error")
        if error:
            record_error(self.transcript, error, self.status, position_of(line))
        message = payload.get("message")
        if message.__class__ is dict:
            self.start(line)
            self.take_text(message.get("content"), line)
            calls = message.get("tool_calls")
            if calls and calls.__class__ is list:
                for call in calls:
                    if call.__class__ is dict:
                        self.call(call, line)
        if payload.get("done") is True:
            self.done(payload, line)

    def call(self, call: dict[str, Any], line: Line | None) -> None:
        function = call.get("function")
        if function.__class__ is not dict:
            function = {}
        index = len(self.calls)
        pending = self.calls[index] = EndedCall(
            index, call.get("id"), function.get("name"), position_of(line)
        )
        arguments = function.get("arguments")
        if arguments.__class__ is str:
            pending.whole = arguments
        elif arguments is not None:
            pending.whole = canonical_arguments(arguments)
        pending.closed = True

    def done(self, payload: dict[str, Any], line: Line | None) -> None:
        """The final line: the finish reason and the counts."""
        self.take_finish(payload.get("done_reason") or IMPLIED_REASON, DONE_REASONS, line)
        prompt, completion = payload.get("prompt_eval_count"), payload.get("eval_count")
        prompt = prompt if prompt.__class__ is int else None
        completion = completion if completion.__class__ is int else None
        if prompt is not None or completion is not None:
            total = prompt + completion if prompt is not None and completion is not None else None
            self.transcript.usage = Usage(prompt, completion, total)
            self.transcript.usage_position = position_of(line)

    def read_body(self, payload: dict[str, Any]) -> None:
        self.payload(payload, None)

    def result(self) -> Transcript:
        choice = self.gather()
        if choice is not None and choice.finish_reason == "stop" and choice.tool_calls:
            choice.finish_reason = "tool_calls"
        return finish(self.transcript)


reduce_events = _Reducer.reduce_events
reduce_json = _Reducer.reduce_json
conversation = chat_conversation
usage_requested = usage_always_given
REQUEST = ollama_request
