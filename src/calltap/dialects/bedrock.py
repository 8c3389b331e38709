"""Amazon Bedrock Converse: `/model/{id}/converse-stream` event streams and `/converse` JSON.

How a stream is read, the way botocore and the AWS SDKs read it:
- Each AWS event stream message (`calltap.eventstream`) is one event; its `:event-type` header
  names it and its payload is the member's JSON. A payload that is not a JSON object is
  JSON_INVALID and skipped. A message that breaks the framing is FRAME_INVALID, reported by the
  framing, and nothing past it is read.
- One choice, index 0, that begins at `messageStart` (or at the first content, if that is
  missing). A second `messageStart` after content began is STREAM_RESTARTED: a retried attempt
  spliced into the client's stream, read on top of the first.
- Text is every `contentBlockDelta.delta.text` joined in order; reasoning content is not text.
- Each `contentBlockStart.start.toolUse` is one tool call: `toolUseId` and `name` from it, the
  `contentBlockIndex` its index, its arguments the `delta.toolUse.input` fragments joined. A call
  that never gets its `contentBlockStop` is a cut call: TOOL_ARGUMENTS_INVALID even when the
  fragments that arrived happen to decode.
- `messageStop` is the terminal marker; its `stopReason` is the finish reason: end_turn and
  stop_sequence → stop, tool_use → tool_calls, max_tokens and model_context_window_exceeded →
  length, guardrail_intervened and content_filtered → content_filter; others pass through.
- `metadata` comes after `messageStop` and carries the usage, so it is still read; the stream
  ends there, and any later message is counted, not read. Prompt tokens are `inputTokens` plus
  `cacheReadInputTokens` and `cacheWriteInputTokens` (Converse, like Anthropic, counts the cache
  apart), completion tokens `outputTokens`, the total `totalTokens` (their sum when absent).
- An `exception` message (`:exception-type`, `{"message"}`) or an `error` message
  (`:error-code`, `:error-message`) is an error object; inside a 2xx it is ERROR_IN_STREAM.

A JSON body reads `output.message.content[]` the same way: `text` blocks are text, each `toolUse`
block (`toolUseId`, `name`, `input` object) is a whole call whose index is its position;
`stopReason` and `usage` as above.

On the request side, Converse `messages` hold content blocks without a `type`: `{text}` blocks
become text parts and `{toolResult: {content: [{text}]}}` blocks tool results for the
fingerprint; tools are `toolConfig.tools[].toolSpec.name`; the top-level `system` is skipped.
`bedrock_request` reads the whole request to an Ask.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from calltap.dialects import bedrock_request
from calltap.dialects.base import Conversation, Framing
from calltap.dialects.common import (
    BODY,
    canonical_arguments,
    finish,
    position_of,
    read_object,
    record_error,
    usage_always_given,
)
from calltap.dialects.single_choice import EndedCall, SingleChoiceReducer
from calltap.eventstream import Message
from calltap.transcript import FinishReason, Transcript, Usage

NAME = "bedrock.converse"
PATHS = ("/converse-stream", "/converse")
FRAMING: Framing = "eventstream"
STREAM_EVENTS = frozenset(
    {
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    }
)
STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
PROMPT_FIELDS = ("inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
EVENT = "event"


def sniff(payload: Any) -> bool:
    """True for a Converse event (`{member: body}`, as the framing gives it) or JSON body."""
    if payload.__class__ is not dict:
        return False
    if len(payload) == 1:
        return next(iter(payload)) in STREAM_EVENTS
    output = payload.get("output")
    return output.__class__ is dict and "message" in output and "stopReason" in payload


def error_of(message: Message) -> dict[str, Any] | None:
    """The error object an `exception` or `error` message stands for; None for an event."""
    headers = message.headers
    kind = headers.get(":message-type", EVENT)
    if kind == EVENT:
        return None
    if kind == "exception":
        try:
            body = orjson.loads(message.payload)
        except orjson.JSONDecodeError:
            body = None
        text = body.get("message") if body.__class__ is dict else None
        return {"type": headers.get(":exception-type"), "message": text}
    return {"code": headers.get(":error-code"), "message": headers.get(":error-message")}


class _Reducer(SingleChoiceReducer[EndedCall]):
    """Converse: content blocks by index, the stop reason, the usage after the stop."""

    NAME = NAME
    CUT = "toolUse block {index} never stopped"

    def stream(self, events: Iterable[Message]) -> Transcript:
        frames = iter(events)
        frame = stop = None
        for frame in frames:
            kind = frame.headers.get(":event-type")
            if stop is not None and kind != "metadata":
                continue
            payload = self.decode(frame)
            if payload is None:
                continue
            if kind == "metadata":
                self.usage(payload.get("usage"), frame)
                if stop is not None:
                    break
            elif kind == "messageStop":
                stop = frame
                self.take_finish(payload.get("stopReason"), STOP_REASONS, frame)
            else:
                self.event(kind, payload, frame)
        self.drain(frames, frame, stop is not None)
        if stop is not None:
            self.transcript.end_position = position_of(stop)
        return self.result()

    def decode(self, frame: Message) -> dict[str, Any] | None:
        """The event's payload object; an error message recorded, a bad payload JSON_INVALID."""
        error = error_of(frame)
        if error is not None:
            record_error(self.transcript, error, self.status, position_of(frame))
            return None
        return read_object(frame.payload, frame, self.transcript.findings)

    def event(self, kind: Any, payload: dict[str, Any], frame: Message) -> None:
        """One event before `messageStop`, by its `:event-type`."""
        if kind == "contentBlockDelta":
            self.began = True
            delta = payload.get("delta")
            if delta.__class__ is dict:
                self.delta(delta, payload.get("contentBlockIndex"), frame)
        elif kind == "contentBlockStart":
            self.began = True
            start = payload.get("start")
            tool = start.get("toolUse") if start.__class__ is dict else None
            index = payload.get("contentBlockIndex")
            if tool.__class__ is dict and index.__class__ is int:
                self.start(frame)
                self.calls[index] = EndedCall(
                    index, tool.get("toolUseId"), tool.get("name"), position_of(frame)
                )
        elif kind == "contentBlockStop":
            index = payload.get("contentBlockIndex")
            call = self.calls.get(index) if index.__class__ is int else None
            if call is not None:
                call.closed = True
        elif kind == "messageStart":
            self.restarted(frame)
            self.start(frame)

    def delta(self, delta: dict[str, Any], index: Any, frame: Message) -> None:
        text = delta.get("text")
        if text is not None:
            self.take_text(text, frame)
            return
        tool = delta.get("toolUse")
        if tool.__class__ is not dict or index.__class__ is not int:
            return
        self.start(frame)
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = EndedCall(index, None, None, position_of(frame))
        fragment = tool.get("input")
        if fragment.__class__ is str:
            call.parts.append(fragment)

    def usage(self, usage: Any, frame: Message | None) -> None:
        if usage.__class__ is not dict:
            return
        counts = [usage[key] for key in PROMPT_FIELDS if usage.get(key).__class__ is int]
        prompt = sum(counts) if counts else None
        completion = usage.get("outputTokens")
        completion = completion if completion.__class__ is int else None
        total = usage.get("totalTokens")
        if total.__class__ is not int:
            total = prompt + completion if prompt is not None and completion is not None else None
        if prompt is None and completion is None and total is None:
            return
        self.transcript.usage = Usage(prompt, completion, total)
        self.transcript.usage_position = position_of(frame)

    def read_body(self, payload: dict[str, Any]) -> None:
        output = payload.get("output")
        message = output.get("message") if output.__class__ is dict else None
        content = message.get("content") if message.__class__ is dict else None
        if content.__class__ is list:
            self.start(None)
            for index, block in enumerate(content):
                if block.__class__ is dict:
                    self.block(index, block)
        self.take_finish(payload.get("stopReason"), STOP_REASONS, None)
        self.usage(payload.get("usage"), None)
        if output is None and payload.get("message").__class__ is str:
            record_error(self.transcript, {"message": payload["message"]}, self.status, BODY)

    def block(self, index: int, block: dict[str, Any]) -> None:
        """One whole content block of a JSON body."""
        self.take_text(block.get("text"), None)
        tool = block.get("toolUse")
        if tool.__class__ is dict:
            call = self.calls[index] = EndedCall(index, tool.get("toolUseId"), tool.get("name"),
                                                 BODY)
            call.whole = canonical_arguments(tool.get("input"))
            call.closed = True

    def result(self) -> Transcript:
        self.gather()
        return finish(self.transcript)


reduce_events = _Reducer.reduce_events
reduce_json = _Reducer.reduce_json
usage_requested = usage_always_given
REQUEST = bedrock_request


def conversation(request: dict[str, Any]) -> Conversation | None:
    """The `messages`, their blocks given the fingerprint's types, and the tool specs' names."""
    messages = request.get("messages")
    if messages.__class__ is not list:
        return None
    config = request.get("toolConfig")
    tools = config.get("tools") if config.__class__ is dict else None
    names = [
        tool["toolSpec"]["name"]
        for tool in (tools if tools.__class__ is list else ())
        if tool.__class__ is dict
        and tool.get("toolSpec").__class__ is dict
        and tool["toolSpec"].get("name").__class__ is str
    ]
    return Conversation([_entry(message) for message in messages], names)


def _entry(message: Any) -> Any:
    """A message whose content blocks are typed; anything else is left as it is."""
    if message.__class__ is not dict or message.get("content").__class__ is not list:
        return message
    return {**message, "content": list(_parts(message["content"]))}


def _parts(blocks: list[Any]) -> Iterator[dict[str, Any]]:
    for block in blocks:
        if block.__class__ is not dict:
            continue
        if block.get("text").__class__ is str:
            yield {"type": "text", "text": block["text"]}
        result = block.get("toolResult")
        if result.__class__ is dict:
            content = result.get("content")
            parts = list(_parts(content)) if content.__class__ is list else []
            yield {"type": "tool_result", "content": parts}
