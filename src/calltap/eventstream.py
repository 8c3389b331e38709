"""Incremental AWS event stream framing (`application/vnd.amazon.eventstream`, Bedrock streams).

A message is a 12-byte prelude (total length and headers length, each a big-endian uint32, then
the CRC32 of those 8 bytes), the headers, the payload and the CRC32 of everything before it. A
header is a name (uint8 length, UTF-8), a value type (uint8) and a value: 0 true and 1 false (no
bytes), 2 byte, 3 short, 4 int, 5 long (signed, big-endian), 6 byte array and 7 string (uint16
length first), 8 timestamp (int64 milliseconds since the epoch), 9 UUID (16 bytes). Values come
out as botocore gives them: bool, int, bytes (byte array, UUID), str; a timestamp is its int.

The capture cannot be read past a message that breaks the rules, so the decoder stops at the
first one, sets `error` to an `Invalid` with the message's offset and what was wrong, and gives
no further message whatever bytes follow. What it checks, in order:

- the prelude CRC, as soon as 12 bytes are there (a corrupt length is caught before waiting for
  the bytes it announces);
- the lengths: total at least 16 bytes, headers no longer than the total leaves them, headers at
  most 128 KiB and payload at most 16 MiB (botocore's limits, so the decoder refuses what the
  SDK refuses: a message is at most 16 MiB + 128 KiB + 16 bytes);
- the message CRC;
- the headers: each name, type and value within the headers block, a known type, UTF-8 names and
  strings, no name twice.

Bytes after the last whole message are an unfinished message, reported by `close()` as an
`Incomplete` (none once the decoder has stopped: the error covers the rest of the body).

Feeding a body in any split gives the same messages as feeding it whole, each with its byte
offset in the body and its ordinal. Work is linear in the bytes fed and memory is bounded by the
largest message: a partial message waits, untouched, until the bytes its prelude announces are in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from struct import Struct
from typing import NamedTuple
from zlib import crc32

from calltap.sse import Incomplete

PRELUDE_LENGTH = 12
MESSAGE_OVERHEAD = PRELUDE_LENGTH + 4
"""Prelude and message CRC: the size of a message without headers or payload."""
MAX_HEADERS_LENGTH = 128 * 1024
MAX_PAYLOAD_LENGTH = 16 * 1024 * 1024

_PRELUDE = Struct(">III")
_UINT32 = Struct(">I")
_UINT16 = Struct(">H")

HeaderValue = bool | int | bytes | str


class HeaderType(IntEnum):
    """A header value's wire type."""

    TRUE = 0
    FALSE = 1
    BYTE = 2
    SHORT = 3
    INTEGER = 4
    LONG = 5
    BYTE_ARRAY = 6
    STRING = 7
    TIMESTAMP = 8
    UUID = 9


INTEGER_FORMATS = {
    HeaderType.BYTE: Struct(">b"),
    HeaderType.SHORT: Struct(">h"),
    HeaderType.INTEGER: Struct(">i"),
    HeaderType.LONG: Struct(">q"),
    HeaderType.TIMESTAMP: Struct(">q"),
}
_UUID_LENGTH = 16
_KNOWN_HEADER_BLOCKS = 64
_KNOWN_HEADER_BLOCK_LENGTH = 512


class Message(NamedTuple):
    """A message and where it came from: `ordinal` counts messages from 0, `offset` is the byte
    offset of its prelude in the body and `length` its total length.

    `headers` holds at least `:message-type` (`event`, `exception` or `error`) in what AWS sends,
    with `:event-type`, `:exception-type` or `:error-code` and usually `:content-type`.
    """

    ordinal: int
    offset: int
    length: int
    headers: dict[str, HeaderValue]
    payload: bytes


@dataclass(frozen=True, slots=True)
class Invalid:
    """The message at `offset` breaks the framing rules; `reason` says how. Nothing after it can
    be read."""

    offset: int
    reason: str


class _Malformed(Exception):
    """Raised inside the decoder only; `feed` turns it into an `Invalid`."""


class EventStreamDecoder:
    """Feed body bytes as they arrive; get back the messages each piece completes.

    After each feed `error` tells whether the decoder has stopped at a broken message; call
    `close()` at the end of the body to learn whether a message was left unfinished.
    """

    def __init__(self) -> None:
        self._pending = bytearray()
        """Bytes of the next message, not yet enough to read it."""
        self._pending_offset = 0
        """Byte offset in the body of the first byte of `_pending`."""
        self._needed = PRELUDE_LENGTH
        """How many bytes `_pending` must hold before the next message is read again."""
        self._ordinal = 0
        self._known_headers: dict[bytes, dict[str, HeaderValue]] = {}
        """Header blocks already parsed: a stream repeats a few blocks (one per event type)."""
        self.error: Invalid | None = None
        self.bytes_scanned = 0
        """Bytes read so far, CRC and headers: each message once when whole, and each prelude
        once more when it arrives before the rest, so this stays within twice the bytes fed."""

    def feed(self, data: bytes) -> list[Message]:
        """Take the next piece of the body and return the messages it completes, in order."""
        if self.error is not None or not data:
            return []
        buf = data
        if self._pending:
            self._pending += data
            if len(self._pending) < self._needed:
                return []
            buf = bytes(self._pending)
        elif len(data) < self._needed:
            self._pending += data
            return []
        messages: list[Message] = []
        try:
            taken = self._read(buf, messages)
        except _Malformed as malformed:
            self.error = Invalid(self._pending_offset, str(malformed))
            self._pending = bytearray()
            return messages
        self._pending = bytearray(buf[taken:])
        return messages

    def close(self) -> Incomplete | None:
        """End of body: report the bytes of an unfinished message, if any."""
        if self.error is not None or not self._pending:
            return None
        return Incomplete(self._pending_offset, len(self._pending))

    def _read(self, buf: bytes, messages: list[Message]) -> int:
        """Append each whole message at the start of `buf` to `messages`; return the bytes taken.

        `_pending_offset` follows the message being read, so a `_Malformed` raised here is
        reported at that message's offset. Building the named tuple from its fields directly
        costs half of calling `Message`.
        """
        start, end = 0, len(buf)
        new_tuple = tuple.__new__
        with memoryview(buf) as view:
            while end - start >= PRELUDE_LENGTH:
                total, headers_length, prelude_crc = _PRELUDE.unpack_from(buf, start)
                _check_prelude(view[start : start + 8], prelude_crc, total, headers_length)
                if end - start < total:
                    self._needed = total
                    self.bytes_scanned += 8
                    return start
                crc_at = start + total - 4
                checked = crc32(view[start + 8 : crc_at], prelude_crc)
                if checked != (read := _UINT32.unpack_from(buf, crc_at)[0]):
                    raise _Malformed(
                        f"message CRC mismatch: read 0x{read:08x}, computed 0x{checked:08x}"
                    )
                headers_end = start + PRELUDE_LENGTH + headers_length
                headers = self._headers(buf, start + PRELUDE_LENGTH, headers_end)
                fields = (self._ordinal, self._pending_offset, total, headers)
                messages.append(new_tuple(Message, (*fields, buf[headers_end:crc_at])))
                self._ordinal += 1
                self._pending_offset += total
                self.bytes_scanned += total
                start += total
        self._needed = PRELUDE_LENGTH
        return start

    def _headers(self, buf: bytes, start: int, end: int) -> dict[str, HeaderValue]:
        """The headers in `buf[start:end]`, a copy of the known ones when the block was seen."""
        if end - start > _KNOWN_HEADER_BLOCK_LENGTH:
            return _headers(buf, start, end)
        block = buf[start:end]
        known = self._known_headers.get(block)
        if known is None:
            known = _headers(buf, start, end)
            if len(self._known_headers) >= _KNOWN_HEADER_BLOCKS:
                self._known_headers.clear()
            self._known_headers[block] = known
        return known.copy()


def _check_prelude(lengths: memoryview, prelude_crc: int, total: int, headers_length: int) -> None:
    """Raise `_Malformed` unless the prelude's CRC matches and its lengths are possible."""
    if (checked := crc32(lengths)) != prelude_crc:
        raise _Malformed(
            f"prelude CRC mismatch: read 0x{prelude_crc:08x}, computed 0x{checked:08x}"
        )
    if total < MESSAGE_OVERHEAD:
        raise _Malformed(f"total length {total} is under the {MESSAGE_OVERHEAD}-byte minimum")
    if headers_length > total - MESSAGE_OVERHEAD:
        raise _Malformed(f"headers length {headers_length} exceeds total length {total} - 16")
    if headers_length > MAX_HEADERS_LENGTH:
        raise _Malformed(f"headers length {headers_length} is over {MAX_HEADERS_LENGTH}")
    if (payload_length := total - MESSAGE_OVERHEAD - headers_length) > MAX_PAYLOAD_LENGTH:
        raise _Malformed(f"payload length {payload_length} is over {MAX_PAYLOAD_LENGTH}")


def _headers(buf: bytes, start: int, end: int) -> dict[str, HeaderValue]:
    """The headers in `buf[start:end]`; `_Malformed` when they do not fill it exactly."""
    headers: dict[str, HeaderValue] = {}
    position = start
    while position < end:
        name_end = position + 1 + buf[position]
        if name_end >= end:
            raise _Malformed(f"header at byte {position - start} runs past the headers")
        name = _text(buf[position + 1 : name_end], "header name")
        if name in headers:
            raise _Malformed(f"header {name!r} appears twice")
        headers[name], position = _value(buf, name_end, end, name)
    return headers


def _value(buf: bytes, position: int, end: int, name: str) -> tuple[HeaderValue, int]:
    """The value of header `name` whose type byte is at `position`, and the position after it."""
    kind = buf[position]
    position += 1
    if kind <= HeaderType.FALSE:
        return kind == HeaderType.TRUE, position
    if kind in INTEGER_FORMATS:
        size = INTEGER_FORMATS[kind].size
    elif kind == HeaderType.UUID:
        size = _UUID_LENGTH
    elif kind in (HeaderType.BYTE_ARRAY, HeaderType.STRING):
        if position + 2 > end:
            raise _Malformed(f"header {name!r} runs past the headers")
        size = _UINT16.unpack_from(buf, position)[0]
        position += 2
    else:
        raise _Malformed(f"header {name!r} has unknown value type {kind}")
    value_end = position + size
    if value_end > end:
        raise _Malformed(f"header {name!r} runs past the headers")
    if kind in INTEGER_FORMATS:
        return INTEGER_FORMATS[kind].unpack_from(buf, position)[0], value_end
    value = buf[position:value_end]
    return (_text(value, f"header {name!r}") if kind == HeaderType.STRING else value), value_end


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as error:
        raise _Malformed(f"{what} is not UTF-8 at byte {error.start}") from None


def parse(body: bytes) -> tuple[list[Message], Incomplete | Invalid | None]:
    """Frame a whole body: its messages and how it ended, cut short, broken or neither."""
    decoder = EventStreamDecoder()
    messages = decoder.feed(body)
    return messages, decoder.error or decoder.close()
