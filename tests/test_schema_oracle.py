"""`schemas.normalize` against an oracle: jsonschema's own validator, on arguments that
hypothesis-jsonschema generates from the schemas.

Pairs of tool parameter schemas are generated: a schema, and either a mutation of it that changes
which arguments it accepts (a property removed, an enum value removed, an `anyOf` branch removed,
a type changed, a required entry removed, a const changed, a `$ref` pointed at another
definition), or rewrites of it that do not (`$ref`s inlined, `const` as a one-value `enum`, keys
and `anyOf` branches in another order, a `type` string as a list and back, annotations dropped).
The laws:

- keys equal, acceptance equal: when `schema_key(normalize(a)) == schema_key(normalize(b))`,
  every argument generated from `a` is accepted by `b` under jsonschema, and the other way round;
- a mutation that changes acceptance changes the key (TOOL_SCHEMA_CHANGED is found);
- a rewrite that keeps the meaning keeps the key (no TOOL_SCHEMA_CHANGED for it).
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import jsonschema
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.internal.conjecture import utils as conjecture_utils
from hypothesis_jsonschema import _from_schema, from_schema
from tests.support.properties import examples

from calltap.schemas import normalize, schema_key


class _OneMore:
    """hypothesis-jsonschema 0.23.1 (the latest release) draws an object's members with
    hypothesis's private `many(...).more()`, which hypothesis 6.170 replaced by a context manager
    that is iterated: this gives the new `many` its old face back."""

    def __init__(self, data: Any, **sizes: Any) -> None:
        self.many = conjecture_utils.many(data, **sizes)
        self.many.__enter__()
        self.elements = iter(self.many)

    def more(self) -> bool:
        if next(self.elements, StopIteration) is StopIteration:
            self.many.__exit__(None, None, None)
            return False
        return True

    def reject(self, why: str | None = None) -> None:
        self.many.reject(why)


if not hasattr(conjecture_utils.many, "more"):
    class _Utils:
        many = _OneMore

    _from_schema.cu = _Utils  # type: ignore[attr-defined]

ANNOTATIONS = ("title", "description", "examples", "default", "$comment")
DEFINITIONS = {"word": {"type": "string", "maxLength": 3}, "count": {"type": "integer"},
               "flag": {"type": "boolean"}}
TYPES = ("string", "integer", "boolean", "array", "null")
VALUES = ("a", "b", 0, 2, True, None)

leaves = st.one_of(
    st.sampled_from(["string", "integer", "boolean", "number"]).map(lambda kind: {"type": kind}),
    st.just({"type": "string", "maxLength": 3}),
    st.just({"type": "integer", "minimum": 0, "maximum": 5}),
    st.lists(st.sampled_from(VALUES), min_size=2, max_size=4, unique=True)
    .map(lambda values: {"enum": values}),
    st.sampled_from(VALUES).map(lambda value: {"const": value}),
    st.sampled_from(VALUES).map(lambda value: {"const": value, "enum": [value, "other"]}),
    st.just({"type": "array", "items": {"type": "integer"}, "maxItems": 2}),
    st.sampled_from(sorted(DEFINITIONS)).map(lambda name: {"$ref": f"#/$defs/{name}"}),
    st.just({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
             "additionalProperties": False}),
    st.just({"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer"},
                       {"type": "object", "properties": {"y": {"const": 1}}, "required": ["y"]}]}),
)


@st.composite
def annotated(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(schema)
    for name in draw(st.lists(st.sampled_from(ANNOTATIONS), max_size=2, unique=True)):
        schema[name] = "an annotation" if name != "examples" else ["an example"]
    return schema


@st.composite
def tool_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["p", "q", "r", "s"]), min_size=1, max_size=4,
                          unique=True))
    properties = {name: draw(leaves.flatmap(annotated)) for name in names}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(st.lists(st.sampled_from(names), unique=True))
    if required:
        schema["required"] = required
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    if "$ref" in json.dumps(schema):
        schema["$defs"] = copy.deepcopy(DEFINITIONS)
    return draw(annotated(schema))


# --- mutations that change acceptance -----------------------------------------------------------


def mutations(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every mutation of `schema` that changes the arguments it accepts, named."""
    found = []
    properties = schema["properties"]
    for name, prop in properties.items():
        removed = copy.deepcopy(schema)
        del removed["properties"][name]
        if name in removed.get("required", []):
            removed["required"].remove(name)
        found.append((f"property {name} removed", removed))
        if len(prop.get("enum", [])) >= 2 and "const" not in prop:
            fewer = copy.deepcopy(schema)
            fewer["properties"][name]["enum"] = prop["enum"][1:]
            found.append((f"enum value of {name} removed", fewer))
        if len(prop.get("anyOf", [])) >= 2:
            narrower = copy.deepcopy(schema)
            del narrower["properties"][name]["anyOf"][0]
            found.append((f"a branch of {name} removed", narrower))
        if isinstance(prop.get("type"), str):
            other = next(kind for kind in TYPES if kind != prop["type"])
            retyped = copy.deepcopy(schema)
            retyped["properties"][name]["type"] = other
            found.append((f"type of {name} changed", retyped))
        if "const" in prop:
            changed = copy.deepcopy(schema)
            changed["properties"][name]["const"] = "other" if prop["const"] != "other" else "a"
            found.append((f"const of {name} changed", changed))
        if "$ref" in prop:
            target = next(other for other in sorted(DEFINITIONS)
                          if f"#/$defs/{other}" != prop["$ref"])
            pointed = copy.deepcopy(schema)
            pointed["properties"][name]["$ref"] = f"#/$defs/{target}"
            found.append((f"$ref of {name} pointed elsewhere", pointed))
    for name in schema.get("required", []):
        optional = copy.deepcopy(schema)
        optional["required"].remove(name)
        if not optional["required"]:
            del optional["required"]
        found.append((f"{name} no longer required", optional))
    return found


# --- rewrites that keep the meaning -------------------------------------------------------------


def inline_refs(schema: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        if set(schema) - set(ANNOTATIONS) == {"$ref"}:
            return inline_refs(definitions[schema["$ref"].rpartition("/")[2]], definitions)
        return {key: inline_refs(value, definitions) for key, value in schema.items()
                if key != "$defs"}
    if isinstance(schema, list):
        return [inline_refs(item, definitions) for item in schema]
    return schema


def rewritten(schema: Any, rng: random.Random) -> Any:
    """Keys shuffled, annotations dropped, `const` as a one-value `enum` (where no `enum` is
    beside it), a `type` string as a one-item list or a one-item list as a string."""
    if isinstance(schema, list):
        return [rewritten(item, rng) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {}
    items = list(schema.items())
    rng.shuffle(items)
    for key, value in items:
        if key in ANNOTATIONS and rng.random() < 0.7:
            continue
        if key == "const" and "enum" not in schema and rng.random() < 0.7:
            result["enum"] = [value]
        elif key == "type" and isinstance(value, str) and rng.random() < 0.5:
            result["type"] = [value]
        elif key in ("properties", "$defs"):
            result[key] = {name: rewritten(item, rng)
                           for name, item in sorted(value.items(), key=lambda _: rng.random())}
        elif key in ("items", "additionalProperties"):
            result[key] = rewritten(value, rng)
        elif key == "anyOf":
            result[key] = [rewritten(item, rng) for item in rng.sample(value, len(value))]
        else:
            result[key] = value
    return result


def rewrite(schema: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    if "$defs" in schema and rng.random() < 0.5:
        schema = inline_refs(schema, schema["$defs"])
    return rewritten(schema, rng)


# --- the oracle ---------------------------------------------------------------------------------

_strategies: dict[str, st.SearchStrategy[Any]] = {}


def arguments(schema: dict[str, Any]) -> st.SearchStrategy[list[Any]]:
    """Up to three arguments hypothesis-jsonschema generates from `schema` (none when it
    accepts none)."""
    text = json.dumps(schema, sort_keys=True)
    if text not in _strategies:
        _strategies[text] = st.lists(from_schema(schema), max_size=3)
    return _strategies[text]


def key(schema: dict[str, Any]) -> Any:
    return schema_key(normalize(schema))


def assert_same_acceptance(a: dict[str, Any], b: dict[str, Any], data: st.DataObject) -> None:
    for source, judge in ((a, b), (b, a)):
        validator = jsonschema.Draft202012Validator(judge)
        for argument in data.draw(arguments(source)):
            assert validator.is_valid(argument), (argument, source, judge)


@examples(30)
@given(tool_schemas(), st.randoms(use_true_random=False), st.data())
def test_a_mutation_that_changes_acceptance_changes_the_key(
        schema: dict[str, Any], rng: random.Random, data: st.DataObject) -> None:
    what, mutated = data.draw(st.sampled_from(mutations(schema)))
    assert key(schema) != key(mutated), what
    assert key(rewrite(schema, rng)) != key(mutated), what


@examples(30)
@given(tool_schemas(), st.randoms(use_true_random=False), st.data())
def test_a_rewrite_that_keeps_the_meaning_keeps_the_key(
        schema: dict[str, Any], rng: random.Random, data: st.DataObject) -> None:
    other = rewrite(schema, rng)
    assert key(schema) == key(other), (schema, other)
    assert_same_acceptance(schema, other, data)


@examples(40)
@given(tool_schemas(), st.randoms(use_true_random=False), st.data())
def test_schemas_of_one_key_accept_the_same_arguments(
        schema: dict[str, Any], rng: random.Random, data: st.DataObject) -> None:
    """Whatever the pair (a mutation, a rewrite, a rewrite of a mutation), equal keys mean
    equal acceptance of the arguments generated from either."""
    candidates = [mutated for _, mutated in mutations(schema)] + [rewrite(schema, rng)]
    other = data.draw(st.sampled_from(candidates))
    if data.draw(st.booleans()):
        other = rewrite(other, rng)
    if key(schema) == key(other):
        assert_same_acceptance(schema, other, data)


def test_a_const_beside_an_enum_allows_the_one_value_both_allow() -> None:
    """The const decides, whatever the enum beside it allows besides."""
    def beside(const: Any, enum: list[Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {"p": {"const": const, "enum": enum}}}
    assert key(beside("a", ["a", "b"])) == key({"type": "object", "properties": {
        "p": {"enum": ["a"]}}})
    assert key(beside("a", ["a", "b"])) != key(beside("b", ["a", "b"]))
    assert key(beside("c", ["a", "b"])) == key(beside("d", ["a", "b"]))
    for const in ("a", "b", "c"):
        validator = jsonschema.Draft202012Validator(beside(const, ["a", "b"]))
        assert [validator.is_valid({"p": value}) for value in ("a", "b", "c")] == [
            value == const and const != "c" for value in ("a", "b", "c")]


def test_the_oracle_tells_a_narrowed_schema_apart() -> None:
    """The oracle itself: an argument the schema accepts and its mutation refuses."""
    schema = {"type": "object", "properties": {"p": {"enum": ["a", "b"]}}}
    narrowed = {"type": "object", "properties": {"p": {"enum": ["b"]}}}
    assert jsonschema.Draft202012Validator(schema).is_valid({"p": "a"})
    assert not jsonschema.Draft202012Validator(narrowed).is_valid({"p": "a"})
    assert key(schema) != key(narrowed)
