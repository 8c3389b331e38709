"""Incremental newline-delimited JSON framing (`application/x-ndjson`, Ollama's `/api/chat`).

The rules, which the comparator needs stated rather than left to whichever client read the body:

- a line ends at LF; a CR just before the LF belongs to the line end (CRLF), and a CR anywhere
  else is part of the line;
- a line holding only JSON whitespace (space, tab, CR) or nothing is skipped: no frame, no
  ordinal, as no JSON value could come of it;
- every other line is a frame: its text is the raw line without its line end, decoded as UTF-8.
  JSON decoding is the dialect's job, not the framing's;
- bytes that are not UTF-8 never stop the stream nor raise: the line's text has U+FFFD in their
  place and the frame says where in the body the first of them is (`invalid_utf8`), so a dialect
  can report it;
- bytes after the last LF are an unfinished frame, reported by `close()` as an `Incomplete`,
  unless they are only whitespace (no frame could have come of them either).

Feeding a body in any split gives the same frames as feeding it whole; each frame keeps the byte
offset of its line in the body and its ordinal. Work is linear in the bytes fed and memory is
bounded by the longest line: a partial line is kept until an LF arrives and only the new bytes
are searched for one.
"""

from __future__ import annotations

from typing import NamedTuple

from calltap.sse import Incomplete

_JSON_WHITESPACE = b" \t\r"


class Line(NamedTuple):
    """A non-blank line and where it came from.

    `ordinal` counts frames from 0; `offset` is the byte offset of the line's first byte in the
    body; `invalid_utf8` is the body offset of the first byte that is not UTF-8, or None.
    """

    ordinal: int
    offset: int
    text: str
    invalid_utf8: int | None


class NDJSONDecoder:
    """Feed body bytes as they arrive; get back the lines each piece completes.

    Call `close()` at the end of the body to learn whether a line was left unterminated.
    """

    def __init__(self) -> None:
        self._tail = bytearray()
        """The partial line: bytes after the last LF."""
        self._tail_offset = 0
        """Byte offset in the body of the first byte of `_tail`."""
        self._ordinal = 0
        self.bytes_scanned = 0
        """Bytes searched for LF so far: a partial line's bytes once on arrival and once more when
        its LF arrives, never on the feeds in between, so this stays within twice the bytes fed."""

    def feed(self, data: bytes) -> list[Line]:
        """Take the next piece of the body and return the lines it completes, in order."""
        if not data:
            return []
        self.bytes_scanned += len(data)
        buf: bytes | bytearray
        if self._tail:
            if b"\n" not in data:
                self._tail += data
                return []
            self.bytes_scanned += len(self._tail)
            buf = self._tail + data
        else:
            buf = data
        lines = buf.split(b"\n")
        rest = lines.pop()
        offset = self._tail_offset
        self._tail = bytearray(rest)
        self._tail_offset = offset + len(buf) - len(rest)
        return self._frames(lines, offset)

    def close(self) -> Incomplete | None:
        """End of body: report the unterminated last line, unless it is only whitespace."""
        if not self._tail.strip(_JSON_WHITESPACE):
            return None
        return Incomplete(self._tail_offset, len(self._tail))

    def _frames(self, lines: list, offset: int) -> list[Line]:
        """Frame complete lines (LF already cut) that begin at `offset`; skip blank ones.

        Building the named tuple from its fields directly costs half of calling `Line`.
        """
        frames: list[Line] = []
        new_tuple = tuple.__new__
        ordinal = self._ordinal
        for line in lines:
            size = len(line) + 1
            if line.strip(_JSON_WHITESPACE):
                if line[-1:] == b"\r":
                    line = line[:-1]
                try:
                    fields = (ordinal, offset, line.decode(), None)
                except UnicodeDecodeError as error:
                    text = line.decode("utf-8", "replace")
                    fields = (ordinal, offset, text, offset + error.start)
                frames.append(new_tuple(Line, fields))
                ordinal += 1
            offset += size
        self._ordinal = ordinal
        return frames


def parse(body: bytes) -> tuple[list[Line], Incomplete | None]:
    """Frame a whole body: its lines and the unterminated last line, if any."""
    decoder = NDJSONDecoder()
    return decoder.feed(body), decoder.close()
