"""What the event-stream parser promises at the seams: a CRLF split across feeds, the fast path's
hand-over to the line rules, undecodable bytes in every field, and the bytes it scans."""

from __future__ import annotations

import pytest

from calltap.sse import Event, Incomplete, SSEParser, parse


def test_cr_ending_a_feed_and_its_lf_opening_the_next_are_one_line_end_before_more_events() -> None:
    """The LF is the second half of a CRLF: it is neither a blank line nor a byte of the block
    after it, which the LF-only fast path then reads at its true offset."""
    parser = SSEParser()
    assert parser.feed(b"data: a\r\r") == [Event(0, 0, "message", "a", "")]
    assert parser.feed(b"\ndata: b\n\ndata: c\n\n") == [
        Event(1, 10, "message", "b", ""),
        Event(2, 19, "message", "c", ""),
    ]
    assert parser.close() is None


def test_cr_ending_a_feed_then_a_feed_without_lf_keeps_every_byte() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"data: b\r\r") == [Event(0, 0, "message", "a\nb", "")]
    assert parser.feed(b"\n") == []
    assert parser.feed(b"data: c\n\n") == [Event(1, 18, "message", "c", "")]


def test_id_and_event_blocks_between_fast_blocks_keep_ordinals_ids_and_offsets() -> None:
    """Blocks the fast path does not take whole (an `id:` line, an `event:` line not followed by a
    `data:` line) go through the line rules and hand the ordinal and last id back."""
    body = (
        b"data: a\n\n"
        b"id: 7\nevent: x\ndata: b\n\n"
        b"data: c\n\n"
        b"event: y\nid: 8\ndata: d\n\n"
        b"event: z\ndata: e\n\n"
    )
    events, incomplete = parse(body)
    assert events == [
        Event(0, 0, "message", "a", ""),
        Event(1, body.index(b"id: 7"), "x", "b", "7"),
        Event(2, body.index(b"data: c"), "message", "c", "7"),
        Event(3, body.index(b"event: y"), "y", "d", "8"),
        Event(4, body.index(b"event: z"), "z", "e", "8"),
    ]
    assert incomplete is None


def test_an_event_line_whose_data_line_is_still_open_waits_for_the_next_feed() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\n\nevent: x\ndata: b") == [Event(0, 0, "message", "a", "")]
    assert parser.close() == Incomplete(9, 16)
    assert parser.feed(b"\n\n") == [Event(1, 9, "x", "b", "")]
    assert parser.close() is None


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"])
def test_undecodable_bytes_in_data_id_and_event_are_replacement_characters(
    line_end: bytes,
) -> None:
    """Every field is decoded as UTF-8 with replacement, on the LF fast path and on the line rules
    alike: a stray byte never stops the parser or drops an event."""
    lines = [b"event: \xff", b"data: \xfe", b"", b"id: \xfd", b"data: a", b"", b"data: \xe2\x82"]
    body = line_end.join(lines) + line_end * 2
    events, incomplete = parse(body)
    second = body.index(b"id:")
    third = body.index(b"data: \xe2")
    assert events == [
        Event(0, 0, "\ufffd", "\ufffd", ""),
        Event(1, second, "message", "a", "\ufffd"),
        Event(2, third, "message", "\ufffd", "\ufffd"),
    ]
    assert incomplete is None


def test_bytes_scanned_counts_each_feed_once_and_a_pending_line_once_more_when_it_ends() -> None:
    parser = SSEParser()
    parser.feed(b"data: a\n\n")
    assert parser.bytes_scanned == 9
    parser.feed(b"data: ")
    assert parser.bytes_scanned == 9 + 6
    parser.feed(b"abc")
    assert parser.bytes_scanned == 9 + 6 + 3
    assert parser.feed(b"\n\n") == [Event(1, 9, "message", "abc", "")]
    assert parser.bytes_scanned == 9 + 6 + 3 + 2 + len(b"data: abc\n\n")


def test_bytes_scanned_counts_a_leading_lf_which_ends_an_empty_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"\ndata: a\n\n") == [Event(0, 1, "message", "a", "")]
    assert parser.bytes_scanned == len(b"\ndata: a\n\n")


def test_bytes_scanned_leaves_out_a_dropped_bom_and_the_lf_of_a_split_crlf() -> None:
    parser = SSEParser()
    parser.feed(b"\xef\xbb\xbfdata: a\r")
    assert parser.bytes_scanned == len(b"data: a\r")
    parser.feed(b"\n\r\n")
    assert parser.bytes_scanned == len(b"data: a\r") + len(b"\r\n")


def test_the_first_colon_ends_the_field_name_on_every_field() -> None:
    """Later colons belong to the value, on lines the `data: ` shortcut does not read too."""
    events, _ = parse(b"event:a:b\nid:1:2\ndata:x:y\n\n")
    assert events == [Event(0, 0, "a:b", "x:y", "1:2")]


def test_a_typed_block_without_data_dispatches_nothing_but_keeps_its_id() -> None:
    """`event:` then `id:` then a blank line is no event, wherever the block sits in a feed."""
    body = b"data: a\n\nevent: ping\nid: 7\n\ndata: b\n\n"
    events, incomplete = parse(body)
    assert events == [
        Event(0, 0, "message", "a", ""),
        Event(1, body.index(b"data: b"), "message", "b", "7"),
    ]
    assert incomplete is None
