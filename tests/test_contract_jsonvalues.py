"""What strict decoding promises at its edges: integers past a double and past Python's digit limit,
the envelope's two paths, and the messages a JSON_INVALID finding carries."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.jsonvalues import (
    MAX_SAFE_INTEGER,
    JsonInvalid,
    JsonIssue,
    decode_strict,
    load_envelope,
)

OVER_DIGIT_LIMIT = 5000
"""More digits than `int()` converts from text by default (4300): the Decimal fallback reads it."""


@pytest.mark.parametrize("digits", [400, OVER_DIGIT_LIMIT])
@pytest.mark.parametrize(("sign", "overflow"), [("", "1e400"), ("-", "-1e400")])
def test_an_integer_too_large_for_a_double_keys_as_the_infinity_of_its_sign(
    digits: int, sign: str, overflow: str
) -> None:
    """JavaScript reads such a literal as ±Infinity, so it equals an overflowing double of the same
    sign and differs from the other sign."""
    text = sign + "1" + "0" * digits
    decoded = decode_strict(text)
    assert decoded.issues == (
        JsonIssue(Code.UNSAFE_INTEGER, ""),
        JsonIssue(Code.NON_FINITE_NUMBER, ""),
    )
    assert decoded.key == decode_strict(overflow).key
    opposite = overflow[1:] if sign else "-" + overflow
    assert decoded.key != decode_strict(opposite).key


def test_an_integer_over_the_digit_limit_keeps_the_duplicate_keys_of_the_same_text() -> None:
    """The text is read a second time with Decimal integers; the repeated keys found on the way
    are those of the second reading, none lost and none counted twice."""
    text = '{"x": {"a": 1, "a": 2}, "n": [1' + "0" * OVER_DIGIT_LIMIT + '], "b": 3, "b": 4}'
    decoded = decode_strict(text)
    assert decoded.issues == (
        JsonIssue(Code.DUPLICATE_KEY, "/b"),
        JsonIssue(Code.DUPLICATE_KEY, "/x/a"),
        JsonIssue(Code.UNSAFE_INTEGER, "/n/0"),
        JsonIssue(Code.NON_FINITE_NUMBER, "/n/0"),
    )
    assert decoded.value["x"] == {"a": 2}
    assert decoded.value["b"] == 4


unsafe_integers = st.one_of(
    st.integers(MAX_SAFE_INTEGER + 1, 2**70), st.integers(-(2**70), -MAX_SAFE_INTEGER - 1)
)
numbers = st.one_of(st.integers(-(2**60), 2**60).map(str), unsafe_integers.map(str), st.just("NaN"))
names = st.sampled_from(["id", "n", "usage"])
members = st.lists(st.tuples(names, numbers), min_size=1, max_size=6)


@examples(100)
@given(members=members)
def test_law_both_envelope_paths_read_the_same_value(members: list[tuple[str, str]]) -> None:
    """An envelope orjson reads (unsafe integers and repeated keys included, the last key winning)
    has no issues: its own numbers are ids, timestamps and counts, not the answer. One orjson
    rejects (NaN here) is read by the strict decoder, with its issues. Either way the value is the
    one the strict decoder reads, up to the double a JavaScript client would see."""
    text = "{" + ", ".join(f'"{name}": {number}' for name, number in members) + "}"
    value, issues = load_envelope(text)
    strict = decode_strict(text)
    assert value.keys() == strict.value.keys() == {name for name, _ in members}
    assert decode_strict(json.dumps(value)).key == strict.key
    assert issues == (strict.issues if any(number == "NaN" for _, number in members) else ())


def test_an_envelope_only_the_strict_decoder_reads_reports_its_issues() -> None:
    """Past 64 bits orjson still reads a number, but NaN it rejects: then the envelope's unsafe
    integers and repeated keys are reported too, each at its path."""
    value, issues = load_envelope('{"id": 18446744073709551617, "n": 1, "n": 2, "x": NaN}')
    assert (value["id"], value["n"]) == (18446744073709551617, 2)
    assert issues == (
        JsonIssue(Code.DUPLICATE_KEY, "/n"),
        JsonIssue(Code.UNSAFE_INTEGER, "/id"),
        JsonIssue(Code.NON_FINITE_NUMBER, "/x"),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1} x', "Extra data: line 1 column 10 (char 9)"),
        ('{"a":', "Expecting value: line 1 column 6 (char 5)"),
        ("[1, 2,]", "Expecting value: line 1 column 7 (char 6)"),
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
    ],
)
def test_json_invalid_says_what_is_wrong_and_where(text: str, message: str) -> None:
    """The message becomes the detail of a JSON_INVALID or TOOL_ARGUMENTS_INVALID finding."""
    with pytest.raises(JsonInvalid) as raised:
        decode_strict(text)
    assert str(raised.value) == message
    with pytest.raises(JsonInvalid) as raised:
        load_envelope(text)
    assert str(raised.value) == message
