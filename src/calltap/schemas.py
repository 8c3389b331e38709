"""A JSON Schema reduced to what it accepts, so that two schemas compare by meaning, not shape.

A gateway translating a tool rewrites its parameter schema: it inlines `$ref`s and drops `$defs`,
turns `const` into a one-value `enum`, writes Gemini's upper-case types, drops an empty
`properties`, strips annotations. None of that changes which arguments the schema accepts. What
`normalize` keeps is the schema's meaning as one plain JSON value:

- `$ref` resolved (by `referencing`, the jsonschema project's resolver) against the root's
  `$defs` / `definitions`, and inlined; a reference back into itself (a recursive type) becomes
  `{"$recursive": <the reference>}`; one that cannot be resolved, or met once MAX_INLINED
  subschemas have been inlined, stays `{"$ref": …}`;
- annotations dropped (`title`, `description`, `examples`, `default`, `$comment`, `$schema`,
  `$id`, `deprecated`, `readOnly`, `writeOnly`, Gemini's `propertyOrdering`): they change no
  argument's acceptance;
- `const: v` as `enum: [v]` (beside an `enum`, the values both allow: `[v]` or none); `enum`,
  `required` and `type` as sets (sorted lists); `type` lower-cased, `nullable: true` (OpenAPI's,
  Gemini's) as a `null` type; `anyOf` and `oneOf` branches as sets; an empty `properties` or
  `required`, and `additionalProperties: true`, dropped (they are the defaults).

Values inside `enum` compare by the argument equality rules (`jsonvalues.canonical_key`): `1` and
`1.0` are one value, `true` and `1` are two. `normalize` takes `without`: keywords to drop
everywhere, for comparing with a dialect whose schema subset cannot say them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from typing import Any

import orjson
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from calltap.jsonvalues import canonical_key

ANNOTATIONS = frozenset({
    "title", "description", "examples", "default", "$comment", "$schema", "$id", "$anchor",
    "deprecated", "readOnly", "writeOnly", "propertyOrdering", "$defs", "definitions",
})
SET_KEYWORDS = frozenset({"enum", "required", "type"})
BRANCH_SETS = frozenset({"anyOf", "oneOf"})
SUBSCHEMA_LISTS = frozenset({"allOf", "prefixItems"})
SUBSCHEMAS = frozenset({"items", "additionalProperties", "not", "contains", "propertyNames",
                        "if", "then", "else", "additionalItems", "unevaluatedProperties"})
SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
MAX_DEPTH = 64
"""Nesting past this is not followed (a hostile or runaway schema): it reads `{"$deep": true}`."""
MAX_INLINED = 10_000
"""Subschemas walked inside inlined references, past which a reference is no longer inlined (it
reads `{"$ref": …}`): definitions that each use the next twice would inline exponentially many."""
ROOT = "urn:calltap:schema"


def normalize(schema: Any, *, without: frozenset[str] = frozenset()) -> Any:
    """The schema's meaning as one plain JSON value (see the module docstring)."""
    if not isinstance(schema, dict):
        return schema
    try:
        resolver = Registry().with_resource(ROOT, DRAFT202012.create_resource(schema)).resolver(
            base_uri=ROOT)
    except Exception:  # a root the resolver refuses: references stay unresolved
        resolver = None
    return _Normalizer(resolver, without).walk(schema, (), 0)


def schema_key(normalized: Any) -> Hashable:
    """The canonical key of a normalized schema: equal keys iff the same meaning."""
    return canonical_key(normalized)


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two normalized schemas first differ, as a JSON pointer into them (`/properties/x`)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for name in sorted(a.keys() | b.keys()):
            if name not in a or name not in b:
                return f"{path}/{name}"
            if canonical_key(a[name]) != canonical_key(b[name]):
                return first_difference(a[name], b[name], f"{path}/{name}")
    return path or "/"


class _Normalizer:
    def __init__(self, resolver: Any, without: frozenset[str]) -> None:
        self.resolver = resolver
        self.drop = ANNOTATIONS | without
        self.inlined = 0
        self.texts: dict[int, tuple[Any, str]] = {}

    def walk(self, schema: Any, refs: tuple[str, ...], depth: int) -> Any:
        if not isinstance(schema, dict):
            return schema
        if depth > MAX_DEPTH:
            return {"$deep": True}
        self.inlined += bool(refs)
        reference = schema.get("$ref")
        if isinstance(reference, str):
            target = self._resolve(reference, refs)
            if target is not None:
                merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
                return self.walk(merged, (*refs, reference), depth + 1)
            return {"$recursive" if reference in refs else "$ref": reference}
        return self._keywords(schema, refs, depth)

    def _resolve(self, reference: str, refs: tuple[str, ...]) -> dict[str, Any] | None:
        if reference in refs or self.resolver is None or self.inlined > MAX_INLINED:
            return None
        try:
            contents = self.resolver.lookup(reference).contents
        except (Unresolvable, Exception):
            return None
        return contents if isinstance(contents, dict) else None

    def _keywords(self, schema: dict[str, Any], refs: tuple[str, ...], depth: int) -> Any:
        result: dict[str, Any] = {}
        for name, value in schema.items():
            if name in self.drop:
                continue
            if name in SUBSCHEMAS:
                result[name] = self.walk(value, refs, depth + 1)
            elif name in SUBSCHEMA_MAPS and isinstance(value, dict):
                result[name] = {key: self.walk(item, refs, depth + 1)
                                for key, item in value.items()}
            elif name in SUBSCHEMA_LISTS | BRANCH_SETS and isinstance(value, list):
                items = [self.walk(item, refs, depth + 1) for item in value]
                result[name] = _as_set(items, self.text) if name in BRANCH_SETS else items
            else:
                result[name] = value
        return _canonical_keywords(result, self.text)

    def text(self, value: Any) -> str:
        """What a set is ordered and deduplicated by: a scalar's `stable_text`, an object's or an
        array's digest of its members' texts, each computed once (a set nested in sets is not
        read again at every level of them)."""
        kind = type(value)
        if kind is not dict and kind is not list:
            return stable_text(canonical_key(value))
        known = self.texts.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        if kind is dict:
            inner = "{" + ",".join(sorted(f"{orjson.dumps(name).decode()}:{self.text(item)}"
                                          for name, item in value.items())) + "}"
        else:
            inner = "[" + ",".join(self.text(item) for item in value) + "]"
        text = "#" + hashlib.blake2b(inner.encode(), digest_size=16).hexdigest()
        self.texts[id(value)] = (value, text)
        return text


def _canonical_keywords(result: dict[str, Any], text: Callable[[Any], str]) -> dict[str, Any]:
    """`const` as `enum`, `nullable` as a type, sets as sorted lists, defaults dropped."""
    if "const" in result:
        const = result.pop("const")
        enum = result.get("enum")
        allowed = not isinstance(enum, list) or canonical_key(const) in map(canonical_key, enum)
        result["enum"] = [const] if allowed else []
    if isinstance(result.get("type"), str):
        result["type"] = [result["type"]]
    if isinstance(result.get("type"), list):
        result["type"] = [kind.lower() if isinstance(kind, str) else kind
                          for kind in result["type"]]
    nullable = result.pop("nullable", None)
    if nullable is True and isinstance(result.get("type"), list):
        result["type"] = [*result["type"], "null"]
    for name in SET_KEYWORDS:
        if isinstance(result.get(name), list):
            result[name] = _as_set(result[name], text)
    for name in ("properties", "required", "patternProperties"):
        if result.get(name) in ({}, []):
            del result[name]
    if result.get("additionalProperties") is True:
        del result["additionalProperties"]
    return result


def _as_set(items: list[Any], text: Callable[[Any], str]) -> list[Any]:
    """A list whose order does not matter, deduplicated by meaning (`text`) and in one order."""
    unique = {text(item): item for item in items}
    return [unique[key] for key in sorted(unique)]


def stable_text(key: Hashable) -> str:
    """A canonical key as text that is the same in every process and for every order of an
    object's members (a frozenset's own order follows string hashes, which vary)."""
    if isinstance(key, tuple) and key and key[0] is dict:
        members = sorted(f"{orjson.dumps(name).decode()}:{stable_text(value)}"
                         for name, value in key[1])
        return "{" + ",".join(members) + "}"
    if isinstance(key, tuple) and key and key[0] is list:
        return "[" + ",".join(stable_text(item) for item in key[1]) + "]"
    if isinstance(key, tuple) and key and key[0] is bool:
        return "true" if key[1] else "false"
    if key is None:
        return "null"
    if isinstance(key, str):
        return orjson.dumps(key).decode()
    return repr(key)
