"""OpenAI Responses: `response.*` event streams and `response` JSON bodies.

How a stream is read:
- Each payload's `type` says what it is; every event carries a `sequence_number`. Unknown types
  (reasoning, web search, audio) are skipped, as SDKs skip them.
- One choice, index 0, that begins at `response.created` (or at the first output, if that is
  missing).
- Text is every `response.output_text.delta` joined in order, across message items; refusals and
  reasoning summaries are not text.
- Each `function_call` output item is one tool call: `response.output_item.added` gives its
  `call_id` (the id a client answers with), name and `output_index` (its index). Its arguments are
  the `response.function_call_arguments.delta` fragments joined, matched to the call by
  `output_index` (or by `item_id` when that is missing). A call with no delta at all takes the
  arguments of its `.done` event, else of its `response.output_item.done` item, else of the item
  as added.
- `response.created` carries the SDKs' starting snapshot: output items already in its
  `response.output` are delivered whole, at their positions. A second `response.created` after
  content began is STREAM_RESTARTED: a retried attempt spliced into the client's stream.
- A call never closed (neither `response.function_call_arguments.done` nor
  `response.output_item.done` arrived) is a cut call: TOOL_ARGUMENTS_INVALID even when the
  fragments that arrived happen to decode.
- The terminal marker is one of `response.completed`, `response.incomplete`, `response.failed`;
  events after it are counted but not read. The finish reason comes from it: completed with
  function calls → tool_calls, completed → stop, incomplete for `max_output_tokens` → length,
  for `content_filter` → content_filter (another reason passes through; none given → length),
  failed or cancelled → error. Usage
  (`input_tokens`, `output_tokens`, `total_tokens`) comes from its `response`.
- An `error` event keeps its `error` object (or the event's own code and message when it has
  none), and a failed response keeps `response.error`: inside a 2xx each is ERROR_IN_STREAM.

A JSON body (`"object": "response"`) reads `output` the same way: each `function_call` item is a
call whose index is its position in `output`, and `status` gives the finish reason.
"""

from __future__ import annotations

from typing import Any

from calltap.dialects import openai_responses_request
from calltap.dialects.base import Conversation, Framing
from calltap.dialects.common import (
    BODY,
    chat_conversation,
    finish,
    normalize_finish_reason,
    normalize_usage,
    position_of,
    record_error,
    tool_names,
    usage_always_given,
)
from calltap.dialects.single_choice import EndedCall, TypedEventReducer
from calltap.sse import Event
from calltap.transcript import FinishReason, Position, Transcript

NAME = "openai.responses"
PATHS = ("/responses",)
FRAMING: Framing = "sse"
STATUSES: dict[str, FinishReason] = {
    "completed": "stop",
    "incomplete": "length",
    "failed": "error",
    "cancelled": "error",
}
"""A terminal status as a finish reason; completed becomes tool_calls when the choice has calls."""
INCOMPLETE_REASONS: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}
ERROR_FIELDS = ("code", "message", "param")


def sniff(payload: Any) -> bool:
    """True when a decoded stream payload or JSON body belongs to Responses.

    An `error` event is Responses' only with a `sequence_number`; Anthropic's has none.
    """
    if payload.__class__ is not dict:
        return False
    kind = payload.get("type")
    if kind.__class__ is not str:
        return payload.get("object") == "response"
    if kind.startswith("response."):
        return True
    if kind == "error":
        return "sequence_number" in payload
    return payload.get("object") == "response"


class _Call(EndedCall):
    """One function_call item; its `.done` event or item states the arguments in one piece."""

    __slots__ = ("item_id",)

    def __init__(self, index: int, item: dict[str, Any], position: Position) -> None:
        super().__init__(index, item.get("call_id"), item.get("name"), position)
        item_id = item.get("id")
        self.item_id = item_id if item_id.__class__ is str else None
        self.take_arguments(item.get("arguments"))

    def take_arguments(self, arguments: Any) -> None:
        if arguments and arguments.__class__ is str:
            self.whole = arguments


class _Reducer(TypedEventReducer[_Call]):
    """Responses: output items by `output_index`, the finish reason from the terminal status."""

    NAME = NAME
    TERMINALS = frozenset({"response.completed", "response.incomplete", "response.failed"})
    CUT = "function_call item {index} never closed"

    def terminal(self, payload: dict[str, Any], event: Event) -> None:
        response = payload.get("response")
        self.response(response if response.__class__ is dict else {}, event)

    def event(self, kind: str, payload: dict[str, Any], event: Event) -> None:
        if kind == "response.output_text.delta":
            self.take_text(payload.get("delta"), event)
        elif kind == "response.function_call_arguments.delta":
            call = self.call_of(payload, event)
            fragment = payload.get("delta")
            if fragment.__class__ is str:
                call.parts.append(fragment)
        elif kind == "response.function_call_arguments.done":
            call = self.call_of(payload, event)
            call.take_arguments(payload.get("arguments"))
            call.closed = True
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self.item(kind, payload, event)
        elif kind == "response.created":
            self.restarted(event)
            self.start(event)
            response = payload.get("response")
            output = response.get("output") if response.__class__ is dict else None
            if output.__class__ is list:
                self.output(output, position_of(event))
        elif kind in ("response.in_progress", "response.queued"):
            self.start(event)
        elif kind == "error":
            error = payload.get("error")
            if not error:
                error = {key: payload[key] for key in ERROR_FIELDS if payload.get(key)}
            record_error(self.transcript, error or payload, self.status, position_of(event))

    def item(self, kind: str, payload: dict[str, Any], event: Event) -> None:
        self.began = True
        item = payload.get("item")
        index = payload.get("output_index")
        if item.__class__ is not dict or item.get("type") != "function_call":
            return
        if index.__class__ is not int:
            index = max(self.calls, default=-1) + 1
        self.start(event)
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = _Call(index, item, position_of(event))
        if kind == "response.output_item.done":
            if not call.whole:
                call.take_arguments(item.get("arguments"))
            call.closed = True

    def call_of(self, payload: dict[str, Any], event: Event) -> _Call:
        """The call an arguments event belongs to: by output_index, else by item_id."""
        self.start(event)
        index = payload.get("output_index")
        if index.__class__ is int:
            call = self.calls.get(index)
            if call is None:
                item = {"id": payload.get("item_id")}
                call = self.calls[index] = _Call(index, item, position_of(event))
            return call
        item_id = payload.get("item_id")
        for call in self.calls.values():
            if item_id and call.item_id == item_id:
                return call
        index = max(self.calls, default=-1) + 1
        call = self.calls[index] = _Call(index, {"id": item_id}, position_of(event))
        return call

    def response(self, response: dict[str, Any], event: Event | None) -> None:
        """A `response` object: the JSON body, or the one a terminal event carries."""
        position = position_of(event)
        error = response.get("error")
        if error:
            record_error(self.transcript, error, self.status, position)
        usage = normalize_usage(response.get("usage"))
        if usage is not None:
            self.transcript.usage = usage
            self.transcript.usage_position = position
        status = response.get("status")
        if status.__class__ is not str or status in ("in_progress", "queued"):
            return
        choice = self.start(event)
        choice.finish_position = position
        table = STATUSES
        if status == "incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if details.__class__ is dict else None
            if reason and reason.__class__ is str:
                status, table = reason, INCOMPLETE_REASONS
        choice.raw_finish_reason = status
        choice.finish_reason = normalize_finish_reason(status, table)

    def read_body(self, payload: dict[str, Any]) -> None:
        output = payload.get("output")
        if output.__class__ is list:
            self.start(None)
            self.output(output, BODY)
        self.response(payload, None)

    def output(self, output: list[Any], position: Position) -> None:
        """Whole output items: a JSON body's `output`, or the snapshot `response.created` holds."""
        for index, item in enumerate(output):
            if item.__class__ is dict:
                self.output_item(index, item, position)

    def output_item(self, index: int, item: dict[str, Any], position: Position) -> None:
        """One whole output item."""
        kind = item.get("type")
        if kind == "function_call":
            call = self.calls[index] = _Call(index, item, position)
            call.closed = True
        elif kind == "message":
            content = item.get("content")
            if content.__class__ is list:
                for part in content:
                    if part.__class__ is dict and part.get("type") == "output_text":
                        self.take_text(part.get("text"), None)

    def result(self) -> Transcript:
        choice = self.gather()
        if choice is not None and choice.raw_finish_reason == "completed":
            choice.finish_reason = "tool_calls" if choice.tool_calls else "stop"
        return finish(self.transcript)


reduce_events = _Reducer.reduce_events
reduce_json = _Reducer.reduce_json
usage_requested = usage_always_given
REQUEST = openai_responses_request


def conversation(request: dict[str, Any]) -> Conversation | None:
    """`messages` when the request has them, else the `input` items (a string is one user
    message)."""
    chat = chat_conversation(request)
    if chat is not None:
        return chat
    entries = request.get("input")
    if entries.__class__ is str:
        entries = [{"role": "user", "content": entries}]
    elif entries.__class__ is not list:
        return None
    return Conversation(entries, tool_names(request.get("tools"), request.get("functions")))
