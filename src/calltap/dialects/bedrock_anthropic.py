"""Anthropic Messages on Amazon Bedrock: `/model/{id}/invoke-with-response-stream` and `/invoke`.

InvokeModelWithResponseStream wraps each of the model's own events in an AWS event stream
`chunk` event whose payload is `{"bytes": <base64 of the event's JSON>}`; for an Anthropic model
that event is a Messages streaming event. Each chunk is unwrapped into one `sse.Event`, at the
chunk's ordinal and offset, and the Anthropic Messages reducer reads the events with every rule
`anthropic` states (`message_stop` is the terminal marker, and so on).
- A chunk whose payload or `bytes` cannot be decoded becomes an event with no data: JSON_INVALID.
- An `exception` or `error` message (throttling, a model timeout, a validation error) becomes a
  Messages `error` event carrying its type and message: inside a 2xx it is ERROR_IN_STREAM.
- Other event types are counted, not read.

It is Anthropic Messages in another framing, so its transcripts name the `anthropic.messages`
dialect: the registry holds it beside `anthropic` under that one name, and the framing of a body
tells the two apart. `/invoke` answers with an Anthropic message body, which the content already
names as Anthropic Messages. The request is an
Anthropic Messages body (with `anthropic_version` instead of `model`): its `messages` and `tools`
for the fingerprint, and the whole of it to an Ask by `anthropic_request`, which takes the model
and whether it streams from the path.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from calltap.dialects import anthropic, anthropic_request
from calltap.dialects.anthropic import MessagesReducer
from calltap.dialects.base import Framing
from calltap.dialects.bedrock import error_of
from calltap.dialects.common import chat_conversation, usage_always_given
from calltap.eventstream import Message
from calltap.sse import Event
from calltap.transcript import Transcript

NAME = anthropic.NAME
PATHS = ("/invoke-with-response-stream", "/invoke")
FRAMING: Framing = "eventstream"
CHUNK = "chunk"


def sniff(payload: Any) -> bool:
    """True for a `chunk` event (`{"chunk": {"bytes": ...}}`, as the framing gives it)."""
    if payload.__class__ is not dict or len(payload) != 1:
        return False
    chunk = payload.get(CHUNK)
    return chunk.__class__ is dict and "bytes" in chunk


def unwrap(messages: Iterable[Message]) -> Iterator[Event]:
    """The Messages events the chunks carry, errors as `error` events, where the chunks were."""
    for message in messages:
        error = error_of(message)
        if error is not None:
            data = orjson.dumps({"type": "error", "error": error}).decode()
        elif message.headers.get(":event-type") == CHUNK:
            data = _chunk_data(message.payload)
        else:
            continue
        yield Event(message.ordinal, message.offset, "", data, "")


def _chunk_data(payload: bytes) -> str:
    """The text of the event a chunk carries; empty when it cannot be decoded."""
    try:
        chunk = orjson.loads(payload)
        encoded = chunk.get("bytes") if chunk.__class__ is dict else None
        if encoded.__class__ is not str:
            return ""
        return base64.b64decode(encoded, validate=True).decode()
    except (orjson.JSONDecodeError, binascii.Error, UnicodeDecodeError):
        return ""


class _Reducer(MessagesReducer):
    """The Messages reducer over unwrapped chunks."""

    def stream(self, events: Iterable[Any]) -> Transcript:
        return super().stream(unwrap(events))


reduce_events = _Reducer.reduce_events
reduce_json = _Reducer.reduce_json
conversation = chat_conversation
usage_requested = usage_always_given
REQUEST = anthropic_request
