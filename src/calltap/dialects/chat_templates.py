"""A stream's text deltas and argument fragments read through a template of their bytes, without
decoding each chunk.

A model's text arrives as hundreds of chunks whose bytes are the same but for the text:
`{"id":"chatcmpl-…","object":"chat.completion.chunk",…,"choices":[{"index":0,"delta":{"content":
"Hello"},"logprobs":null,"finish_reason":null}]}`, and on OpenAI's own streams an `obfuscation`
string of padding that changes with every chunk; a tool call's arguments likewise, as fragments
that differ only in `arguments`. Once the reducer has read one such chunk the way every later one
is read (a text delta to a choice that already holds text; a fragment of nothing but `arguments`
to a named call), the bytes around those one or two strings are a template. A payload made of the
template with other strings in its holes means what that chunk meant with those strings, so what
it adds is the string of the `content` (or `arguments`) hole, decoded, and nothing else needs
reading.

Why this is sound:
- each hole of a payload must decode alone as one JSON string, with msgspec's decoder (quotes,
  escapes and UTF-8 checked as when it decodes the whole chunk), so that putting it in place of
  the template's string leaves the chunk's structure as it was;
- a template is kept only when a probe shows that its holes are the chunk's `content` and
  `obfuscation` values (or `arguments` and `obfuscation`) and nothing else: the template with
  other strings in the holes decodes to the same chunk with those strings.
Any payload that does not fit is decoded as before.

A body keeps a template per chunk skeleton it reads (`Templates`): parallel tool calls whose
fragments interleave, or choices whose text deltas do, change skeleton with every chunk (the
call's or the choice's `index` is in its bytes), and each payload is read through the template
whose head it starts with. Which template reads a payload changes nothing but the speed: any
template it fits reads it as decoding would.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import orjson

from calltap.dialects.chat_chunks import REJECTED, Chunk, decode

_VALUE = rb'[ \t\n\r]*:[ \t\n\r]*("(?:[^"\\]|\\.)*")'
"""After a key, the colon and a JSON string token (the probe checks what this found)."""
_OBFUSCATION = b'"obfuscation"'
_decode_string = msgspec.json.Decoder(str).decode

TEMPLATES_KEPT = 256
"""Templates a body keeps at once (one per call whose fragments interleave with others', one per
choice whose text does); past this many the oldest is dropped."""


def _with_text(chunk: Chunk, text: str) -> Chunk:
    entry = chunk.choices[0]  # type: ignore[index]
    return msgspec.structs.replace(
        chunk, choices=[msgspec.structs.replace(entry, delta={"content": text})])


def _with_arguments(chunk: Chunk, arguments: str) -> Chunk:
    entry = chunk.choices[0]  # type: ignore[index]
    [fragment] = entry.delta["tool_calls"]
    fragment = {**fragment, "function": {"arguments": arguments}}
    return msgspec.structs.replace(
        chunk, choices=[msgspec.structs.replace(entry, delta={"tool_calls": [fragment]})])


@dataclass(frozen=True, slots=True)
class Hole:
    """The string a template leaves open: its key, and the chunk with another string there."""

    key: bytes
    put: Callable[[Chunk, str], Chunk]


TEXT = Hole(b'"content"', _with_text)
"""A text delta's `content`: `{"content": …}` is the whole delta."""
ARGUMENTS = Hole(b'"arguments"', _with_arguments)
"""An argument fragment's `arguments`: `{"arguments": …}` is the fragment's whole function."""


@dataclass(frozen=True, slots=True)
class Template:
    """A chunk's bytes cut around its strings: `head`, the first hole, `middle` and the second
    hole when there are two, `tail`."""

    head: bytes
    middle: bytes | None
    tail: bytes
    open_first: bool
    """Whether the open hole (`content` or `arguments`) comes before the padding."""

    @classmethod
    def of(cls, payload: bytes, chunk: Chunk, hole: Hole, value: str) -> Template | None:
        """The template of a payload decoded as `chunk`, whose `hole` holds `value`; None when
        its holes cannot be found or proven."""
        opened = _hole(payload, hole.key)
        if opened is None:
            return None
        holes = [opened]
        if chunk.obfuscation is not None:
            padding = _hole(payload, _OBFUSCATION)
            if padding is None:
                return None
            holes.append(padding)
        holes.sort()
        (start, end), *rest = holes
        middle = payload[end:rest[0][0]] if rest else None
        template = cls(payload[:start], middle, payload[rest[0][1] if rest else end:],
                       open_first=holes[0] == opened)
        return template if template.fits(chunk, hole, value) else None

    def read(self, payloads: list[bytes], index: int, end: int,
             append: Callable[[str], None]) -> int:
        """The string in the open hole of each payload from `index` on made from this template,
        handed to `append`; the index of the first payload that is not (or `end`)."""
        head, middle, tail = self.head, self.middle, self.tail
        start, after = len(head), len(tail)
        while index < end:
            payload = payloads[index]
            if not (payload.startswith(head) and payload.endswith(tail)):
                return index
            stop = len(payload) - after
            try:
                if middle is None:
                    text = _decode_string(payload[start:stop])
                else:
                    text = self._text(payload, start, stop)
            except REJECTED:
                return index
            if text is None:
                return index
            append(text)
            index += 1
        return end

    def _text(self, payload: bytes, start: int, stop: int) -> str | None:
        """The open hole's string of a two-hole payload: both holes must decode."""
        middle = self.middle
        assert middle is not None
        at = payload.find(middle, start, stop)
        if at < 0:
            return None
        first = _decode_string(payload[start:at])
        second = _decode_string(payload[at + len(middle):stop])
        return first if self.open_first else second

    def fits(self, chunk: Chunk, hole: Hole, value: str) -> bool:
        """Does the template, with other strings in its holes, decode to `chunk` holding those
        strings instead of `value` and its obfuscation?"""
        other = value + "\x00"
        padding = (chunk.obfuscation or "") + "\x00"
        first, second = (other, padding) if self.open_first else (padding, other)
        probe = self.head + orjson.dumps(first)
        if self.middle is not None:
            probe += self.middle + orjson.dumps(second)
        try:
            probed = decode(probe + self.tail)
        except REJECTED:
            return False
        expected = hole.put(chunk, other)
        if self.middle is not None:
            expected.obfuscation = padding
        return probed == expected


Reading = tuple[Template, Callable[[str], None]]
"""A template and where the string in its open hole goes."""


class Templates:
    """A body's templates, each found by its head, so that payloads of several skeletons in
    turn (the fragments of calls in parallel) are each read through their own."""

    __slots__ = ("_by_head", "_lengths", "last")

    def __init__(self) -> None:
        self._by_head: dict[bytes, Reading] = {}
        self._lengths: list[int] = []
        """The heads' lengths, each once."""
        self.last: Reading | None = None
        """The template that read the latest payload (or was made last), tried first; None
        while there is none."""

    def add(self, template: Template, append: Callable[[str], None]) -> None:
        """Keep `template`, in place of any other with its head."""
        by_head, head = self._by_head, template.head
        if head not in by_head and len(by_head) >= TEMPLATES_KEPT:
            del by_head[next(iter(by_head))]
            self._lengths = list({len(kept) for kept in by_head})
        by_head[head] = self.last = (template, append)
        if len(head) not in self._lengths:
            self._lengths.append(len(head))

    def read(self, payloads: list[bytes], index: int, end: int) -> int:
        """Each payload from `index` on that a kept template fits read through it; the index
        of the first that none fits (or `end`). A run of one skeleton's payloads costs what one
        template's `read` does; a change of skeleton, a lookup of the payload's head for each
        length of head kept."""
        current = self.last
        by_head = self._by_head
        while current is not None:
            template, append = current
            index = template.read(payloads, index, end, append)
            if index == end:
                break
            payload = payloads[index]
            for length in self._lengths:
                found = by_head.get(payload[:length])
                if found is not None:
                    break
            else:
                break
            if found is current:
                break
            current = self.last = found
        return index


def _hole(payload: bytes, key: bytes) -> tuple[int, int] | None:
    """Where the string value of the one occurrence of `key` (quoted) in `payload` lies."""
    at = payload.find(key)
    if at < 0 or payload.find(key, at + 1) >= 0:
        return None
    token = _VALUES[key].match(payload, at)
    return None if token is None else token.span(1)


_VALUES = {key: re.compile(re.escape(key) + _VALUE, re.DOTALL)
           for key in (TEXT.key, ARGUMENTS.key, _OBFUSCATION)}
