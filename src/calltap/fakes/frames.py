"""The fake gateway's reading of a provider's stream, whatever its framing, as payloads.

A stream transform (`calltap.fakes.defects.Relay`, a translation) takes one decoded payload at a
time; which bytes make one depends on the framing the provider's `Content-Type` names:

- `text/event-stream`: each SSE event, its data decoded as a JSON object (else the raw text, such
  as `[DONE]`), with its `event:` type;
- `application/x-ndjson` (Ollama): each line, decoded as a JSON object (else its text);
- `application/vnd.amazon.eventstream` (Bedrock): each message as `{event type: body}`, the shape
  botocore gives an event, or `{"error": {"type", "message"}}` for an `exception` message.

Every reader is fed bytes as they arrive, in any split.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from calltap.eventstream import EventStreamDecoder, Message
from calltap.fakes.defects import Payload
from calltap.ndjson import NDJSONDecoder
from calltap.sse import Event, SSEParser

Typed = tuple[str, Payload]
"""A payload and the SSE event type it came with ("message" when the framing has none)."""


class Frames(Protocol):
    def feed(self, data: bytes) -> list[Typed]: ...


def decode(event: Event) -> Payload:
    """An event's payload: the JSON object it holds, or its raw data text."""
    return _object_or_text(event.data)


def _object_or_text(text: str) -> Payload:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    return value if isinstance(value, dict) else text


class SSEFrames:
    def __init__(self) -> None:
        self.parser = SSEParser()

    def feed(self, data: bytes) -> list[Typed]:
        return [(event.type, decode(event)) for event in self.parser.feed(data)]


class NDJSONFrames:
    def __init__(self) -> None:
        self.decoder = NDJSONDecoder()

    def feed(self, data: bytes) -> list[Typed]:
        return [("message", _object_or_text(line.text)) for line in self.decoder.feed(data)]


def message_payload(message: Message) -> Payload:
    """One event stream message as a payload; a payload that is not JSON is left as text."""
    headers = message.headers
    body: Any = _object_or_text(message.payload.decode("utf-8", "replace"))
    if headers.get(":message-type", "event") == "exception":
        text = body.get("message") if isinstance(body, dict) else body
        return {"error": {"type": headers.get(":exception-type"), "message": text}}
    if headers.get(":message-type") == "error":
        return {
            "error": {"code": headers.get(":error-code"), "message": headers.get(":error-message")}
        }
    return {str(headers.get(":event-type")): body}


class EventStreamFrames:
    def __init__(self) -> None:
        self.decoder = EventStreamDecoder()

    def feed(self, data: bytes) -> list[Typed]:
        return [("message", message_payload(message)) for message in self.decoder.feed(data)]


READERS: dict[str, type[SSEFrames] | type[NDJSONFrames] | type[EventStreamFrames]] = {
    "text/event-stream": SSEFrames,
    "application/x-ndjson": NDJSONFrames,
    "application/vnd.amazon.eventstream": EventStreamFrames,
}
"""A reader for each stream media type the gateway can transform."""


def frames_for(media_type: str) -> Frames | None:
    """A fresh reader for a response's media type; None when it is not a stream."""
    reader = READERS.get(media_type)
    return reader() if reader is not None else None
