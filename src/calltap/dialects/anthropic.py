"""Anthropic Messages: `message_start` … `message_stop` streams and `message` JSON bodies.

How a stream is read, the way the SDKs' message accumulators read it:
- Each payload's `type` says what it is (the `event:` line repeats it and is used only when the
  payload has no `type`). `ping` is ignored anywhere; unknown types are skipped, as SDKs skip them.
- One choice, index 0, that begins at `message_start` (or at the first content, if that is
  missing).
- Text is every `text_delta` joined in order, across text blocks (and the rare non-empty `text` of
  a text block's `content_block_start`); `thinking_delta`, `signature_delta` and citations are not
  text.
- Each `tool_use` content block is one tool call: its id and name come from `content_block_start`,
  its index is the content block index (so a text block at 0 puts the first call at 1), and its
  arguments are the `input_json_delta.partial_json` fragments joined (the first is often `""`).
  A block with no fragment at all takes its start's `input` object, written as JSON. Server tools
  (`server_tool_use`, `mcp_tool_use`) run at the provider and are not calls the client makes.
- A tool block that never gets its `content_block_stop` is a cut call (the max_tokens case): it is
  TOOL_ARGUMENTS_INVALID even when the fragments that arrived happen to decode.
- `message_start.message` is the SDKs' starting snapshot: content blocks already inside it (server
  tool use puts whole `tool_use` blocks there) are delivered whole, at their positions in
  `content`, with no `content_block_start`/`stop` of their own.
- A second `message_start` after content began is STREAM_RESTARTED: a retried attempt spliced into
  the client's stream. Its blocks are read on top of the first message's, as an SDK that ignores
  the second start would read them.
- `message_delta` carries `stop_reason`, normalized: end_turn and stop_sequence → stop,
  max_tokens → length, tool_use → tool_calls, refusal → content_filter; pause_turn and
  model_context_window_exceeded → length, since in both the answer stopped before it was done and
  the client has to continue it.
- Usage: prompt tokens are `input_tokens` plus `cache_creation_input_tokens` and
  `cache_read_input_tokens` (Anthropic's `input_tokens` excludes the cache, OpenAI's prompt_tokens
  includes it, so a faithful translation keeps the total); completion tokens are `output_tokens`,
  which is cumulative: the last `message_delta` wins. Total is their sum.
- `message_stop` is the terminal marker; events after it are counted but not read.
- `error` events keep their `error` object; inside a 2xx it is ERROR_IN_STREAM.

A JSON body (`"type": "message"`) reads `content` the same way: each `tool_use` block's `input`
object is its arguments, its position in `content` its index. An error body
(`{"type": "error", "error": {…}}`) keeps its error object.

The SDKs dispatch on the `event:` line itself, so a stream whose `event:` lines were stripped reads
as empty to them; this reducer reads the payload types and does not flag that.
"""

from __future__ import annotations

from typing import Any

from calltap.dialects import anthropic_request
from calltap.dialects.base import Framing
from calltap.dialects.common import (
    BODY,
    canonical_arguments,
    chat_conversation,
    position_of,
    record_error,
    usage_always_given,
)
from calltap.dialects.single_choice import EndedCall, TypedEventReducer
from calltap.sse import Event
from calltap.transcript import FinishReason, Position, Transcript, Usage

NAME = "anthropic.messages"
PATHS = ("/v1/messages",)
FRAMING: Framing = "sse"
STREAM_TYPES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
    }
)
STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "length",
    "model_context_window_exceeded": "length",
}
PROMPT_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def sniff(payload: Any) -> bool:
    """True when a decoded stream payload or JSON body belongs to Anthropic Messages.

    An `error` payload is Anthropic's only without `sequence_number`, which Responses events carry.
    """
    if payload.__class__ is not dict:
        return False
    kind = payload.get("type")
    if kind.__class__ is not str:
        return False
    if kind in STREAM_TYPES:
        return True
    if kind == "message":
        return isinstance(payload.get("content"), list)
    return (
        kind == "error"
        and isinstance(payload.get("error"), dict)
        and "sequence_number" not in payload
    )


class _Block(EndedCall):
    """One tool_use content block; an `input` object at its start is its arguments in one piece."""

    __slots__ = ()

    def __init__(self, index: int, block: dict[str, Any], position: Position) -> None:
        super().__init__(index, block.get("id"), block.get("name"), position)
        start_input = block.get("input")
        if start_input.__class__ is dict and start_input:
            self.whole = canonical_arguments(start_input)


class MessagesReducer(TypedEventReducer[_Block]):
    """Messages: content blocks by index, the stop reason, usage merged field by field."""

    NAME = NAME
    TERMINALS = frozenset({"message_stop"})
    CUT = "tool_use block {index} never stopped"

    def __init__(self, streaming: bool, status: int | None) -> None:
        super().__init__(streaming, status)
        self.usage: dict[str, Any] = {}

    def event(self, kind: str, payload: dict[str, Any], event: Event) -> None:
        if kind == "content_block_delta":
            self.delta(payload, event)
        elif kind == "content_block_start":
            self.block_start(payload, event)
        elif kind == "content_block_stop":
            index = payload.get("index")
            block = self.calls.get(index) if index.__class__ is int else None
            if block is not None:
                block.closed = True
        elif kind == "message_start":
            self.restarted(event)
            message = payload.get("message")
            if message.__class__ is dict:
                self.message(message, event)
            else:
                self.start(event)
        elif kind == "message_delta":
            self.start(event)
            delta = payload.get("delta")
            if delta.__class__ is dict:
                self.stop_reason(delta.get("stop_reason"), event)
            self.take_usage(payload.get("usage"), event)
        elif kind == "error":
            error = payload.get("error")
            record_error(self.transcript, error or payload, self.status, position_of(event))

    def message(self, message: dict[str, Any], event: Event | None) -> None:
        """A `message` object: the JSON body, or the envelope of `message_start`."""
        self.start(event)
        content = message.get("content")
        if content.__class__ is list:
            for index, block in enumerate(content):
                if block.__class__ is dict:
                    self.content(index, block, event, whole=True)
        self.stop_reason(message.get("stop_reason"), event)
        self.take_usage(message.get("usage"), event)

    def block_start(self, payload: dict[str, Any], event: Event) -> None:
        self.began = True
        block = payload.get("content_block")
        index = payload.get("index")
        if block.__class__ is dict and index.__class__ is int:
            self.start(event)
            self.content(index, block, event, whole=False)

    def content(
        self, index: int, block: dict[str, Any], event: Event | None, *, whole: bool
    ) -> None:
        """A content block as it starts (`content_block_start`), or whole (a JSON body, or the
        snapshot `message_start` carries)."""
        kind = block.get("type")
        if kind == "text":
            self.take_text(block.get("text"), event)
        elif kind == "tool_use":
            tool = self.calls[index] = _Block(index, block, position_of(event))
            tool.closed = whole

    def delta(self, payload: dict[str, Any], event: Event) -> None:
        self.began = True
        delta = payload.get("delta")
        if delta.__class__ is not dict:
            return
        kind = delta.get("type")
        if kind == "text_delta":
            self.take_text(delta.get("text"), event)
        elif kind == "input_json_delta":
            index = payload.get("index")
            if index.__class__ is not int:
                return
            self.start(event)
            block = self.calls.get(index)
            if block is None:
                block = self.calls[index] = _Block(index, {}, position_of(event))
            fragment = delta.get("partial_json")
            if fragment.__class__ is str:
                block.parts.append(fragment)

    def stop_reason(self, reason: Any, event: Event | None) -> None:
        self.take_finish(reason, STOP_REASONS, event)

    def take_usage(self, usage: Any, event: Event | None) -> None:
        """Merge a usage object: each field it carries replaces the earlier count."""
        if usage.__class__ is not dict:
            return
        counts = {key: value for key, value in usage.items() if value.__class__ is int}
        if counts:
            self.usage.update(counts)
            self.transcript.usage_position = position_of(event)

    def read_body(self, payload: dict[str, Any]) -> None:
        error = payload.get("error")
        if error:
            record_error(self.transcript, error, self.status, BODY)
        if payload.get("type") == "message" or "content" in payload:
            self.message(payload, None)

    def result(self) -> Transcript:
        self.transcript.usage = _usage(self.usage)
        return super().result()


def _usage(counts: dict[str, Any]) -> Usage | None:
    """Prompt (input plus cache tokens), completion (output) and their sum."""
    inputs = [counts[key] for key in PROMPT_FIELDS if key in counts]
    prompt = sum(inputs) if inputs else None
    completion = counts.get("output_tokens")
    if prompt is None and completion is None:
        return None
    total = prompt + completion if prompt is not None and completion is not None else None
    return Usage(prompt, completion, total)


reduce_events = MessagesReducer.reduce_events
reduce_json = MessagesReducer.reduce_json
conversation = chat_conversation
usage_requested = usage_always_given
REQUEST = anthropic_request
