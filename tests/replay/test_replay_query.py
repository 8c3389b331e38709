"""The query string a replay sends: the recorded one with each `--query` value set, every other
parameter as recorded; and the names whose values the recording redacted, which `--query` can
give back."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote_plus

from hypothesis import given
from hypothesis import strategies as st

from calltap.redact import redact_query, redacted_parameters
from calltap.replay.cassette import with_parameters

NAMES = st.sampled_from(["key", "Key", "k%65y", "api-version", "alt", "a+b", "token", "sig"])
RAW_VALUES = st.text(alphabet="ab1%+=[]-", max_size=6)
GIVEN_VALUES = st.text(max_size=8)


def query_of(pieces: list[tuple[str, str | None]]) -> str:
    return "&".join(name if value is None else f"{name}={value}" for name, value in pieces)


QUERIES = st.lists(st.tuples(NAMES, st.none() | RAW_VALUES), max_size=6).map(query_of)
GIVEN = st.dictionaries(st.sampled_from(["key", "Key", "alt", "new", "a b"]), GIVEN_VALUES,
                        max_size=3).map(lambda values: tuple(values.items()))


def pieces(query: str) -> list[str]:
    return query.split("&") if query else []


def test_a_redacted_key_is_given_back_in_place():
    query = "api-version=1&key=[redacted]&alt=sse"
    assert with_parameters(query, (("key", "AIza"),)) == "api-version=1&key=AIza&alt=sse"


def test_a_value_is_percent_encoded_and_a_missing_name_is_added_at_the_end():
    assert with_parameters("alt=sse", (("key", "a b&c=d+"),)) == "alt=sse&key=a%20b%26c%3Dd%2B"
    assert with_parameters("", (("key", "k"),)) == "key=k"


def test_a_name_is_matched_decoded_and_kept_as_recorded():
    assert with_parameters("k%65y=[redacted]&a+b=1", (("key", "v"), ("a b", "2"))) == (
        "k%65y=v&a+b=2")


def test_without_parameters_the_query_is_untouched():
    assert with_parameters("a=1&&b&c=%zz", ()) == "a=1&&b&c=%zz"


@given(QUERIES, GIVEN)
def test_the_given_parameters_are_set_and_the_others_keep_their_place(query, parameters):
    values = dict(parameters)
    recorded = parse_qsl(query, keep_blank_values=True)
    present = {name for name, _ in recorded}
    expected = [(name, values.get(name, value)) for name, value in recorded]
    expected += [(name, value) for name, value in parameters if name not in present]
    sent = with_parameters(query, parameters)
    assert parse_qsl(sent, keep_blank_values=True) == expected
    untouched = [piece for piece in pieces(query) if unquote_plus(piece.partition("=")[0])
                 not in values]
    assert [piece for piece in pieces(sent) if piece in untouched] == untouched


@given(st.dictionaries(NAMES, RAW_VALUES.filter(lambda value: value != "[redacted]"),
                       max_size=5)
       .filter(lambda recorded: len(set(map(unquote_plus, recorded))) == len(recorded)))
def test_giving_back_the_redacted_values_restores_the_query(recorded):
    query = query_of(list(recorded.items()))
    redacted = redact_query(query)
    names = redacted_parameters(redacted)
    original = dict(parse_qsl(query, keep_blank_values=True))
    restored = with_parameters(redacted, tuple((name, original[name]) for name in names))
    assert parse_qsl(restored, keep_blank_values=True) == parse_qsl(query,
                                                                    keep_blank_values=True)
    assert set(names) <= set(original)
