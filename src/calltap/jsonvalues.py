"""Strict JSON values: tool arguments compared by meaning, the way a JavaScript client reads them.

Two argument strings are equal when they decode to equal values: key order, whitespace and
`\\u` escapes do not matter, numbers compare by their IEEE-754 double value (`1.0` equals `1`),
and booleans, numbers, strings and null never equal each other (`true` is not `1`). What a client
cannot read faithfully is reported, never resolved silently: integers beyond ±(2^53−1), repeated
object keys (the last one wins, as in `JSON.parse`), and NaN, Infinity or numbers that overflow a
double. Anything that is not JSON at all raises `JsonInvalid`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from calltap.codes import Code

MAX_SAFE_INTEGER = 2**53 - 1

_Path = tuple["_Path", str | int] | None
"""A location as a linked list from the leaf up; spelled out as a JSON pointer only when needed."""


class JsonInvalid(ValueError):
    """The text is not JSON: trailing garbage, single quotes, a trailing comma, unterminated."""


@dataclass(frozen=True, slots=True)
class JsonIssue:
    """Something a JavaScript client would not read faithfully, and where (`/a/0`; root: ``)."""

    code: Code
    path: str


@dataclass(frozen=True, slots=True)
class Decoded:
    """A decoded value, its canonical `key` (equal keys iff equal values) and what was flagged."""

    value: Any
    key: Hashable
    issues: tuple[JsonIssue, ...]


def decode_strict(text: str) -> Decoded:
    """Decode `text` and flag unsafe integers, repeated keys and non-finite numbers by path."""
    try:
        value, repeated = _load(text)
        issues: list[JsonIssue] = []
        key = _Canonicalizer(repeated, issues).key(value, None)
    except json.JSONDecodeError as error:
        raise JsonInvalid(str(error)) from error
    except RecursionError as error:
        raise JsonInvalid("JSON nested too deeply") from error
    return Decoded(value, key, tuple(issues))


def canonical_key(value: Any) -> Hashable:
    """The canonical key of an already decoded value (as `decode_strict` gives its `key`): two
    values are equal by the argument equality rules iff their keys are."""
    return _Canonicalizer({}, []).key(value, None)


def load_envelope(data: str) -> tuple[Any, tuple[JsonIssue, ...]]:
    """Decode an SSE `data` payload: orjson when it accepts the text, the strict decoder to say why
    when it does not (NaN, huge numbers, lone surrogates), `JsonInvalid` when nothing can."""
    try:
        return orjson.loads(data), ()
    except orjson.JSONDecodeError:
        decoded = decode_strict(data)
    return decoded.value, decoded.issues


_Repeated = dict[int, tuple[dict[str, Any], list[str]]]
"""Objects with repeated keys, by id: the object (held so its id stays unique) and the names."""


def _load(text: str) -> tuple[Any, _Repeated]:
    """The stdlib decoder (its C scanner keeps this fast), noting objects with repeated keys."""
    repeated: _Repeated = {}

    def object_from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            counts = Counter(name for name, _ in pairs)
            repeated[id(obj)] = (obj, [name for name, count in counts.items() if count > 1])
        return obj

    try:
        value = json.loads(text, object_pairs_hook=object_from_pairs)
    except json.JSONDecodeError:
        raise
    except ValueError:
        # An integer literal longer than int() converts from text; Decimal takes any length.
        repeated.clear()
        value = json.loads(text, object_pairs_hook=object_from_pairs, parse_int=Decimal)
    return value, repeated


NAN_KEY: Hashable = object()
"""The key every NaN shares."""


@dataclass(slots=True)
class _Canonicalizer:
    """Builds the hashable key of a decoded value, collecting issues with their paths on the way.

    Keys: a string is itself; a number is the double JavaScript reads (`-0` becomes `0`, a
    literal past the largest double is an infinity); NaN, the one double unequal to itself, is
    `NAN_KEY`; null is None; an object, an array or a boolean is a tuple tagged with the type it
    decodes to, so `true`, `1`, `"1"` and `[1]` never collide. Plain loops, not comprehensions,
    keep to one frame per nesting level.
    """

    repeated: _Repeated
    issues: list[JsonIssue]

    def key(self, value: Any, path: _Path) -> Hashable:
        kind = type(value)
        if kind is str:
            return value
        if kind is dict:
            if self.repeated and id(value) in self.repeated:
                for name in self.repeated[id(value)][1]:
                    self._flag(Code.DUPLICATE_KEY, (path, name))
            members = []
            for name, item in value.items():
                members.append((name, self.key(item, (path, name))))
            return (dict, frozenset(members))
        if kind is list:
            items = []
            for i, item in enumerate(value):
                items.append(self.key(item, (path, i)))
            return (list, tuple(items))
        if kind is bool:
            return (bool, value)
        if value is None:
            return None
        if kind is int or kind is Decimal:
            if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                return float(value)
            self._flag(Code.UNSAFE_INTEGER, path)
            value = _to_double(value)
        if math.isfinite(value):
            return value + 0.0
        self._flag(Code.NON_FINITE_NUMBER, path)
        return NAN_KEY if math.isnan(value) else value

    def _flag(self, code: Code, path: _Path) -> None:
        self.issues.append(JsonIssue(code, _pointer(path)))


def _to_double(integer: int | Decimal) -> float:
    """The double JavaScript would read for an integer literal: infinite past the largest double."""
    try:
        return float(integer)
    except OverflowError:
        return math.inf if integer > 0 else -math.inf


def _pointer(path: _Path) -> str:
    """The JSON pointer (RFC 6901) of a linked path."""
    segments: list[str] = []
    while path is not None:
        path, segment = path
        segments.append(str(segment).replace("~", "~0").replace("/", "~1"))
    return "".join("/" + segment for segment in reversed(segments))
