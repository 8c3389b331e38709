"""Incremental `text/event-stream` parser that follows the WHATWG rules exactly.

Gateways and SDKs disagree on the edge cases of the format, so the comparator needs the spec's
answer, not a library's: which bytes make an event, which make nothing, and which were left
dangling when the stream ended. Feeding a body in any split gives the same events as feeding it
whole, and each event keeps the byte offset where its block began so findings can point into the
recorded file.

Work is linear in the bytes fed and memory is bounded by the largest event: a partial line is
searched for a line end only in the bytes that arrived since the last search, and dispatched
events are handed back, never kept. Field values are UTF-8, the only encoding the format has (and
`bytes.decode`'s default); an invalid sequence becomes U+FFFD, as a browser's EventSource reads it.

Two paths read the same rules. Almost every block a provider sends is one `data: <payload>` line,
or an `event: <type>` line and a `data: <payload>` line, each ended by LF, then a blank line;
when the bytes fed hold no CR and begin at a block boundary, such blocks are cut out whole and
decoded once. Every other block goes through the general line machine.

A whole body that is nothing but one-line `data: ` blocks (most Chat Completions streams) can be
read without the parser at all: `Blocks.of` checks its shape with a bytes search or count, it is
cut with bytes splits, and a reducer that needs an event's position or text asks its `Window` for
just that event.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, repeat
from typing import NamedTuple

_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"(\r\n|\r|\n)")
_DATA = b"data: "
_DATA_LENGTH = len(_DATA)
_EVENT = b"event: "
_EVENT_LENGTH = len(_EVENT)
_LF = ord("\n")
_BLOCK_END = b"\n\n"
_BETWEEN_DATA = _BLOCK_END + _DATA
_BLOCK_FRAME = _DATA_LENGTH + len(_BLOCK_END)
"""The bytes a plain block adds around its data: `data: ` and the blank line."""
_NEAR_END = 32
"""How many blocks from either end of a window have their offset summed when asked."""
WINDOW = 64 * 1024
"""About how many bytes of plain blocks are cut at once."""


class Event(NamedTuple):
    """A dispatched event and where it came from.

    `ordinal` counts dispatched events from 0; `offset` is the byte offset in the raw body (a
    leading BOM included) of the first line of the event's block, comments included.

    Immutable; a named tuple rather than a frozen dataclass because a stream holds one per
    event and a tuple is several times cheaper to build.
    """

    ordinal: int
    offset: int
    type: str
    data: str
    last_event_id: str


@dataclass(frozen=True, slots=True)
class Incomplete:
    """Bytes after the last blank line that never became an event: the capture may be cut."""

    offset: int
    length: int


class SSEParser:
    """Feed body bytes as they arrive; get back the events each piece completes.

    Call `close()` at the end of the body to learn whether an event was left unfinished.
    """

    def __init__(self) -> None:
        self._tail = bytearray()
        """The partial line: bytes after the last line end, not yet searched again."""
        self._tail_offset = 0
        """Byte offset in the body of the first byte of `_tail` (every byte before is consumed)."""
        self._at_start = True
        """No byte but a possible BOM prefix seen yet: a leading BOM is still to be dropped."""
        self._cr_pending = False
        """The last line ended with CR: an LF arriving next is the second half of a CRLF."""
        self._block_offset: int | None = None
        """Offset of the first line of the block being read; None right after a blank line."""
        self._data: list[bytes] = []
        self._type = b""
        self._last_event_id = ""
        self._ordinal = 0
        self.bytes_scanned = 0
        """Bytes searched for line ends so far. A pending line is never searched again, so this
        stays within twice the bytes fed: once when they arrive, once when their line ends."""

    def feed(self, data: bytes) -> list[Event]:
        """Take the next piece of the body and return the events it completes, in order."""
        if not data:
            return []
        if self._tail:
            self._tail += data
            self.bytes_scanned += len(data)
            if not self._at_start and b"\n" not in data and b"\r" not in data:
                return []
            buf: bytes | bytearray = self._tail
            self._tail = bytearray()
        else:
            buf = data
        offset = self._tail_offset
        if self._at_start:
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                self._tail = bytearray(buf)
                return []
            self._at_start = False
            if buf.startswith(_BOM):
                buf = buf[len(_BOM) :]
                offset += len(_BOM)
        if self._cr_pending:
            self._cr_pending = False
            if buf[:1] == b"\n":
                buf = buf[1:]
                offset += 1
        self.bytes_scanned += len(buf)
        events: list[Event] = []
        if self._block_offset is None and b"\r" not in buf:
            taken = self._take_blocks(buf, offset, events)
            if taken:
                buf = buf[taken:]
                offset += taken
        lines, terminator_lengths = self._split_lines(buf)
        rest = lines.pop()
        self._tail = bytearray(rest)
        self._tail_offset = offset + len(buf) - len(rest)
        events += self._take_lines(lines, terminator_lengths, offset)
        return events

    def close(self) -> Incomplete | None:
        """End of body: report the bytes after the last blank line, if any."""
        if self._block_offset is not None:
            start = self._block_offset
        elif self._tail:
            start = self._tail_offset
        else:
            return None
        return Incomplete(start, self._tail_offset + len(self._tail) - start)

    def _take_blocks(self, buf: bytes | bytearray, offset: int, events: list[Event]) -> int:
        """The fast path, for bytes without CR that begin at a block boundary: take every block
        that ends in `buf`, append its events to `events`, return how many bytes were taken.

        A block of one `data: ` line, or of an `event: ` line then a `data: ` line, is an event
        whose data is the rest of that line: the line's LF is followed by a second. (An LF is
        looked for only before the last byte, so that the byte after it exists.) Any other
        block goes through the line rules, its blank line included, and the counters kept in
        locals here are handed over around it. Searching for one LF at a time is several times
        faster than searching for two, and building the named tuple from its fields directly (what
        `Event._make` does, less its length check) costs half of calling `Event`.
        """
        find = buf.find
        new_tuple = tuple.__new__
        ordinal = self._ordinal
        last_event_id = self._last_event_id
        start = 0
        last = len(buf) - 1
        while (end := find(b"\n", start, last)) >= 0:
            event_type, data_start = "message", start
            usual = buf.startswith(_DATA, start)
            if not usual and buf.startswith(_EVENT, start):
                value = buf[start + _EVENT_LENGTH : end]
                event_type = value.decode(errors="replace") if value else "message"
                data_start = end + 1
                end = find(b"\n", data_start, last)
                usual = end >= 0 and buf.startswith(_DATA, data_start)
            if usual and buf[end + 1] == _LF:
                data = buf[data_start + _DATA_LENGTH : end].decode(errors="replace")
                fields = (ordinal, offset + start, event_type, data, last_event_id)
                events.append(new_tuple(Event, fields))
                ordinal += 1
            else:
                end = find(_BLOCK_END, start)
                if end < 0:
                    break
                lines = [*buf[start:end].split(b"\n"), b""]
                self._ordinal = ordinal
                events += self._take_lines(lines, repeat(1), offset + start)
                ordinal, last_event_id = self._ordinal, self._last_event_id
            start = end + 2
        self._ordinal = ordinal
        return start

    def _split_lines(self, buf: bytes | bytearray) -> tuple[list, Iterable[int]]:
        """Split into lines plus each line's terminator length; the last line is the partial one.

        A bytes method does the work when every line ends the same way, LF or CRLF; a regular
        expression handles mixed endings and lone CRs.
        """
        if b"\r" not in buf:
            return buf.split(b"\n"), repeat(1)
        if buf.count(b"\r") == buf.count(b"\n") == buf.count(b"\r\n"):
            return buf.split(b"\r\n"), repeat(2)
        parts = _LINE_END.split(buf)
        self._cr_pending = buf.endswith(b"\r")
        return parts[::2], map(len, parts[1::2])

    def _take_lines(
        self, lines: list, terminator_lengths: Iterable[int], offset: int
    ) -> list[Event]:
        """Run complete lines through the field rules; dispatch an event at each blank line.

        State lives in locals while it runs, and the usual line, `data: ` and its value, is
        recognised before the general field parsing.
        """
        events: list[Event] = []
        data = self._data
        block = self._block_offset
        event_type = self._type
        last_event_id = self._last_event_id
        ordinal = self._ordinal
        for line, terminator_length in zip(lines, terminator_lengths, strict=False):
            if line:
                if block is None:
                    block = offset
                if line[:6] == _DATA:
                    data.append(line[6:])
                else:
                    name, value = _field(line)
                    if name == b"data":
                        data.append(value)
                    elif name == b"event":
                        event_type = value
                    elif name == b"id" and b"\0" not in value:
                        last_event_id = value.decode(errors="replace")
            elif block is not None:
                if data:
                    events.append(
                        Event(
                            ordinal,
                            block,
                            event_type.decode(errors="replace") if event_type else "message",
                            b"\n".join(data).decode(errors="replace"),
                            last_event_id,
                        )
                    )
                    ordinal += 1
                    data.clear()
                event_type = b""
                block = None
            offset += len(line) + terminator_length
        self._block_offset = block
        self._type = event_type
        self._last_event_id = last_event_id
        self._ordinal = ordinal
        return events


class Blocks:
    """A body of plain blocks: each a `data: <payload>` line then a blank line, with no CR and
    no other line. Each block is an event of type "message" without id whose data is the line's
    value, and the body ends at a block boundary.

    `windows` cuts the body into runs of whole blocks of about WINDOW bytes, so that a body of
    any length costs memory for one run's data at a time; a body within one window is cut once,
    when it is checked.
    """

    __slots__ = ("body", "count", "whole")

    def __init__(self, body: bytes, count: int, whole: Window | None) -> None:
        self.body = body
        self.count = count
        """How many events the body holds."""
        self.whole = whole
        """The body's one window, when it fits in one."""

    @classmethod
    def of(cls, body: bytes) -> Blocks | None:
        """The body's plain blocks, or None when it has any other shape. A body that starts with
        `data: ` and ends with a blank line, cut at every blank line followed by `data: `, is
        plain when no piece holds a line end: when the pieces joined hold no LF (one search,
        for a body within a window, which is cut anyway), or when the body holds exactly two
        LFs per piece (one count, for a longer one)."""
        if b"\r" in body or not body.startswith(_DATA) or not body.endswith(_BLOCK_END):
            return None
        if len(body) <= WINDOW:
            whole = Window(body, 0, 0, len(body))
            if b"\n" in b"".join(whole.data):
                return None
            return cls(body, len(whole.data), whole)
        count = body.count(_BETWEEN_DATA) + 1
        if body.count(b"\n") != 2 * count:
            return None
        return cls(body, count, None)

    def windows(self) -> Iterator[Window]:
        """The body's blocks in windows of whole blocks, in order; at least one."""
        if self.whole is not None:
            yield self.whole
            return
        body = self.body
        size = len(body)
        start = first = 0
        while start < size:
            cut = body.rfind(_BETWEEN_DATA, start, start + WINDOW)
            if cut < 0:
                cut = body.find(_BETWEEN_DATA, start)
            end = size if cut < 0 or size - start <= WINDOW else cut + len(_BLOCK_END)
            window = Window(body, first, start, end)
            yield window
            first += len(window.data)
            start = end


class Window:
    """Consecutive plain blocks of a body (`Blocks`): their data as bytes, and any one's event
    built on demand, so that positions cost nothing for the events no finding names. Offsets
    near either end of the window (where a stream's finish, usage and end are) are summed when
    asked; any other comes from a table of every block's start, made the first time one is
    asked and used for every offset after.
    """

    __slots__ = ("_starts", "data", "end", "first", "start")

    def __init__(self, body: bytes, first: int, start: int, end: int) -> None:
        self.data = body[start + _DATA_LENGTH : end - len(_BLOCK_END)].split(_BETWEEN_DATA)
        """Each block's data."""
        self.first = first
        """The ordinal of the first block's event."""
        self.start = start
        self.end = end
        """The byte offsets of the first block and of the byte after the last."""
        self._starts: list[int] | None = None

    def offset(self, index: int) -> int:
        """The byte offset of the window's block `index`."""
        if self._starts is not None:
            return self.start + self._starts[index] + _BLOCK_FRAME * index
        data = self.data
        if index <= _NEAR_END:
            return self.start + sum(map(len, data[:index])) + _BLOCK_FRAME * index
        after = len(data) - index
        if after <= _NEAR_END:
            return self.end - sum(map(len, data[index:])) - _BLOCK_FRAME * after
        self._starts = list(accumulate(map(len, data), initial=0))
        return self.start + self._starts[index] + _BLOCK_FRAME * index

    def event(self, index: int) -> Event:
        """The event of the window's block `index`, as the parser dispatches it."""
        text = self.data[index].decode(errors="replace")
        return _new_event(Event, (self.first + index, self.offset(index), "message", text, ""))

    def events(self, start: int, stop: int) -> Iterator[Event]:
        """The events of blocks `start` to `stop` (excluded), in order."""
        offset = self.offset(start)
        for index, data in enumerate(self.data[start:stop], self.first + start):
            yield _new_event(Event, (index, offset, "message", data.decode(errors="replace"), ""))
            offset += len(data) + _BLOCK_FRAME


_new_event = tuple.__new__
"""An Event from its fields, without the named tuple's own constructor (twice as costly)."""


def _field(line: bytes) -> tuple[bytes, bytes]:
    """A non-blank line's field name and value; a comment (`:` first) has the empty name."""
    colon = line.find(b":")
    if colon < 0:
        return line, b""
    value = line[colon + 1 :]
    return line[:colon], value[1:] if value[:1] == b" " else value


def parse(body: bytes) -> tuple[list[Event], Incomplete | None]:
    """Parse a whole body: its events and the trailing incomplete event, if any."""
    parser = SSEParser()
    return parser.feed(body), parser.close()
