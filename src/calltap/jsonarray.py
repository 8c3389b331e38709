"""Incremental reader of a JSON array written progressively, one element at a time.

Google's `streamGenerateContent` without `?alt=sse` answers with one JSON array whose elements
(`GenerateContentResponse` objects) are written as they are produced: `[{…}\\r\\n,{…}\\r\\n]`.
A client that waits for the closing `]` reads nothing until the end; a capture cut mid-way is not
JSON at all. This reader hands out each element as soon as its last byte arrived, so a cut array
still yields every element it holds. The rules:

- the body is an optional UTF-8 BOM, whitespace, `[`, elements separated by `,`, then `]`;
- an element is an object or an array (it ends at its matching bracket, brackets inside strings
  not counted), a string, or a run of other bytes up to the next `,`, `]`, bracket, quote or
  whitespace (a number, `true`, `null`, or garbage: whether it is JSON is the dialect's question,
  not the framing's);
- each element is delivered as an `sse.Event` of type `message` whose `data` is the element's
  text (UTF-8, bytes that are not UTF-8 replaced by U+FFFD), whose `ordinal` counts elements from
  0 and whose `offset` is the byte offset of its first byte in the body (a BOM included), so a
  dialect reads an array exactly as it reads an event stream;
- separators are read leniently, as a tolerant progressive reader does: a missing comma between
  two elements or an empty slot (`[,{}]`) neither stops the array nor makes an element;
- `close()` reports an `Incomplete` for the bytes after the last element (or after the `[`) when
  the array never closed, the stream having been cut; and for bytes other than whitespace after
  the closing `]`, or a body that does not begin with `[`: bytes no element came of.

Feeding a body in any split gives the same elements as feeding it whole. Work is linear in the
bytes fed (a string or element cut by a feed is resumed where the scan stopped, never rescanned,
except a bare scalar, which is short) and memory is bounded by the largest element.

Scanning an element for its end costs a step per string and bracket. Google's layout has a faster
way: an element is followed by a line end and the next line begins with the separator, which no
line inside an element can (a string holds no raw line end, and indented lines are indented). So
an object or array whose bytes up to such a line end parse as JSON is that element, whole (a
valid JSON value ends at its matching bracket, where the scan would have ended it); when they do
not, the scan reads it. Each such line end is tried once, which keeps the work linear.
"""

from __future__ import annotations

import re

import orjson

from calltap.sse import Event, Incomplete

_BOM = b"\xef\xbb\xbf"
_NON_SPACE = re.compile(rb"[^ \t\r\n]")
_STRUCTURE = re.compile(rb'["{}\[\]]')
"""What changes depth inside an element: a string's quote, a bracket."""
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
"""A string's bytes after its opening quote, up to its closing quote or a cut."""
_SCALAR = re.compile(rb'[^ \t\r\n,{}\[\]"]+')
_LINE_SEPARATOR = re.compile(rb"\n[,\]]")
"""A line that begins with the separator: where an element of Google's layout ends."""
_SPACES = b" \t\r\n"
_QUOTE, _COMMA = ord('"'), ord(",")
_OPENING, _CLOSING = frozenset(b"{["), frozenset(b"}]")

_START, _BETWEEN, _INSIDE, _DONE = range(4)
"""Before the `[`; between elements; inside an element; after the `]` (or a body no array)."""


class JSONArrayDecoder:
    """Feed body bytes as they arrive; get back the elements each piece completes, as events.

    Call `close()` at the end of the body to learn whether the array was left unfinished.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        """Bytes not yet consumed: from the start of the element being read, or the scan."""
        self._base = 0
        """Body offset of `_buf[0]`."""
        self._pos = 0
        """Where the scan resumes in `_buf`."""
        self._state = _START
        self._start = 0
        """Where the element being read begins in `_buf`."""
        self._depth = 0
        self._in_string = False
        self._ordinal = 0
        self._boundary: int | None = None
        """Body offset after the last complete element or the `[`; None before the `[`."""
        self._extra: int | None = None
        """Body offset of the first byte no element came of (after `]`, or instead of `[`)."""
        self._untried = 0
        """Body offset from which line separators are still untried by the fast path."""

    def feed(self, data: bytes) -> list[Event]:
        """Take the next piece of the body and return the elements it completes, in order."""
        if not data:
            return []
        self._buf += data
        events: list[Event] = []
        while self._state != _DONE and self._pos < len(self._buf):
            if self._state == _INSIDE:
                if not self._inside(events):
                    break
            elif not self._outside(events):
                break
        self._compact()
        return events

    def close(self) -> Incomplete | None:
        """End of body: the bytes after the last element of an array that never closed, or the
        bytes no element came of; None for a closed array (or a body of only whitespace)."""
        end = self._base + len(self._buf)
        if self._extra is not None:
            return Incomplete(self._extra, end - self._extra)
        if self._state == _DONE:
            return None
        if self._boundary is None:
            rest = self._buf[self._pos :].strip(_SPACES)
            return Incomplete(self._base, end - self._base) if rest else None
        return Incomplete(self._boundary, end - self._boundary)

    def _outside(self, events: list[Event]) -> bool:
        """Read separators up to the next element (or the end of the array); False to wait."""
        buf, pos = self._buf, self._pos
        if self._state == _START and self._base == 0 and pos == 0:
            if len(buf) < len(_BOM) and _BOM.startswith(buf):
                return False
            if buf.startswith(_BOM):
                pos = self._pos = len(_BOM)
        found = _NON_SPACE.search(buf, pos)
        if found is None:
            self._pos = len(buf)
            return False
        at = found.start()
        byte = buf[at]
        if self._state == _START:
            self._pos = at + 1
            if byte == ord("["):
                self._state = _BETWEEN
                self._boundary = self._base + at + 1
            else:
                self._stop(at)
        elif byte == _COMMA:
            self._pos = at + 1
        elif byte == ord("]"):
            self._pos = at + 1
            self._state = _DONE
        elif byte in _CLOSING:
            self._stop(at)
        else:
            return self._element(at, byte, events)
        return True

    def _element(self, at: int, byte: int, events: list[Event]) -> bool:
        """An element begins at `at`: a container or string is read on; a scalar is taken whole
        once a byte after it arrived (False until then)."""
        if byte in _OPENING and self._whole(at, events):
            return True
        if byte in _OPENING or byte == _QUOTE:
            self._state, self._start, self._pos = _INSIDE, at, at
            self._depth = 0
            return True
        end = _SCALAR.match(self._buf, at).end()  # type: ignore[union-attr]
        if end == len(self._buf):
            self._pos = at
            return False
        self._emit(at, end, events)
        self._pos = end
        return True

    def _whole(self, at: int, events: list[Event]) -> bool:
        """The fast path: the object or array at `at` ends before the next line separator if
        what lies between parses; True when it was taken so."""
        buf = self._buf
        found = _LINE_SEPARATOR.search(buf, max(at, self._untried - self._base))
        if found is None:
            self._untried = self._base + len(buf)
            return False
        self._untried = self._base + found.end()
        text = buf[at : found.start()].rstrip(_SPACES)
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            return False
        end = at + len(text)
        self._emit(at, end, events)
        self._pos = end
        return True

    def _inside(self, events: list[Event]) -> bool:
        """Scan the element being read up to its end; False to wait for more bytes."""
        buf, pos = self._buf, self._pos
        size = len(buf)
        depth = self._depth
        while True:
            if self._in_string:
                pos = _STRING_BODY.match(buf, pos).end()  # type: ignore[union-attr]
                if pos == size or buf[pos] != _QUOTE:
                    self._pos, self._depth = pos, depth
                    return False
                self._in_string = False
                pos += 1
            elif (found := _STRUCTURE.search(buf, pos)) is None:
                self._pos, self._depth = size, depth
                return False
            else:
                pos = found.end()
                byte = buf[pos - 1]
                if byte == _QUOTE:
                    self._in_string = True
                    continue
                depth += 1 if byte in _OPENING else -1
            if depth == 0:
                self._emit(self._start, pos, events)
                self._state, self._pos, self._depth = _BETWEEN, pos, 0
                return True

    def _emit(self, start: int, end: int, events: list[Event]) -> None:
        text = self._buf[start:end].decode("utf-8", "replace")
        events.append(Event(self._ordinal, self._base + start, "message", text, ""))
        self._ordinal += 1
        self._boundary = self._base + end

    def _stop(self, at: int) -> None:
        """A byte that cannot be where it is: nothing after it is read."""
        self._extra = self._base + at
        self._state = _DONE

    def _compact(self) -> None:
        """Drop the bytes no longer needed: before the element being read, or the scan. After
        the array, only the first byte that is not whitespace is noted."""
        if self._state == _DONE:
            if self._extra is None and (found := _NON_SPACE.search(self._buf, self._pos)):
                self._extra = self._base + found.start()
            self._base += len(self._buf)
            self._buf.clear()
            self._pos = 0
            return
        keep = self._start if self._state == _INSIDE else self._pos
        if keep:
            del self._buf[:keep]
            self._base += keep
            self._pos -= keep
            if self._state == _INSIDE:
                self._start = 0


def parse(body: bytes) -> tuple[list[Event], Incomplete | None]:
    """Read a whole body: its elements and what `close` reports."""
    decoder = JSONArrayDecoder()
    return decoder.feed(body), decoder.close()
