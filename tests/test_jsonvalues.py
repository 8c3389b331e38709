"""Argument equality by decoded JSON value, with what a JavaScript client cannot read flagged."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.jsonvalues import (
    MAX_SAFE_INTEGER,
    Decoded,
    JsonInvalid,
    JsonIssue,
    canonical_key,
    decode_strict,
    load_envelope,
)


def same(a: str, b: str) -> bool:
    return decode_strict(a).key == decode_strict(b).key


def issues(text: str) -> tuple[JsonIssue, ...]:
    return decode_strict(text).issues


# What does not matter


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ('{"a": 1, "b": [true, null]}', '{"b":[true,null],"a":1}'),
        ('{"a": {"x": 1, "y": 2}}', '{"a":{"y":2,"x":1}}'),
        ('"caf\\u00e9"', '"café"'),
        ('{"\\u0061": "\\n"}', '{"a": "\\u000a"}'),
        ("[1,2]", " [ 1 ,\n\t2 ] \r\n"),
        ("1", "1.0"),
        ("100", "1e2"),
        ("100", "1E+2"),
        ("0.5", "5e-1"),
        ("0", "-0"),
        ("0", "-0.0"),
        ("1", "1.0000000000000001"),
        ("[]", "[ ]"),
    ],
)
def test_rule_equal_values_have_equal_keys(a: str, b: str) -> None:
    assert same(a, b)


# What does


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("true", "1"),
        ("false", "0"),
        ("1", '"1"'),
        ("true", '"true"'),
        ("null", "false"),
        ("null", '"null"'),
        ("null", "0"),
        ("[]", "{}"),
        ("[1]", "1"),
        ('{"a": true}', '{"a": 1}'),
        ("[1, 2]", "[2, 1]"),
        ('{"a": 1}', '{"a": 1, "b": 1}'),
        ('{"a": 1}', '{"A": 1}'),
        ("[[1]]", "[1]"),
        ('""', "null"),
        ("1", "1.5"),
        ('"a"', '"a "'),
    ],
)
def test_rule_different_values_have_different_keys(a: str, b: str) -> None:
    assert not same(a, b)


def test_rule_valid_safe_values_raise_no_issue() -> None:
    assert issues('{"a": [1, -2.5e10, true, null, "x", 9007199254740991, -9007199254740991]}') == ()


# Unsafe integers


@pytest.mark.parametrize("text", ["9007199254740992", "-9007199254740992", "18446744073709551616"])
def test_rule_integer_beyond_safe_range_is_flagged(text: str) -> None:
    assert issues(text) == (JsonIssue(Code.UNSAFE_INTEGER, ""),)


def test_rule_unsafe_integer_is_flagged_even_when_both_texts_are_identical() -> None:
    text = '{"id": 12345678901234567890}'
    a, b = decode_strict(text), decode_strict(text)
    assert a.key == b.key
    assert a.issues == b.issues == (JsonIssue(Code.UNSAFE_INTEGER, "/id"),)


def test_rule_unsafe_integer_keeps_its_exact_value_and_compares_as_a_double() -> None:
    decoded = decode_strict("9007199254740993")
    assert decoded.value == 9007199254740993
    assert decoded.key == decode_strict("9007199254740992").key


def test_rule_decimal_notation_is_not_an_integer_literal() -> None:
    assert issues("1e16") == ()


@pytest.mark.parametrize("digits", [400, 5000])
def test_rule_integer_too_large_for_a_double_is_also_non_finite(digits: int) -> None:
    text = '{"n": [-1' + "0" * digits + "]}"
    assert issues(text) == (
        JsonIssue(Code.UNSAFE_INTEGER, "/n/0"),
        JsonIssue(Code.NON_FINITE_NUMBER, "/n/0"),
    )
    assert same(text, '{"n": [-Infinity]}')


# Duplicate keys


def test_rule_duplicate_key_keeps_the_last_value_and_is_flagged() -> None:
    decoded = decode_strict('{"a": 1, "b": 2, "a": 3}')
    assert decoded.value == {"a": 3, "b": 2}
    assert decoded.issues == (JsonIssue(Code.DUPLICATE_KEY, "/a"),)
    assert decoded.key == decode_strict('{"a": 3, "b": 2}').key


def test_rule_a_key_repeated_three_times_is_one_issue() -> None:
    assert issues('{"a": 1, "a": 2, "a": 3}') == (JsonIssue(Code.DUPLICATE_KEY, "/a"),)


def test_rule_duplicate_key_path_is_a_json_pointer() -> None:
    assert issues('{"x": [0, {"k": 1, "k": 1}]}') == (JsonIssue(Code.DUPLICATE_KEY, "/x/1/k"),)
    assert issues('{"a/b": 1, "a/b": 2, "~": 1, "~": 2}') == (
        JsonIssue(Code.DUPLICATE_KEY, "/a~1b"),
        JsonIssue(Code.DUPLICATE_KEY, "/~0"),
    )


def test_rule_only_objects_with_repeated_keys_are_flagged() -> None:
    text = '{"a": {"b": 1, "b": 2}, "a": 1, ' + ", ".join(
        f'"c{i}": {{"d": {i}}}' for i in range(50)
    )
    assert issues(text + "}") == (JsonIssue(Code.DUPLICATE_KEY, "/a"),)


# Non-finite numbers


@pytest.mark.parametrize(
    ("text", "path"),
    [("NaN", ""), ("[Infinity]", "/0"), ('{"t": -Infinity}', "/t"), ("1e400", ""), ("-1e400", "")],
)
def test_rule_non_finite_numbers_are_flagged(text: str, path: str) -> None:
    assert issues(text) == (JsonIssue(Code.NON_FINITE_NUMBER, path),)


def test_rule_non_finite_keys_are_stable_and_distinct() -> None:
    assert same("NaN", "NaN")
    assert same("1e400", "Infinity")
    assert not same("NaN", "Infinity")
    assert not same("Infinity", "-Infinity")
    assert not same("Infinity", "1.7976931348623157e308")


def test_rule_underflow_is_zero_not_an_issue() -> None:
    decoded = decode_strict("1e-400")
    assert decoded.issues == ()
    assert decoded.key == decode_strict("0").key


# Not JSON at all


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1} x',
        "{'a': 1}",
        "[1, 2,]",
        '{"a": 1,}',
        '{"a":',
        '"abc',
        "",
        "   ",
        '"a\nb"',
        "\ufeff{}",
        "01",
        "+1",
        ".5",
        "1.",
        "nan",
        "True",
        '{"a" 1}',
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_rule_anything_else_invalid_raises(text: str) -> None:
    with pytest.raises(JsonInvalid):
        decode_strict(text)


def test_deep_nesting_gets_a_key() -> None:
    depth = 300
    assert same("[" * depth + "]" * depth, "[ " * depth + "] " * depth)


def test_json_invalid_is_a_value_error() -> None:
    assert issubclass(JsonInvalid, ValueError)


# Envelopes


def test_the_key_of_a_value_decoded_elsewhere_is_the_key_of_its_text() -> None:
    """Used where arguments arrive already decoded (the probe's judge): no issue is reported
    there, and an unsafe integer still keys as its double."""
    text = '{"n": [1, true, null, "1"], "big": 1152921504606846977, "x": 1e400}'
    assert canonical_key(json.loads(text)) == decode_strict(text).key
    assert canonical_key({"n": 1}) != canonical_key({"n": "1"})


def test_envelope_fast_path_has_no_issues() -> None:
    assert load_envelope('{"id": "c1", "choices": [], "usage": null}') == (
        {"id": "c1", "choices": [], "usage": None},
        (),
    )


def test_envelope_that_orjson_rejects_is_classified_by_the_strict_decoder() -> None:
    value, found = load_envelope('{"choices": [{"logprob": NaN}]}')
    assert math.isnan(value["choices"][0]["logprob"])
    assert found == (JsonIssue(Code.NON_FINITE_NUMBER, "/choices/0/logprob"),)


def test_envelope_with_a_lone_surrogate_is_read_without_issues() -> None:
    assert load_envelope('{"text": "\\ud800"}') == ({"text": "\ud800"}, ())


def test_envelope_that_is_not_json_raises() -> None:
    with pytest.raises(JsonInvalid):
        load_envelope("[DONE]")
    with pytest.raises(JsonInvalid):
        load_envelope('{"a": 1')


# Laws


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)
serializations = st.fixed_dictionaries(
    {
        "ensure_ascii": st.booleans(),
        "indent": st.sampled_from([None, 0, 2, "\t"]),
        "separators": st.sampled_from([None, (",", ":"), (" , ", " : ")]),
    }
)


def reorder_and_widen(value: Any, rng: Any) -> Any:
    """The same JSON value with shuffled object members and every integer written as a double."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {name: reorder_and_widen(item, rng) for name, item in items}
    if isinstance(value, list):
        return [reorder_and_widen(item, rng) for item in value]
    if type(value) is int:
        return float(value)
    return value


def leaf_paths(value: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(value, dict) and value:
        return [p for name, item in value.items() for p in leaf_paths(item, (*path, name))]
    if isinstance(value, list) and value:
        return [p for i, item in enumerate(value) for p in leaf_paths(item, (*path, i))]
    return [path]


def replace_at(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: replace_at(value[head], tuple(rest), new)}
    return [
        replace_at(item, tuple(rest), new) if i == head else item for i, item in enumerate(value)
    ]


def changed(leaf: Any, how: str) -> Any:
    """A different JSON value: the leaf in an array, as JSON text, or with bool and 0/1 swapped."""
    if how == "wrap":
        return [leaf]
    if how == "stringify":
        return json.dumps(leaf)
    if type(leaf) is bool:
        return int(leaf)
    if leaf in (0, 1) and type(leaf) in (int, float):
        return bool(leaf)
    return None if leaf is not None else False


@examples(150, deadline=None)
@given(value=json_values, first=serializations, second=serializations, rng=st.randoms())
def test_law_key_ignores_member_order_whitespace_escapes_and_number_spelling(
    value: Any, first: dict, second: dict, rng: Any
) -> None:
    a = decode_strict(json.dumps(value, **first))
    b = decode_strict(json.dumps(reorder_and_widen(value, rng), **second))
    assert a.key == b.key
    assert a.issues == b.issues == ()
    assert hash(a.key) == hash(b.key)


@examples(150, deadline=None)
@given(
    value=json_values,
    data=st.data(),
    how=st.sampled_from(["wrap", "stringify", "swap"]),
)
def test_law_changing_one_leaf_changes_the_key(value: Any, data: st.DataObject, how: str) -> None:
    path = data.draw(st.sampled_from(leaf_paths(value)))
    leaf = value
    for step in path:
        leaf = leaf[step]
    other = replace_at(value, path, changed(leaf, how))
    assert decode_strict(json.dumps(value)).key != decode_strict(json.dumps(other)).key


@examples(100, deadline=None)
@given(value=json_values)
def test_law_decoded_value_round_trips(value: Any) -> None:
    decoded = decode_strict(json.dumps(value))
    assert isinstance(decoded, Decoded)
    assert json.dumps(decoded.value) == json.dumps(value)
