"""The progressive JSON array framing: one test per rule, Gemini's own layout, cuts, any split."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import orjson
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.jsonarray import JSONArrayDecoder, parse
from calltap.sse import Event, Incomplete

GEMINI = Path(__file__).parent / "fixtures" / "gemini"


def element(ordinal: int, offset: int, text: str) -> Event:
    return Event(ordinal, offset, "message", text, "")


def texts(body: bytes) -> list[str]:
    events, _ = parse(body)
    return [event.data for event in events]


def feed_pieces(pieces: list[bytes]) -> tuple[list[Event], Incomplete | None]:
    decoder = JSONArrayDecoder()
    events = [event for piece in pieces for event in decoder.feed(piece)]
    return events, decoder.close()


def test_rule_each_element_is_an_event_at_its_first_byte() -> None:
    assert parse(b'[{"a":1}\r\n,{"b":[2]}\r\n]') == (
        [element(0, 1, '{"a":1}'), element(1, 11, '{"b":[2]}')],
        None,
    )


def test_rule_brackets_quotes_and_escapes_inside_strings_do_not_end_an_element() -> None:
    inner = r'{"t":"]}\"{[\\","u":"\u005d"}'
    assert texts(f"[{inner},{{}}]".encode()) == [inner, "{}"]


def test_rule_an_element_that_is_not_json_is_still_framed_by_its_brackets() -> None:
    assert texts(b'[{"a": NaN, "b": "}\r\n,"}\r\n,{"c": [1,\r\n]}\r\n]') == [
        '{"a": NaN, "b": "}\r\n,"}',
        '{"c": [1,\r\n]}',
    ]


def test_rule_strings_and_scalars_are_elements_and_the_dialect_judges_them() -> None:
    assert texts(b'[ "a,]" , 12.5e3,true , null,oops ]') == [
        '"a,]"',
        "12.5e3",
        "true",
        "null",
        "oops",
    ]


def test_rule_missing_commas_and_empty_slots_are_read_leniently() -> None:
    assert texts(b'[,{"a":1} {"b":2},,[3],]') == ['{"a":1}', '{"b":2}', "[3]"]


def test_rule_a_bom_and_whitespace_may_precede_the_array_and_count_in_offsets() -> None:
    assert parse(b'\xef\xbb\xbf \r\n[ {"a":1}]\n') == ([element(0, 8, '{"a":1}')], None)


def test_rule_text_is_utf8_with_bad_bytes_replaced() -> None:
    assert texts('[{"a":"é\xff"}]'.encode("latin-1").replace(b"\xe9", "é".encode())) == [
        '{"a":"é\ufffd"}'
    ]


def test_an_array_never_closed_is_incomplete_from_the_end_of_its_last_element() -> None:
    assert parse(b'[{"a":1}\r\n,{"b":') == (
        [element(0, 1, '{"a":1}')],
        Incomplete(8, 8),
    )
    assert parse(b'[{"a":1}') == ([element(0, 1, '{"a":1}')], Incomplete(8, 0))
    assert parse(b"[ ") == ([], Incomplete(1, 1))


def test_bytes_after_the_closing_bracket_or_instead_of_the_array_are_reported() -> None:
    assert parse(b'[{"a":1}] \r\n') == ([element(0, 1, '{"a":1}')], None)
    assert parse(b'[{"a":1}] [{"b":2}]') == ([element(0, 1, '{"a":1}')], Incomplete(10, 9))
    assert parse(b"[{}}{}]") == ([element(0, 1, "{}")], Incomplete(3, 4))
    assert parse(b'{"a":1}') == ([], Incomplete(0, 7))


def test_nothing_at_all_is_nothing_to_report() -> None:
    assert parse(b"") == ([], None)
    assert parse(b" \r\n") == ([], None)
    assert parse(b"[]") == ([], None)
    assert parse(b"\xef\xbb\xbf") == ([], None)


def test_a_bom_cut_between_feeds_is_still_a_bom() -> None:
    assert feed_pieces([b"\xef", b"\xbb", b'\xbf[{"a":1}]']) == ([element(0, 4, '{"a":1}')], None)
    assert feed_pieces([b"\xef\xbb"]) == ([], Incomplete(0, 2))


def test_a_bom_anywhere_but_the_first_byte_is_bytes_of_its_own_in_any_split() -> None:
    assert feed_pieces([b" ", b"\xef\xbb\xbf[]"]) == parse(b" \xef\xbb\xbf[]") == (
        [],
        Incomplete(1, 5),
    )
    assert feed_pieces([b"[", b"\xef\xbb\xbf1]"]) == parse(b"[\xef\xbb\xbf1]") == (
        [element(0, 1, "\ufeff1")],
        None,
    )


def test_bytes_after_the_closing_bracket_are_reported_at_their_offset_in_any_split() -> None:
    assert parse(b"[]x") == ([], Incomplete(2, 1))
    assert feed_pieces([b"[", b"1]", b" x"]) == ([element(0, 1, "1")], Incomplete(4, 1))
    assert feed_pieces([b"[", b"1]", b"x"]) == ([element(0, 1, "1")], Incomplete(3, 1))


def test_the_bytes_of_elements_already_handed_out_are_let_go() -> None:
    decoder = JSONArrayDecoder()
    decoder.feed(b"[")
    element_bytes = b'{"s":"' + b"y" * 1000 + b'"},'
    tracemalloc.start()
    try:
        for _ in range(1000):
            assert len(decoder.feed(element_bytes)) == 1
        retained, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert retained < 64 * 1024


def test_gemini_array_stream_gives_each_response_with_its_offset() -> None:
    body = (GEMINI / "tools.array.json").read_bytes()
    events, incomplete = parse(body)
    assert incomplete is None
    assert [orjson.loads(event.data) for event in events] == json.loads(body)
    for event in events:
        assert body[event.offset : event.offset + len(event.data)].decode() == event.data


def test_an_element_of_64_mib_in_1_kib_pieces_is_read_in_linear_time() -> None:
    size = 64 * 1024 * 1024
    piece = b'x\\"' * 341
    decoder = JSONArrayDecoder()
    assert decoder.feed(b'[{"s":"') == []
    started = time.perf_counter()
    for _ in range(size // len(piece)):
        assert decoder.feed(piece) == []
    (big,) = decoder.feed(b'"}]')
    assert time.perf_counter() - started < 30
    assert len(big.data) == len('{"s":""}') + size // len(piece) * len(piece)
    assert decoder.close() is None


def test_many_elements_keep_memory_bounded() -> None:
    total = 400_000
    traced_tail = 40_000
    chunk = b'{"x":1}\r\n,' * 4000
    decoder = JSONArrayDecoder()
    count = len(decoder.feed(b"["))
    while count < total - traced_tail:
        count += len(decoder.feed(chunk))
    tracemalloc.start()
    try:
        while count < total:
            count += len(decoder.feed(chunk))
        retained, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == total
    assert retained < 256 * 1024


# Any array built from JSON values, any cut, any split

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
spaces = st.sampled_from(["", " ", "\r\n", "\n  ", "\t"])


def _known_whole(text: str, end: int, cut: int) -> bool:
    """Whether an element ending at `end` is known whole in the first `cut` bytes: a bare scalar
    (`null`, `12`) only once a byte after it arrived, since more of it could still come."""
    return end <= cut if text[0] in '{["' else end < cut


@st.composite
def arrays(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int, str]]]:
    """A progressively written array and each element's (offset, end, text)."""
    body = draw(st.sampled_from([b"", b"\xef\xbb\xbf", b" \n"])) + b"["
    elements: list[tuple[int, int, str]] = []
    for k, value in enumerate(draw(st.lists(values, max_size=6))):
        text = json.dumps(value, ensure_ascii=draw(st.booleans()))
        body += (("," if k else "") + draw(spaces)).encode()
        elements.append((len(body), len(body) + len(text.encode()), text))
        body += text.encode() + draw(spaces).encode()
    return body + b"]", elements


@examples(300, deadline=None)
@given(built=arrays(), data=st.data())
def test_any_cut_yields_the_elements_it_holds_and_any_split_reads_alike(
    built: tuple[bytes, list[tuple[int, int, str]]], data: st.DataObject
) -> None:
    body, elements = built
    cut = data.draw(st.integers(0, len(body)))
    held = [(offset, text) for offset, end, text in elements if _known_whole(text, end, cut)]
    events, incomplete = parse(body[:cut])
    assert [(event.offset, event.data) for event in events] == held
    assert [event.ordinal for event in events] == list(range(len(held)))
    if cut == len(body):
        assert incomplete is None
    elif body[:cut].strip(b"\xef\xbb\xbf \n"):
        ends = [end for _, end, text in elements if _known_whole(text, end, cut)]
        boundary = max(ends, default=body.index(b"[") + 1)
        assert incomplete == Incomplete(boundary, cut - boundary)
    splits = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=8)))
    pieces = [body[a:b] for a, b in zip([0, *splits], [*splits, len(body)], strict=True)]
    assert feed_pieces(pieces) == parse(body)
