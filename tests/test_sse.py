"""The WHATWG event-stream rules, one test per rule, plus split-invariance and scale."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.sse import Event, Incomplete, SSEParser, parse

BOM = b"\xef\xbb\xbf"


def datas(body: bytes) -> list[str]:
    events, _ = parse(body)
    return [event.data for event in events]


def feed_pieces(pieces: list[bytes]) -> tuple[list[Event], Incomplete | None]:
    parser = SSEParser()
    events = [event for piece in pieces for event in parser.feed(piece)]
    return events, parser.close()


# Line endings


def test_rule_lf_crlf_and_lone_cr_each_end_a_line() -> None:
    assert datas(b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\r\n") == ["a", "b", "c", "d"]


def test_rule_lf_cr_is_a_line_end_followed_by_a_blank_line() -> None:
    events, incomplete = parse(b"data: a\n\rdata: b\r\n\r\n")
    assert [(e.data, e.offset) for e in events] == [("a", 0), ("b", 9)]
    assert incomplete is None


def test_rule_cr_at_chunk_end_then_lf_is_one_line_end_not_a_blank_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\ndata: b\r\n\r\n") == [Event(0, 0, "message", "a\nb", "")]
    assert parser.close() is None


def test_rule_cr_at_chunk_end_then_cr_is_a_blank_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\rdata: b\r\r") == [
        Event(0, 0, "message", "a", ""),
        Event(1, 9, "message", "b", ""),
    ]


def test_rule_crlf_split_across_feeds_between_every_byte() -> None:
    body = b"data: a\r\n\r\ndata: b\r\n\r\n"
    assert feed_pieces([body[i : i + 1] for i in range(len(body))]) == parse(body)
    assert datas(body) == ["a", "b"]


def test_rule_mixed_line_endings_in_one_block() -> None:
    assert datas(b"data: a\rdata: b\r\ndata: c\n\r\n") == ["a\nb\nc"]


# Byte order mark


def test_rule_leading_bom_is_dropped_and_counted_in_offsets() -> None:
    events, incomplete = parse(BOM + b"data: a\n\ndata: b\n\n")
    assert events == [Event(0, 3, "message", "a", ""), Event(1, 12, "message", "b", "")]
    assert incomplete is None


def test_rule_bom_split_across_feeds_is_still_dropped() -> None:
    events, incomplete = feed_pieces([b"\xef", b"\xbb", b"\xbfdata: a\n\n"])
    assert events == [Event(0, 3, "message", "a", "")]
    assert incomplete is None


def test_rule_only_one_bom_is_dropped_a_second_makes_an_unknown_field() -> None:
    assert datas(BOM + BOM + b"data: a\n\ndata: b\n\n") == ["b"]
    assert datas(b"data: a\n\n" + BOM + b"data: b\n\n") == ["a"]


def test_rule_a_lone_bom_is_not_an_incomplete_event_but_half_of_one_is() -> None:
    assert parse(BOM) == ([], None)
    assert parse(BOM[:2]) == ([], Incomplete(0, 2))


# Fields


def test_rule_colon_lines_are_comments() -> None:
    events, _ = parse(b": keep-alive\ndata: a\n: OPENROUTER PROCESSING\n\n:\n\n")
    assert events == [Event(0, 0, "message", "a", "")]


def test_rule_field_names_are_case_sensitive() -> None:
    assert datas(b"Data: a\n\nDATA: b\n\ndata: c\n\n") == ["c"]
    events, _ = parse(b"Event: x\ndata: a\n\n")
    assert events[0].type == "message"


def test_rule_a_line_starting_with_a_space_is_an_unknown_field() -> None:
    assert datas(b" data: a\n\ndata: b\n\n") == ["b"]


def test_rule_unknown_fields_are_ignored() -> None:
    assert datas(b"foo: bar\ndata: a\nbaz\n\n") == ["a"]


def test_rule_field_without_colon_has_an_empty_value() -> None:
    assert datas(b"data\n\n") == [""]
    assert datas(b"data\ndata\n\n") == ["\n"]
    assert datas(b"data: a\ndata\n\n") == ["a\n"]
    events, _ = parse(b"event\ndata: a\n\n")
    assert events[0].type == "message"


def test_rule_exactly_one_space_after_the_colon_is_stripped() -> None:
    assert datas(b"data:a\n\ndata: a\n\ndata:  a\n\ndata:\ta\n\ndata: \ta \n\n") == [
        "a",
        "a",
        " a",
        "\ta",
        "\ta ",
    ]


def test_rule_value_keeps_later_colons() -> None:
    assert datas(b'data: {"a": "b:c"}\n\n') == ['{"a": "b:c"}']


def test_rule_data_lines_join_with_lf() -> None:
    assert datas(b"data: a\ndata: b\r\ndata: c\rdata:\n\n") == ["a\nb\nc\n"]


def test_rule_event_sets_the_type_default_message() -> None:
    events, _ = parse(b"event: ping\ndata: {}\n\ndata: {}\n\nevent:\ndata: x\n\n")
    assert [e.type for e in events] == ["ping", "message", "message"]


def test_rule_the_last_event_field_wins() -> None:
    events, _ = parse(b"event: a\nevent: b\ndata: x\n\n")
    assert events[0].type == "b"


def test_rule_id_sets_last_event_id_which_persists_across_events() -> None:
    events, _ = parse(b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n")
    assert [e.last_event_id for e in events] == ["1", "1", ""]


def test_rule_id_containing_nul_is_ignored() -> None:
    events, _ = parse(b"id: 7\ndata: a\n\nid: 8\x009\ndata: b\n\n")
    assert [e.last_event_id for e in events] == ["7", "7"]


def test_rule_id_in_an_undispatched_block_still_sets_last_event_id() -> None:
    events, _ = parse(b"id: 5\n\ndata: a\n\n")
    assert events == [Event(0, 7, "message", "a", "5")]


def test_rule_retry_does_not_make_an_event() -> None:
    events, incomplete = parse(b"retry: 1000\n\ndata: a\n\n")
    assert events == [Event(0, 13, "message", "a", "")]
    assert incomplete is None


# Dispatch


def test_rule_dispatch_happens_at_a_blank_line_only() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\n") == []
    assert parser.feed(b"data: b\n") == []
    assert parser.feed(b"\n") == [Event(0, 0, "message", "a\nb", "")]


def test_a_single_data_line_block_ends_a_block_begun_in_an_earlier_feed() -> None:
    parser = SSEParser()
    assert parser.feed(b"event: delta\ndata: a\n") == []
    assert parser.feed(b"data: b\n\ndata: c\n\n") == [
        Event(0, 0, "delta", "a\nb", ""),
        Event(1, 30, "message", "c", ""),
    ]


def test_an_event_line_then_a_data_line_is_one_typed_event() -> None:
    events, incomplete = parse(b"event: ping\ndata: {}\n\nevent:\ndata: a\n\nevent: \ndata: b\n\n")
    assert events == [
        Event(0, 0, "ping", "{}", ""),
        Event(1, 22, "message", "a", ""),
        Event(2, 38, "message", "b", ""),
    ]
    assert incomplete is None


def test_single_data_line_blocks_keep_the_last_event_id_of_earlier_blocks() -> None:
    events, _ = parse(b"data: a\n\nid: 7\n\ndata: b\n\n: note\ndata: c\n\ndata: d\n\n")
    assert [(e.data, e.last_event_id, e.offset) for e in events] == [
        ("a", "", 0),
        ("b", "7", 16),
        ("c", "7", 25),
        ("d", "7", 41),
    ]


def test_rule_empty_data_buffer_is_not_dispatched_and_its_type_is_reset() -> None:
    events, _ = parse(b"event: ping\n\ndata: a\n\n")
    assert events == [Event(0, 13, "message", "a", "")]


def test_rule_done_marker_is_ordinary_data_here() -> None:
    events, incomplete = parse(b"data: [DONE]\n\n")
    assert events == [Event(0, 0, "message", "[DONE]", "")]
    assert incomplete is None


def test_rule_text_is_decoded_as_utf8_with_replacement() -> None:
    assert datas("data: héllo ✓ 🎉\n\n".encode()) == ["héllo ✓ 🎉"]
    assert datas(b"data: a\xffb\xe2\x82\n\n") == ["a\ufffdb\ufffd"]


def test_rule_multibyte_character_split_across_feeds() -> None:
    body = "data: ✓\n\n".encode()
    events, _ = feed_pieces([body[:7], body[7:]])
    assert events[0].data == "✓"


def test_events_are_immutable() -> None:
    (event,), _ = parse(b"data: a\n\n")
    with pytest.raises(AttributeError):
        event.data = "b"  # type: ignore[misc]


# Ordinals and offsets


def test_ordinals_count_dispatched_events_and_offsets_point_at_the_block() -> None:
    body = b"\n\n: hello\ndata: a\n\nevent: skipped\n\n\nid: 3\ndata: b\n\n"
    events, incomplete = parse(body)
    second = body.index(b"id: 3")
    assert events == [Event(0, 2, "message", "a", ""), Event(1, second, "message", "b", "3")]
    assert incomplete is None


def test_offsets_count_crlf_terminators_as_two_bytes() -> None:
    body = b"data: a\r\n\r\n:c\r\ndata: b\r\n\r\n"
    events, _ = parse(body)
    assert [e.offset for e in events] == [0, 11]
    assert body[11:13] == b":c"


# Incomplete trailing events


def test_incomplete_partial_line() -> None:
    assert parse(b'data: a\n\ndata: {"par') == (
        [Event(0, 0, "message", "a", "")],
        Incomplete(9, 11),
    )


def test_incomplete_complete_lines_without_blank_line() -> None:
    body = b"data: a\n\ndata: b\ndata: c\n"
    assert parse(body)[1] == Incomplete(9, len(body) - 9)


def test_incomplete_comment_only_block() -> None:
    assert parse(b"data: a\n\n: keep-alive\r\n")[1] == Incomplete(9, 14)


def test_incomplete_field_line_ended_by_a_final_cr() -> None:
    assert parse(b"data: a\r")[1] == Incomplete(0, 8)


def test_no_incomplete_when_only_line_terminators_follow_the_last_blank_line() -> None:
    assert parse(b"data: a\n\n\n\r\n\r")[1] is None
    assert parse(b"")[1] is None
    assert parse(b"\n\n")[1] is None


def test_incomplete_after_extra_blank_lines_starts_at_the_first_content_byte() -> None:
    assert parse(b"data: a\n\n\n\ndata: b")[1] == Incomplete(11, 7)


def test_empty_feeds_change_nothing() -> None:
    parser = SSEParser()
    assert parser.feed(b"") == []
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"") == []
    assert parser.feed(b"\n\n") == [Event(0, 0, "message", "a", "")]


# Scale


def test_a_64_mib_event_in_1_kib_pieces_is_parsed_in_linear_work() -> None:
    size = 64 * 1024 * 1024
    piece = b"x" * 1024
    parser = SSEParser()
    assert parser.feed(b"data: ") == []
    for _ in range(size // len(piece)):
        assert parser.feed(piece) == []
    event, following = parser.feed(b"\n\ndata: next\n\n")
    fed = len(b"data: ") + size + len(b"\n\ndata: next\n\n")
    assert len(event.data) == size
    assert event.data.count("x") == size
    assert following == Event(1, len(b"data: ") + size + 2, "message", "next", "")
    assert parser.close() is None
    assert parser.bytes_scanned <= 2 * fed


def test_a_million_tiny_events_through_feed_keep_memory_bounded() -> None:
    total = 1_000_000
    traced_tail = 100_000
    event = b"data: x\n\n"
    chunk = event * 4000
    parser = SSEParser()
    count = 0
    while count < total - traced_tail:
        count += len(parser.feed(chunk))
    tracemalloc.start()
    try:
        while count < total:
            count += len(parser.feed(chunk))
        retained, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == total
    assert parser.close() is None
    assert retained < 256 * 1024


# Split invariance against a line-at-a-time reading of the spec


def reference_parse(body: bytes) -> tuple[list[Event], Incomplete | None]:
    """The spec's steps one line at a time on decoded text: slow, short and independent."""
    position = len(BOM) if body.startswith(BOM) else 0
    events: list[Event] = []
    data: list[str] = []
    event_type, last_id, block = "", "", None
    while True:
        ends = [i for i in (body.find(b"\r", position), body.find(b"\n", position)) if i >= 0]
        if not ends:
            break
        end = min(ends)
        line = body[position:end].decode("utf-8", "replace")
        line_start = position
        position = end + (2 if body[end : end + 2] == b"\r\n" else 1)
        if not line:
            if data:
                events.append(
                    Event(len(events), block, event_type or "message", "\n".join(data), last_id)
                )
            data, event_type, block = [], "", None
            continue
        if block is None:
            block = line_start
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id" and "\0" not in value:
            last_id = value
    start = block if block is not None else position
    incomplete = Incomplete(start, len(body) - start) if start < len(body) else None
    return events, incomplete


field_names = st.sampled_from(
    ["data"] * 5 + ["event", "id", "retry", "Data", " data", "x", "", "\ufeffdata"]
)
values = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=12
)
line_endings = st.sampled_from([b"\n", b"\r\n", b"\r"])
field_lines = st.builds(
    lambda name, separator, value: f"{name}{separator}{value}".encode(),
    field_names,
    st.sampled_from(["", ":", ": ", ":  ", ":\t"]),
    values,
)
comment_lines = st.builds(lambda text: f":{text}".encode(), values)
odd_bytes = st.sampled_from([b"\xff", b"\xe2\x82", BOM, b"\0"])
lines = st.one_of(field_lines, field_lines, field_lines, comment_lines, odd_bytes)
ended_lines = st.tuples(lines, line_endings).map(b"".join)
blocks = st.tuples(st.lists(ended_lines, max_size=4), line_endings).map(
    lambda block: b"".join(block[0]) + block[1]
)
streams = st.builds(
    lambda bom, parts, trailer: (BOM if bom else b"") + b"".join(parts) + trailer,
    st.booleans(),
    st.lists(blocks, max_size=12),
    st.one_of(st.just(b""), lines, ended_lines),
)


single_data_line_blocks = st.builds(lambda value: f"data: {value}\n\n".encode(), values)
typed_data_line_blocks = st.builds(
    lambda kind, value: f"event: {kind}\ndata: {value}\n\n".encode(), values, values
)
lf_blocks = st.lists(lines, max_size=4).map(lambda block: b"\n".join([*block, b"", b""]))
lf_streams = st.builds(
    lambda bom, parts, trailer: (BOM if bom else b"") + b"".join(parts) + trailer,
    st.booleans(),
    st.lists(st.one_of(single_data_line_blocks, typed_data_line_blocks, lf_blocks), max_size=12),
    st.one_of(st.just(b""), lines, lines.map(lambda line: line + b"\n")),
)
"""Streams without CR, where the usual block shapes (`data: ` alone or after `event: `) mix with
any other."""


def assert_any_split_gives_the_events_of_the_spec(body: bytes, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=8)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    whole = parse(body)
    assert feed_pieces(pieces) == whole
    assert whole == reference_parse(body)


@examples(300, deadline=None)
@given(body=streams, data=st.data())
def test_any_split_gives_the_events_of_the_whole_body_and_of_the_spec(
    body: bytes, data: st.DataObject
) -> None:
    assert_any_split_gives_the_events_of_the_spec(body, data)


@examples(200, deadline=None)
@given(body=lf_streams, data=st.data())
def test_lf_only_streams_any_split_gives_the_events_of_the_spec(
    body: bytes, data: st.DataObject
) -> None:
    assert_any_split_gives_the_events_of_the_spec(body, data)


def test_a_partial_line_is_searched_on_arrival_and_once_more_when_its_line_ends() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a") == []
    assert parser.feed(b"bc") == []
    assert parser.bytes_scanned == 9
    assert parser.feed(b"\n\n") == [Event(0, 0, "message", "abc", "")]
    assert parser.bytes_scanned == 9 + 2 + 11


def test_only_the_lf_right_after_a_cr_that_ended_a_feed_is_its_pair() -> None:
    parser = SSEParser()
    pieces = (b"data: a\r", b"\ndata: b\n", b"\n")
    events = [event for piece in pieces for event in parser.feed(piece)]
    assert events == [Event(0, 0, "message", "a\nb", "")]
    assert parser.close() is None
