"""The NDJSON framing rules, one test per rule, an Ollama stream, split-invariance and scale."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.ndjson import Line, NDJSONDecoder, parse
from calltap.sse import Incomplete

OLLAMA = Path(__file__).parent / "fixtures" / "ollama"


def texts(body: bytes) -> list[str]:
    lines, _ = parse(body)
    return [line.text for line in lines]


def feed_pieces(pieces: list[bytes]) -> tuple[list[Line], Incomplete | None]:
    decoder = NDJSONDecoder()
    lines = [line for piece in pieces for line in decoder.feed(piece)]
    return lines, decoder.close()


# Line ends


def test_rule_lf_and_crlf_end_a_line_and_are_not_part_of_it() -> None:
    assert parse(b'{"a":1}\n{"b":2}\r\n') == (
        [Line(0, 0, '{"a":1}', None), Line(1, 8, '{"b":2}', None)],
        None,
    )


def test_rule_a_lone_cr_does_not_end_a_line() -> None:
    assert texts(b'{"a":\r1}\n{"b":2}\r\r\n') == ['{"a":\r1}', '{"b":2}\r']


def test_rule_crlf_split_between_its_two_bytes() -> None:
    assert feed_pieces([b'{"a":1}\r', b'\n{"b":2}\r', b"\n"]) == (
        [Line(0, 0, '{"a":1}', None), Line(1, 9, '{"b":2}', None)],
        None,
    )


def test_rule_the_line_keeps_its_spaces_and_any_non_json_text() -> None:
    assert texts(b'  {"a": 1}  \nnot json\n\x0c\n') == ['  {"a": 1}  ', "not json", "\x0c"]


# Blank lines


def test_rule_blank_lines_make_no_frame_and_take_no_ordinal() -> None:
    body = b'\n{"a":1}\n \t \r\n\r\n\n{"b":2}\n'
    assert parse(body) == (
        [Line(0, 1, '{"a":1}', None), Line(1, body.index(b'{"b"'), '{"b":2}', None)],
        None,
    )


def test_rule_only_json_whitespace_is_blank() -> None:
    assert texts(b"\x0b\n\xc2\xa0\n") == ["\x0b", "\xa0"]


# UTF-8


def test_rule_text_is_utf8() -> None:
    assert texts('{"c":"café 東京 🎉"}\n'.encode()) == ['{"c":"café 東京 🎉"}']


def test_rule_invalid_utf8_is_replaced_and_its_first_offset_reported() -> None:
    body = b'{"a":1}\n{"b":"x\xffy\xe2\x82"}\n'
    lines, incomplete = parse(body)
    assert lines == [
        Line(0, 0, '{"a":1}', None),
        Line(1, 8, '{"b":"x\ufffdy\ufffd"}', body.index(b"\xff")),
    ]
    assert incomplete is None


def test_rule_multibyte_character_split_across_feeds() -> None:
    body = '{"c":"✓"}\n'.encode()
    cut = body.index(b"\xe2") + 1
    assert feed_pieces([body[:cut], body[cut:]]) == ([Line(0, 0, '{"c":"✓"}', None)], None)


# Incomplete trailing line


def test_incomplete_last_line_without_its_lf() -> None:
    assert parse(b'{"a":1}\n{"b":') == ([Line(0, 0, '{"a":1}', None)], Incomplete(8, 5))


def test_incomplete_complete_value_without_its_lf_or_with_only_its_cr() -> None:
    assert parse(b'{"a":1}')[1] == Incomplete(0, 7)
    assert parse(b'{"a":1}\r')[1] == Incomplete(0, 8)


def test_no_incomplete_when_only_whitespace_follows_the_last_lf() -> None:
    assert parse(b'{"a":1}\n \t\r')[1] is None
    assert parse(b"")[1] is None
    assert parse(b"\n\n")[1] is None


def test_empty_feeds_change_nothing() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b'{"a"') == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b":1}\n") == [Line(0, 0, '{"a":1}', None)]
    assert decoder.close() is None


def test_lines_are_immutable() -> None:
    (line,), _ = parse(b"{}\n")
    with pytest.raises(AttributeError):
        line.text = "[]"  # type: ignore[misc]


# An Ollama stream


def test_an_ollama_chat_stream_gives_one_json_object_per_line() -> None:
    body = (OLLAMA / "chat.ndjson").read_bytes()
    lines, incomplete = parse(body)
    chunks = [orjson.loads(line.text) for line in lines]
    assert incomplete is None
    assert [line.ordinal for line in lines] == list(range(17))
    line_starts = [0, *(i + 1 for i, byte in enumerate(body) if byte == ord("\n"))]
    assert [line.offset for line in lines] == line_starts[:-1]
    answer = "".join(chunk["message"]["content"] for chunk in chunks)
    assert answer.startswith("The sky is blue because of Rayleigh scattering.")
    assert answer.endswith("— café 東京.")
    assert [chunk["done"] for chunk in chunks] == [False] * 16 + [True]
    assert chunks[-1]["done_reason"] == "stop"
    assert chunks[-1]["eval_count"] == 282


def test_an_ollama_tool_call_line_cut_short_is_incomplete() -> None:
    body = (OLLAMA / "tools.ndjson").read_bytes()
    second = body.index(b"\n") + 1
    lines, incomplete = parse(body[: second + 40])
    (call,) = orjson.loads(lines[0].text)["message"]["tool_calls"]
    assert call["function"] == {
        "name": "get_current_weather",
        "arguments": {"format": "celsius", "location": "Paris, FR"},
    }
    assert incomplete == Incomplete(second, 40)


# Scale


def test_a_64_mib_line_in_1_kib_pieces_is_framed_in_linear_work() -> None:
    size = 64 * 1024 * 1024
    piece = b"x" * 1024
    decoder = NDJSONDecoder()
    assert decoder.feed(b'"') == []
    for _ in range(size // len(piece)):
        assert decoder.feed(piece) == []
    line, following = decoder.feed(b'"\r\n{"next":1}\n')
    fed = 1 + size + len(b'"\r\n{"next":1}\n')
    assert len(line.text) == size + 2
    assert line.text.count("x") == size
    assert following == Line(1, size + 4, '{"next":1}', None)
    assert decoder.close() is None
    assert decoder.bytes_scanned <= 2 * fed


def test_a_million_short_lines_keep_memory_bounded() -> None:
    total = 1_000_000
    traced_tail = 100_000
    chunk = b'{"x":1}\n' * 4000
    decoder = NDJSONDecoder()
    count = 0
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
    assert decoder.close() is None
    assert retained < 256 * 1024


# Split invariance against a line-at-a-time reading of the rules


def reference_parse(body: bytes) -> tuple[list[Line], Incomplete | None]:
    """The rules one line at a time with `bytes.partition`: slow, short and independent."""
    lines: list[Line] = []
    offset = 0
    while True:
        line, newline, rest = body[offset:].partition(b"\n")
        if not newline:
            break
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip(b" \t\r"):
            try:
                text, bad = line.decode(), None
            except UnicodeDecodeError as error:
                text, bad = line.decode("utf-8", "replace"), offset + error.start
            lines.append(Line(len(lines), offset, text, bad))
        offset = len(body) - len(rest)
    tail = body[offset:]
    return lines, Incomplete(offset, len(tail)) if tail.strip(b" \t\r") else None


values = st.one_of(
    st.builds(lambda n: orjson.dumps({"n": n}), st.integers(-(2**63), 2**63 - 1)),
    st.text(max_size=12).map(orjson.dumps),
    st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\n"), max_size=8).map(
        str.encode
    ),
    st.sampled_from([b"", b" ", b"\t", b"\r", b" \r", b"\xff", b"\xe2\x82", b"\x0c", b"x\ry"]),
)
line_ends = st.sampled_from([b"\n", b"\r\n"])
streams = st.builds(
    lambda lines, tail: b"".join(lines) + tail,
    st.lists(st.tuples(values, line_ends).map(b"".join), max_size=12),
    values,
)


@examples(300)
@given(body=streams, data=st.data())
def test_any_split_gives_the_lines_of_the_whole_body_and_of_the_rules(
    body: bytes, data: st.DataObject
) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=8)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    whole = parse(body)
    assert feed_pieces(pieces) == whole
    assert whole == reference_parse(body)


def test_a_partial_line_is_searched_on_arrival_and_once_more_when_its_lf_comes() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a"') == []
    assert decoder.feed(b":1") == []
    assert decoder.bytes_scanned == 6
    assert decoder.feed(b'}\n{"b"') == [Line(0, 0, '{"a":1}', None)]
    assert decoder.bytes_scanned == 6 + 6 + 6
