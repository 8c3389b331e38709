"""Write AWS event stream messages the way Bedrock does, for tests and the fake provider.

`encode` frames headers and a payload (`calltap.eventstream` states the format). A header value
that is a str, bool or bytes is written as a string, a boolean or a byte array; any other type
(byte, short, int, long, timestamp, UUID) is asked for with `Typed`. `frame` wraps a raw header
block, so that tests can write blocks the encoder never would.

Bedrock's streams are JSON payloads with three headers (the botocore model of `bedrock-runtime`
names the members): `event` writes a ConverseStream event (`messageStart`, `contentBlockDelta`,
...) or an InvokeModelWithResponseStream `chunk`, `exception` a modelled error such as
`throttlingException`, and `chunk` the `chunk` event that carries a model's own event, base64 in
`bytes`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from struct import Struct
from typing import Any, NamedTuple
from zlib import crc32

import orjson

from calltap.eventstream import INTEGER_FORMATS, MESSAGE_OVERHEAD, HeaderType, HeaderValue

_PRELUDE = Struct(">II")
_UINT32 = Struct(">I")
_UINT16 = Struct(">H")


class Typed(NamedTuple):
    """A header value with its wire type spelt out: an int type, a timestamp or a UUID."""

    type: HeaderType
    value: int | bytes


def encode(headers: Mapping[str, HeaderValue | Typed], payload: bytes = b"") -> bytes:
    """One message: prelude, headers in the mapping's order, payload, CRCs."""
    return frame(b"".join(_header(name, value) for name, value in headers.items()), payload)


def frame(header_block: bytes, payload: bytes) -> bytes:
    """One message around a header block written by the caller."""
    prelude = _PRELUDE.pack(MESSAGE_OVERHEAD + len(header_block) + len(payload), len(header_block))
    head = prelude + _UINT32.pack(crc32(prelude)) + header_block + payload
    return head + _UINT32.pack(crc32(head))


def event(event_type: str, body: Any) -> bytes:
    """A Bedrock event: `body` as JSON, typed by `:event-type`."""
    headers = {":event-type": event_type, ":content-type": "application/json"}
    return encode({**headers, ":message-type": "event"}, orjson.dumps(body))


def exception(exception_type: str, message: str) -> bytes:
    """A Bedrock modelled error in the stream, as `{"message": ...}`."""
    headers = {":exception-type": exception_type, ":content-type": "application/json"}
    return encode({**headers, ":message-type": "exception"}, orjson.dumps({"message": message}))


def chunk(model_event: Any) -> bytes:
    """An InvokeModelWithResponseStream `chunk`: the model's own event, JSON then base64."""
    return event("chunk", {"bytes": base64.b64encode(orjson.dumps(model_event)).decode()})


def _header(name: str, value: HeaderValue | Typed) -> bytes:
    raw_name = name.encode()
    return bytes([len(raw_name)]) + raw_name + _value(value)


def _value(value: HeaderValue | Typed) -> bytes:
    """Type byte and value bytes; a bool is tested before int, of which it is a subclass."""
    if isinstance(value, bool):
        return bytes([HeaderType.TRUE if value else HeaderType.FALSE])
    if isinstance(value, str):
        value = Typed(HeaderType.STRING, value.encode())
    elif isinstance(value, bytes):
        value = Typed(HeaderType.BYTE_ARRAY, value)
    if not isinstance(value, Typed):
        raise TypeError(f"say which integer type with Typed: {value!r}")
    kind, raw = value
    if isinstance(raw, int):
        return bytes([kind]) + INTEGER_FORMATS[kind].pack(raw)
    if kind == HeaderType.UUID:
        return bytes([kind]) + raw
    return bytes([kind]) + _UINT16.pack(len(raw)) + raw
