"""Which framing a decoded body is in, and its frames, read a piece at a time.

`sniff_framing` decides, content first:
- an AWS event stream: the first 12 bytes are a prelude whose CRC matches and whose lengths are
  possible (a text body essentially never passes that check);
- JSON: an optional BOM and whitespace, then `{` or `[`; but NDJSON when the `Content-Type` says
  `application/x-ndjson`, or when the first line is a whole JSON object and another non-blank line
  follows it (a JSON body's first line is whole only when the body is one line; a pretty-printed
  body's first line is `{`); and a JSON array is read element by element (`jsonarray`), the way
  Gemini streams without `alt=sse`, so that a cut array still yields what it holds;
- an event stream declared `application/vnd.amazon.eventstream` whose first bytes are cut short of
  a prelude stays one, so that its framing reports the cut;
- anything else is SSE, as before any other framing existed.

The content wins over a `Content-Type` that names another framing: a gateway that labels its SSE
`application/json` still sends SSE, and the client had to parse what it sent.

Each stream framing is a class built on the body: iterating it gives its frames (`sse.Event`,
`ndjson.Line`, `eventstream.Message`; a JSON array's elements as `sse.Event`, which the "sse"
dialects read: `reader`), `payload(frame)` decodes one frame the way the dialects' `sniff` expects
it, and `end()` says how the body ended, once the frames were read: bytes after the last boundary
(SSE_INCOMPLETE_EVENT), or a broken event-stream message (FRAME_INVALID, at its offset; nothing
past it is read).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar, Protocol
from zlib import crc32

import orjson

from calltap import eventstream, jsonarray, ndjson, sse
from calltap.codes import Code
from calltap.dialects.base import Framing
from calltap.jsonvalues import JsonInvalid, load_envelope
from calltap.transcript import Finding, Position

JSON_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*[\{\[]")
"""A JSON body: an optional BOM, optional whitespace, then an object or an array."""
FEED_PIECE = 64 * 1024
"""Bytes handed to a framing's decoder at a time."""
MEDIA_TYPES: dict[str, Framing] = {
    "application/x-ndjson": "ndjson",
    "application/ndjson": "ndjson",
    "application/jsonl": "ndjson",
    "application/vnd.amazon.eventstream": "eventstream",
}
"""The media types whose framing content alone cannot always tell."""


def sniff_framing(body: bytes, content_type: str | None = None) -> Framing:
    """The framing of a decoded body (see the module docstring for the rules)."""
    declared = MEDIA_TYPES.get((content_type or "").partition(";")[0].strip().lower())
    if _event_stream_prelude(body):
        return "eventstream"
    if (start := JSON_START.match(body)) is not None:
        if declared == "ndjson" or _several_json_lines(body):
            return "ndjson"
        return "jsonarray" if body[start.end() - 1] == ord("[") else "json"
    if declared == "eventstream" and len(body) < eventstream.PRELUDE_LENGTH:
        return "eventstream"
    return "sse"


def _event_stream_prelude(body: bytes) -> bool:
    if len(body) < eventstream.PRELUDE_LENGTH:
        return False
    total = int.from_bytes(body[0:4])
    headers = int.from_bytes(body[4:8])
    return (
        crc32(body[0:8]) == int.from_bytes(body[8:12])
        and total >= eventstream.MESSAGE_OVERHEAD
        and headers <= total - eventstream.MESSAGE_OVERHEAD
    )


def _several_json_lines(body: bytes) -> bool:
    """The first line is one whole JSON object and a non-blank line follows it (bytes that are
    not UTF-8 are the line's problem, not the framing's)."""
    first, newline, rest = body.partition(b"\n")
    if not newline or not rest.strip():
        return False
    text = first.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "replace")
    try:
        return orjson.loads(text).__class__ is dict
    except orjson.JSONDecodeError:
        return False


def incomplete(cut: sse.Incomplete, boundary: str) -> Finding:
    """SSE_INCOMPLETE_EVENT for the bytes after the last boundary of any framing."""
    return Finding(
        Code.SSE_INCOMPLETE_EVENT,
        position=Position(None, cut.offset),
        detail=f"{cut.length} bytes after the last {boundary}",
    )


def _json_or_none(text: str) -> Any:
    try:
        return load_envelope(text)[0]
    except JsonInvalid:
        return None


class Decoder(Protocol):
    """What every framing's incremental decoder offers."""

    def feed(self, data: bytes) -> list[Any]: ...

    def close(self) -> sse.Incomplete | None: ...


class Frames(ABC):
    """A body's frames in one framing, fed to its decoder a piece at a time (only one piece's
    frames are alive at once, so a huge capture costs memory for its largest frame, not for all
    of them); iterate once, then ask `end`."""

    BOUNDARY: ClassVar[str]
    """What ends a frame, for the SSE_INCOMPLETE_EVENT detail."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.decoder = self.new_decoder()

    @staticmethod
    @abstractmethod
    def new_decoder() -> Decoder:
        """The framing's decoder."""

    @staticmethod
    @abstractmethod
    def payload(frame: Any) -> Any:
        """The decoded payload a dialect's `sniff` reads; None when there is none."""

    def __iter__(self) -> Iterator[Any]:
        body, feed = self.body, self.decoder.feed
        for start in range(0, len(body), FEED_PIECE):
            yield from feed(body[start : start + FEED_PIECE])

    def blocks(self) -> sse.Blocks | None:
        """The body as plain SSE blocks, read without a decoder; None in any other shape."""
        return None

    def cut(self) -> sse.Incomplete | None:
        """The bytes after the last whole frame, once every frame was read."""
        return self.decoder.close()

    def end(self) -> Finding | None:
        """How the body ended: None when at a frame boundary."""
        cut = self.cut()
        return None if cut is None else incomplete(cut, self.BOUNDARY)


class SSEFrames(Frames):
    """Server-sent events."""

    BOUNDARY = "event boundary"
    new_decoder = sse.SSEParser

    @staticmethod
    def payload(frame: sse.Event) -> Any:
        return _json_or_none(frame.data)

    def blocks(self) -> sse.Blocks | None:
        return sse.Blocks.of(self.body)


class NDJSONFrames(Frames):
    """Newline-delimited JSON lines."""

    BOUNDARY = "line end"
    new_decoder = ndjson.NDJSONDecoder

    @staticmethod
    def payload(frame: ndjson.Line) -> Any:
        return _json_or_none(frame.text)


class EventStreamFrames(Frames):
    """AWS event stream messages, up to the first broken one (the decoder gives none after it)."""

    BOUNDARY = "whole message"
    new_decoder = eventstream.EventStreamDecoder
    decoder: eventstream.EventStreamDecoder

    @staticmethod
    def payload(frame: eventstream.Message) -> Any:
        """`{event type: decoded payload}`, the shape botocore gives an event (an exception is
        keyed by its exception type)."""
        headers = frame.headers
        kind = headers.get(":event-type") or headers.get(":exception-type")
        try:
            return {kind: orjson.loads(frame.payload)} if kind.__class__ is str else None
        except orjson.JSONDecodeError:
            return None

    def end(self) -> Finding | None:
        error = self.decoder.error
        if error is None:
            return super().end()
        return Finding(Code.FRAME_INVALID, position=Position(None, error.offset),
                       detail=error.reason)


class JSONArrayFrames(SSEFrames):
    """The elements of a JSON array written progressively, each an `sse.Event`."""

    BOUNDARY = "array element"
    new_decoder = jsonarray.JSONArrayDecoder


STREAM_FRAMINGS: dict[Framing, type[Frames]] = {
    "sse": SSEFrames,
    "ndjson": NDJSONFrames,
    "eventstream": EventStreamFrames,
    "jsonarray": JSONArrayFrames,
}
"""Every stream framing's frames; "json" is a whole body, read without frames."""


def reader(framing: Framing) -> Framing:
    """The framing whose dialects read this framing's frames: a JSON array's elements are events
    of the "sse" dialects; every other framing is read by its own."""
    return "sse" if framing == "jsonarray" else framing
