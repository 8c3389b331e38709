"""The AWS event stream framing, checked against botocore, a decoder nobody here wrote.

Known answers from botocore's tests, Bedrock streams read by both decoders, one test per refusal,
then the laws for arbitrary messages: any split, any flipped bit, any cut.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterator

import botocore.parsers
import botocore.session
import orjson
import pytest
from botocore.eventstream import EventStream, EventStreamBuffer
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.eventstream import (
    MAX_HEADERS_LENGTH,
    MAX_PAYLOAD_LENGTH,
    MESSAGE_OVERHEAD,
    EventStreamDecoder,
    HeaderType,
    HeaderValue,
    Invalid,
    Message,
    parse,
)
from calltap.fakes import eventstream as fake
from calltap.fakes.eventstream import Typed
from calltap.sse import Incomplete
from fixtures.bedrock import converse_stream, vectors

BEDROCK = botocore.session.get_session().get_service_model("bedrock-runtime")


def feed_pieces(pieces: list[bytes]) -> tuple[list[Message], Incomplete | Invalid | None]:
    decoder = EventStreamDecoder()
    messages = [message for piece in pieces for message in decoder.feed(piece)]
    return messages, decoder.error or decoder.close()


def botocore_messages(pieces: list[bytes]) -> list[tuple[dict, bytes]]:
    buffer = EventStreamBuffer()
    messages = []
    for piece in pieces:
        buffer.add_data(piece)
        messages += [(message.headers, message.payload) for message in buffer]
    return messages


def botocore_events(body: bytes, operation: str, member: str) -> Iterator[dict]:
    """The events botocore's client would yield for `body`, read with the service model."""

    class Raw:
        def stream(self) -> Iterator[bytes]:
            yield body

        def close(self) -> None:
            pass

    model = BEDROCK.operation_model(operation)
    shape = model.output_shape.members[member]
    parser = botocore.parsers.EventStreamJSONParser()
    for event in EventStream(Raw(), shape, parser, operation):
        yield {key: value for key, value in event.items() if key != "ResponseMetadata"}


# Known answers


@pytest.mark.parametrize(("encoded", "headers", "payload"), vectors.POSITIVE)
def test_botocore_vectors_decode_to_botocore_answers(
    encoded: bytes, headers: dict, payload: bytes
) -> None:
    assert parse(encoded) == ([Message(0, 0, len(encoded), headers, payload)], None)


def test_botocore_vectors_in_one_body_keep_offsets_and_ordinals() -> None:
    body = b"".join(encoded for encoded, _, _ in vectors.POSITIVE)
    messages, end = parse(body)
    lengths = [len(encoded) for encoded, _, _ in vectors.POSITIVE]
    assert [(m.ordinal, m.offset, m.length) for m in messages] == [
        (0, 0, lengths[0]),
        (1, lengths[0], lengths[1]),
        (2, sum(lengths[:2]), lengths[2]),
        (3, sum(lengths[:3]), lengths[3]),
    ]
    assert end is None


@pytest.mark.parametrize(("encoded", "reason"), vectors.NEGATIVE)
def test_botocore_refused_vectors_are_invalid_at_their_offset(encoded: bytes, reason: str) -> None:
    before = vectors.EMPTY[0]
    messages, end = parse(before + encoded + before)
    assert len(messages) == 1
    assert isinstance(end, Invalid)
    assert end.offset == len(before)
    assert end.reason.startswith(reason)


def test_the_encoder_writes_botocore_vectors_byte_for_byte() -> None:
    typed = {
        "2": Typed(HeaderType.BYTE, 2),
        "3": Typed(HeaderType.SHORT, 3),
        "4": Typed(HeaderType.INTEGER, 4),
        "5": Typed(HeaderType.LONG, 5),
        "8": Typed(HeaderType.TIMESTAMP, 8),
        "9": Typed(HeaderType.UUID, b"0123456789abcdef"),
    }
    encoded, headers, payload = vectors.ALL_HEADER_TYPES
    assert fake.encode({**headers, **typed}, payload) == encoded
    for encoded, headers, payload in (vectors.EMPTY, vectors.ONE_STRING_HEADER):
        assert fake.encode(headers, payload) == encoded


def test_the_encoder_asks_which_integer_type() -> None:
    with pytest.raises(TypeError, match="Typed"):
        fake.encode({"n": 1})


# Bedrock streams


def converse_body() -> bytes:
    events = [fake.event(name, body) for name, body in converse_stream.TOOL_USE]
    return b"".join(events) + fake.exception(*converse_stream.THROTTLED)


def test_a_converse_stream_is_what_botocore_reads_as_the_documented_events() -> None:
    body = b"".join(fake.event(name, body) for name, body in converse_stream.TOOL_USE)
    expected = [{name: body} for name, body in converse_stream.TOOL_USE]
    assert list(botocore_events(body, "ConverseStream", "stream")) == expected


def test_a_converse_stream_decodes_to_its_events_headers_and_payloads() -> None:
    body = converse_body()
    messages, end = parse(body)
    assert end is None
    events = [m for m in messages if m.headers[":message-type"] == "event"]
    assert [(m.headers[":event-type"], orjson.loads(m.payload)) for m in events] == list(
        converse_stream.TOOL_USE
    )
    assert {m.headers[":content-type"] for m in messages} == {"application/json"}
    tool = messages[8]
    assert orjson.loads(tool.payload)["start"]["toolUse"] == {
        "toolUseId": converse_stream.TOOL_USE_ID,
        "name": "get_weather",
    }
    deltas = [orjson.loads(m.payload)["delta"] for m in messages[1:7] + messages[9:14]]
    assert "".join(d["text"] for d in deltas if "text" in d) == "".join(converse_stream.TEXT)
    arguments = "".join(d["toolUse"]["input"] for d in deltas if "toolUse" in d)
    assert orjson.loads(arguments) == {"location": "Paris, FR", "unit": "celsius"}
    assert [m.ordinal for m in messages] == list(range(len(messages)))
    assert messages[-1].offset + messages[-1].length == len(body)


def test_an_exception_message_is_a_frame_with_its_type() -> None:
    body = converse_body()
    *_, last = parse(body)[0]
    assert last.headers == {
        ":exception-type": "throttlingException",
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    assert orjson.loads(last.payload) == {"message": converse_stream.THROTTLED[1]}
    with pytest.raises(botocore.exceptions.EventStreamError) as raised:
        list(botocore_events(body, "ConverseStream", "stream"))
    assert raised.value.response["Error"]["Code"] == "throttlingException"


def test_an_invoke_model_chunk_carries_the_model_event_in_base64() -> None:
    body = fake.chunk(converse_stream.ANTHROPIC_TEXT_DELTA)
    (message,), end = parse(body)
    assert end is None
    assert message.headers[":event-type"] == "chunk"
    carried = base64.b64decode(orjson.loads(message.payload)["bytes"])
    assert orjson.loads(carried) == converse_stream.ANTHROPIC_TEXT_DELTA
    (event,) = botocore_events(body, "InvokeModelWithResponseStream", "body")
    assert event == {"chunk": {"bytes": carried}}


def test_messages_with_the_same_header_block_do_not_share_their_headers() -> None:
    first, second = parse(fake.event("contentBlockStop", {}) * 2)[0]
    assert first.headers == second.headers
    first.headers[":event-type"] = "changed"
    assert second.headers[":event-type"] == "contentBlockStop"


# Refusals: a valid CRC around an impossible message


def prelude(total: int, headers_length: int) -> bytes:
    lengths = total.to_bytes(4, "big") + headers_length.to_bytes(4, "big")
    return lengths + zlib.crc32(lengths).to_bytes(4, "big")


@pytest.mark.parametrize(
    ("total", "headers_length", "reason"),
    [
        (15, 0, "total length 15 is under the 16-byte minimum"),
        (20, 5, "headers length 5 exceeds total length 20 - 16"),
        (16 + MAX_HEADERS_LENGTH + 1, MAX_HEADERS_LENGTH + 1, "headers length 131073 is over"),
        (16 + MAX_PAYLOAD_LENGTH + 1, 0, "payload length 16777217 is over"),
    ],
)
def test_an_impossible_length_is_invalid_as_soon_as_the_prelude_is_in(
    total: int, headers_length: int, reason: str
) -> None:
    decoder = EventStreamDecoder()
    assert decoder.feed(vectors.EMPTY[0] + prelude(total, headers_length)) == [
        Message(0, 0, 16, {}, b"")
    ]
    assert decoder.error is not None
    assert decoder.error.offset == 16
    assert decoder.error.reason.startswith(reason)
    assert decoder.feed(vectors.EMPTY[0]) == []
    assert decoder.close() is None


def test_the_largest_lengths_botocore_allows_are_allowed() -> None:
    largest = 2**16 - 1
    headers = {"a": b"a" * largest, "b": b"b" * (MAX_HEADERS_LENGTH - 2 * 5 - largest)}
    body = fake.encode(headers, b"") + fake.encode({}, b"p" * MAX_PAYLOAD_LENGTH)
    messages, end = parse(body)
    assert messages[0].length - 16 == MAX_HEADERS_LENGTH
    assert messages[1].length - 16 == MAX_PAYLOAD_LENGTH
    assert end is None
    assert len(botocore_messages([body])) == 2


@pytest.mark.parametrize(
    ("header_block", "reason"),
    [
        (b"\x01a\x0a", "header 'a' has unknown value type 10"),
        (b"\x01a\x07\x00\x05abc", "header 'a' runs past the headers"),
        (b"\x01a\x04\x00\x00", "header 'a' runs past the headers"),
        (b"\x01a\x07\x00", "header 'a' runs past the headers"),
        (b"\x01a\x09" + b"u" * 15, "header 'a' runs past the headers"),
        (b"\x05ab", "header at byte 0 runs past the headers"),
        (b"\x01a\x00\x02a", "header at byte 3 runs past the headers"),
        (b"\x02a\xff\x00", "header name is not UTF-8 at byte 1"),
        (b"\x01a\x07\x00\x02\xc3(", "header 'a' is not UTF-8 at byte 0"),
        (b"\x01a\x00\x01a\x01", "header 'a' appears twice"),
    ],
)
def test_malformed_headers_are_invalid(header_block: bytes, reason: str) -> None:
    assert parse(fake.frame(header_block, b"{}") + vectors.EMPTY[0]) == ([], Invalid(0, reason))


def test_an_empty_header_name_is_allowed_as_botocore_allows_it() -> None:
    body = fake.frame(b"\x00\x00", b"")
    assert parse(body) == ([Message(0, 0, len(body), {"": True}, b"")], None)
    assert botocore_messages([body]) == [({"": True}, b"")]


# Incomplete messages and scale


def test_incomplete_short_prelude_and_short_message() -> None:
    body = converse_body()
    first = parse(body)[0][0].length
    assert parse(body[:5]) == ([], Incomplete(0, 5))
    messages, end = parse(body[: first + 20])
    assert len(messages) == 1
    assert end == Incomplete(first, 20)


def test_a_16_mib_message_in_1_kib_pieces_is_read_in_linear_work() -> None:
    payload = b"x" * MAX_PAYLOAD_LENGTH
    body = fake.event("contentBlockDelta", {}) + fake.encode({":message-type": "event"}, payload)
    decoder = EventStreamDecoder()
    messages = []
    for start in range(0, len(body), 1024):
        messages += decoder.feed(body[start : start + 1024])
    assert [len(m.payload) for m in messages] == [2, MAX_PAYLOAD_LENGTH]
    assert messages[1].payload == payload
    assert decoder.close() is None
    assert decoder.bytes_scanned <= 2 * len(body)


# Laws for arbitrary messages

names = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=8).filter(
    lambda name: len(name.encode()) < 256
)
header_values: st.SearchStrategy[HeaderValue | Typed] = st.one_of(
    st.booleans(),
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=12),
    st.binary(max_size=12),
    st.builds(Typed, st.just(HeaderType.BYTE), st.integers(-(2**7), 2**7 - 1)),
    st.builds(Typed, st.just(HeaderType.SHORT), st.integers(-(2**15), 2**15 - 1)),
    st.builds(Typed, st.just(HeaderType.INTEGER), st.integers(-(2**31), 2**31 - 1)),
    st.builds(
        Typed,
        st.sampled_from([HeaderType.LONG, HeaderType.TIMESTAMP]),
        st.integers(-(2**63), 2**63 - 1),
    ),
    st.builds(Typed, st.just(HeaderType.UUID), st.binary(min_size=16, max_size=16)),
)
encoded_messages = st.builds(
    fake.encode, st.dictionaries(names, header_values, max_size=5), st.binary(max_size=40)
)
bodies = st.lists(encoded_messages, min_size=1, max_size=6)


def split(body: bytes, data: st.DataObject) -> list[bytes]:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=8)))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


def starts(encoded: list[bytes]) -> list[int]:
    offsets = [0]
    for message in encoded:
        offsets.append(offsets[-1] + len(message))
    return offsets


@examples(300)
@given(encoded=bodies, data=st.data())
def test_any_split_gives_the_messages_of_the_whole_body_and_of_botocore(
    encoded: list[bytes], data: st.DataObject
) -> None:
    body = b"".join(encoded)
    pieces = split(body, data)
    messages, end = parse(body)
    assert feed_pieces(pieces) == (messages, end)
    assert end is None
    assert [(m.headers, m.payload) for m in messages] == botocore_messages(pieces)
    offsets = starts(encoded)
    assert [(m.ordinal, m.offset, m.length) for m in messages] == [
        (i, offsets[i], len(message)) for i, message in enumerate(encoded)
    ]


@examples(300)
@given(encoded=bodies, data=st.data())
def test_a_flipped_bit_stops_the_stream_at_its_message(
    encoded: list[bytes], data: st.DataObject
) -> None:
    body = bytearray(b"".join(encoded))
    bit = data.draw(st.integers(0, len(body) * 8 - 1))
    body[bit // 8] ^= 1 << (bit % 8)
    offsets = starts(encoded)
    hit = max(i for i, offset in enumerate(offsets) if offset * 8 <= bit)
    messages, end = feed_pieces(split(bytes(body), data))
    assert messages == parse(b"".join(encoded))[0][:hit]
    assert isinstance(end, Invalid)
    assert end.offset == offsets[hit]


@examples(300)
@given(encoded=bodies, data=st.data())
def test_a_cut_anywhere_gives_the_messages_before_it_and_the_rest_as_incomplete(
    encoded: list[bytes], data: st.DataObject
) -> None:
    body = b"".join(encoded)
    cut = data.draw(st.integers(0, len(body)))
    offsets = starts(encoded)
    whole = sum(1 for end in offsets[1:] if end <= cut)
    messages, end = feed_pieces(split(body[:cut], data))
    assert messages == parse(body)[0][:whole]
    assert end == (
        None if cut == offsets[whole] else Incomplete(offsets[whole], cut - offsets[whole])
    )


def test_a_prelude_is_read_on_arrival_and_its_message_once_more_when_whole() -> None:
    message = fake.event("messageStart", {"role": "assistant"})
    decoder = EventStreamDecoder()
    assert decoder.feed(message[:12]) == []
    assert decoder.bytes_scanned == 8
    assert len(decoder.feed(message[12:] + message)) == 2
    assert decoder.bytes_scanned == 8 + 2 * len(message)
    assert decoder.feed(message[:12]) == []
    assert decoder.bytes_scanned == 8 + 2 * len(message) + 8


def test_a_header_name_that_ends_the_header_block_without_a_value_is_invalid() -> None:
    body = fake.frame(b"\x01a", b"{}")
    assert parse(body) == ([], Invalid(0, "header at byte 0 runs past the headers"))


def test_a_payload_of_the_largest_length_after_its_headers_is_awaited_not_refused() -> None:
    headers = 100
    lengths = (MESSAGE_OVERHEAD + headers + MAX_PAYLOAD_LENGTH).to_bytes(4) + headers.to_bytes(4)
    decoder = EventStreamDecoder()
    assert decoder.feed(lengths + zlib.crc32(lengths).to_bytes(4)) == []
    assert decoder.error is None
