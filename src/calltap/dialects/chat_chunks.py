"""Chat Completions chunks decoded into typed envelopes, for the reducer's plain-block path.

orjson builds a dict for every field of every chunk, though the reducer reads only `error`,
`usage` and each of `choices`' `index`, `delta` and `finish_reason`. msgspec decodes a chunk into
Structs that hold just what a chunk may carry, for a fraction of the cost, and the reducer reads
a Struct as it reads orjson's dict, which is only right where the two decoders agree. So
`decode_all` leaves a payload to the general way (orjson, then the strict decoder) wherever they
might not:
- a field the Structs do not name: msgspec would skip it without the checks orjson makes (a
  number that overflows a double), so they forbid unknown fields, and name every field OpenAI
  and Azure send, each decoded (and checked) whole;
- a value of another type than a Struct holds: a payload that is not an object, `choices` that
  is not a list of objects;
- a payload long enough to nest `orjson`'s 1024 levels: msgspec's limit is the interpreter's
  recursion limit, which may be higher;
- anything msgspec rejects.
What msgspec accepts then, orjson reads alike: msgspec rejects invalid UTF-8 in any string or
key (which the general way reads with replacement characters), both keep the last of repeated
keys in the first one's place, and both read numbers to the same values, except integers outside
[-2**63, 2**64 - 1], which orjson turns into floats. `faithful` tells whether a chunk's read
values hold none of those.
"""

from __future__ import annotations

from typing import Any

import msgspec

_SHALLOW = 2 * 1024
"""Payloads shorter than this cannot nest 1024 levels (each level takes two bytes)."""
REJECTED = (ValueError, RecursionError)
"""What msgspec raises on a payload it does not take: its own errors, and before 0.23 a
UnicodeDecodeError for invalid UTF-8 (both ValueErrors); RecursionError past its nesting limit."""
_DIGITS = bytes(b"0"[0] if b"0"[0] <= byte <= b"9"[0] else b"."[0] for byte in range(256))
"""Every digit made `0`, every other byte `.`: 19 digits in a row are then one bytes search."""
_LONG_DIGITS = b"0" * 19
"""Where an integer orjson makes a float could be: 2**63 has 19 digits."""
_LOWEST = -(2**63)
_HIGHEST = 2**64 - 1
"""The integers orjson keeps as integers."""


class Choice(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One entry of `choices`. Structs of JSON values are never part of a cycle, hence no GC."""

    index: Any = None
    delta: Any = None
    finish_reason: Any = None
    logprobs: Any = None
    content_filter_results: Any = None


class Chunk(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A `chat.completion.chunk` (an error payload too: every field is optional)."""

    id: Any = None
    object: Any = None
    created: Any = None
    model: Any = None
    system_fingerprint: Any = None
    service_tier: Any = None
    obfuscation: Any = None
    prompt_filter_results: Any = None
    choices: list[Choice] | None = None
    usage: Any = None
    error: Any = None


decode = msgspec.json.Decoder(Chunk).decode


def decode_chunk(payload: bytes) -> Chunk | None:
    """The payload as a Chunk; None for a payload long enough to nest too deep (orjson reads
    it). Raises one of `REJECTED` for a payload msgspec does not take: the reducer then leaves
    it and every one after it in its window to orjson, so that a stream whose chunks all carry
    a field the Structs do not name costs one rejection, not one per chunk."""
    return decode(payload) if len(payload) < _SHALLOW else None


def faithful(chunk: Chunk, payload: bytes) -> bool:
    """True when the values the reducer reads are those orjson gives: no integer among them is
    one orjson makes a float. Such an integer has at least 19 digits, so a payload without 19
    digits in a row needs no look at its values."""
    if _LONG_DIGITS not in payload.translate(_DIGITS):
        return True
    values = [chunk.error, chunk.usage]
    for entry in chunk.choices or ():
        values += (entry.index, entry.delta, entry.finish_reason)
    while values:
        value = values.pop()
        kind = value.__class__
        if kind is int:
            if not _LOWEST <= value <= _HIGHEST:
                return False
        elif kind is dict:
            values += value.values()
        elif kind is list:
            values += value
    return True


Fragment = tuple[int, int, str | None, str]
"""An argument fragment's choice index, call index, call id (or None) and arguments."""


def argument_fragment(chunk: Chunk) -> Fragment | None:
    """The chunk's one tool-call fragment, when it is all the chunk carries and it carries only
    arguments (with the call's index, and perhaps its `type` and its id or a null one): the
    fragment that streams a call's arguments after its first."""
    choices = chunk.choices
    if choices is None or len(choices) != 1 or chunk.error or chunk.usage:
        return None
    entry = choices[0]
    delta = entry.delta
    if (entry.finish_reason is not None or entry.index.__class__ is not int
            or delta.__class__ is not dict or len(delta) != 1):
        return None
    fragments = delta.get("tool_calls")
    if fragments.__class__ is not list or len(fragments) != 1:
        return None
    [fragment] = fragments
    if fragment.__class__ is not dict or not fragment.keys() <= _FRAGMENT_KEYS:
        return None
    index, call_id, function = fragment.get("index"), fragment.get("id"), fragment.get("function")
    if (index.__class__ is not int or not (call_id is None or call_id.__class__ is str)
            or function.__class__ is not dict or len(function) != 1
            or fragment.get("type", "").__class__ is not str):
        return None
    arguments = function.get("arguments")
    if arguments.__class__ is not str:
        return None
    return entry.index, index, call_id, arguments


_FRAGMENT_KEYS = {"index", "id", "type", "function"}
