"""A body of plain `data:` blocks is read without the SSE parser (`sse.Blocks`) and its Chat
Completions chunks through typed envelopes (`dialects.chat_chunks`); every other body and payload
goes the general way. The law: both ways give the same transcript and the same comparison, to
the byte offset of every finding, over generated streams (text deltas, tool calls in interleaved
fragments, several choices, usage, errors, damaged and invalid payloads, payloads the two JSON
decoders could read differently), in bodies that stay plain or are not (CRLF, comments, `event:`
lines, a BOM, no [DONE], events after it, a cut anywhere), cut in windows of any size.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap import sse
from calltap.compare import compare_captures
from calltap.dialects import chat_chunks, framing, transcribe
from calltap.report import comparison_json
from calltap.transcript import Capture

PATH = "/v1/chat/completions"
ENVELOPE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
CHOICE = st.integers(0, 1)
RAW_PAYLOADS = [
    b'{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[]}',
    b'{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}',
    b'{"choices":[{"index":18446744073709551616,"delta":{"content":"big"}}]}',
    b'{"choices":[{"index":18446744073709551615,"delta":{"content":"u64"}}]}',
    b'{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":18446744073709551616}]}',
    b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":18446744073709551616,'
    b'"function":{"arguments":"{}"}}]}}]}',
    b'{"choices":[],"usage":{"prompt_tokens":1180591620717411303424,"completion_tokens":1}}',
    b'{"choices":[],"usage":{"prompt_tokens":-9223372036854775809,"total_tokens":3}}',
    b'{"created":1e400,"choices":[{"index":0,"delta":{"content":"inf"}}]}',
    b'{"x_extra":1,"choices":[{"index":0,"delta":{"content":"extra"}}]}',
    b'{"x_extra":1e400,"choices":[{"index":0,"delta":{"content":"inf"}}]}',
    b'{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"}]}}]}',
    b'{"choices":[{"index":0,"delta":{"content":[{"index":0,"text":"a"}]}}]}',
    b'{"choices":[{"index":0,"extra":1,"delta":{"content":"extra"}}]}',
    b'{"choices":[{"index":0,"delta":{"content":"\xff\xfe"}}]}',
    b'{"model":"\xed\xa0\x80","choices":[{"index":0,"delta":{"content":"utf"}}]}',
    b'{"choices":[{"index":0,"delta":{"content":"\\ud800"}}]}',
    b'{"choices":[{"index":0,"delta":{"content":NaN}}]}',
    b'{"choices":[{"index":true,"delta":{"content":"t"}}]}',
    b'{"choices":[{"index":1.0,"delta":{"content":"f"}}]}',
    b'{"choices":[{"index":0,"delta":{"content":1}}]}',
    b'{"choices":[{"index":0,"delta":"text"}]}',
    b'{"choices":[null,{"index":0,"delta":{"content":"n"}}]}',
    b'{"choices":"x"}',
    b'{"choices":null,"usage":null,"error":null}',
    b'{"error":{"message":"overloaded","type":"server_error","code":529}}',
    b'{"error":"plain"}',
    b' {"choices":[{"index":0,"delta":{"content":"padded"}}]} ',
    b'{"choices":[{"index":0,"delta":{"content":"[DONE]"}}]}',
    b'{"choices":[{"index":0,"delta":{"content":"a"}}]',
    b'{"choices":[{"index":0,"delta":{"content":"a"}}]}{}',
    b'{"choices":[{"index":0,"delta":{"thinking_blocks":[{"type":"thinking"}]}}]}',
    b'{"choices":[{"index":0,"delta":{"content":"a\\nb\\u00e9"}}]}',
    b'{"choices":\n[]}',
    b'{"logprobs":' + b"[" * 1100 + b"]" * 1100 + b',"choices":[]}',
    b"not json",
    b"",
    b"null",
    b"[1]",
    b"[DONE] ",
]


def _chunk(choices: list[Any], **extra: Any) -> bytes:
    return orjson.dumps({**ENVELOPE, "choices": choices, **extra})


@st.composite
def _fragment(draw: st.DrawFn) -> dict[str, Any]:
    fragment: dict[str, Any] = {"function": {"arguments": draw(TEXT)}}
    if draw(st.booleans()):
        fragment["index"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        fragment["id"] = draw(st.sampled_from(["call_a", "call_b", None, ""]))
        fragment["type"] = "function"
        fragment["function"]["name"] = draw(st.sampled_from(["read", "write", ""]))
    return fragment


STRUCTURED = st.one_of(
    st.builds(lambda index, text: _chunk([{"index": index, "delta": {"content": text}}]),
              CHOICE, TEXT),
    st.builds(lambda index: _chunk([{"index": index, "delta": {"role": "assistant",
                                                               "content": ""}}]), CHOICE),
    st.builds(lambda index: _chunk([{"index": index, "delta": {"role": "assistant"}}]), CHOICE),
    st.builds(lambda index, fragments: _chunk([{"index": index,
                                                "delta": {"tool_calls": fragments}}]),
              CHOICE, st.lists(_fragment(), min_size=1, max_size=2)),
    st.builds(lambda arguments, name: _chunk([{"index": 0, "delta": {"function_call": {
        "name": name, "arguments": arguments}}}]), TEXT, st.sampled_from(["f", ""])),
    st.builds(lambda index, reason: _chunk([{"index": index, "delta": {},
                                             "finish_reason": reason}]),
              CHOICE, st.sampled_from(["stop", "tool_calls", "length", "", None, 1, "odd"])),
    st.builds(lambda tokens: _chunk([], usage={"prompt_tokens": tokens, "completion_tokens": 2,
                                               "total_tokens": tokens + 2}),
              st.integers(0, 2**63)),
    st.builds(lambda text: _chunk([{"index": 0, "delta": {"content": text}},
                                   {"index": 1, "delta": {"content": text}}]), TEXT),
    st.builds(lambda text, tokens: _chunk([{"index": 0, "delta": {"content": text}}],
                                          usage={"prompt_tokens": 1, "completion_tokens": tokens,
                                                 "total_tokens": tokens + 1}),
              TEXT, st.integers(0, 9)),
    st.binary(max_size=8).filter(lambda data: b"\n" not in data and b"\r" not in data),
)
PAYLOADS = st.one_of(STRUCTURED, st.sampled_from(RAW_PAYLOADS))


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """A stream's body: plain blocks, or bent out of that shape in one of the usual ways."""
    blocks = [b"data: " + payload + b"\n\n" for payload in draw(st.lists(PAYLOADS, max_size=24))]
    if draw(st.booleans()):
        blocks.insert(draw(st.integers(0, len(blocks))), b"data: [DONE]\n\n")
    if not blocks:
        blocks.append(b"data: [DONE]\n\n")
    bend = draw(st.sampled_from(["plain"] * 6 + ["crlf", "comment", "event", "bom", "bare",
                                                  "cut"]))
    if bend == "comment":
        blocks.insert(draw(st.integers(0, len(blocks))), b": keep-alive\n\n")
    elif bend == "event":
        at = draw(st.integers(0, len(blocks) - 1))
        blocks[at] = draw(st.sampled_from([b"event: ping\n", b"event: message\n"])) + blocks[at]
    elif bend == "bare":
        at = draw(st.integers(0, len(blocks) - 1))
        blocks[at] = blocks[at].replace(b"data: ", b"data:", 1)
    body = b"".join(blocks)
    if bend == "crlf":
        body = body.replace(b"\n", b"\r\n")
    elif bend == "bom":
        body = b"\xef\xbb\xbf" + body
    elif bend == "cut":
        body = body[: draw(st.integers(0, len(body)))]
    return body


@contextmanager
def _general() -> Iterator[None]:
    """Every body read the general way: the SSE parser, orjson, the reducer's dict path."""
    with mock.patch.object(framing.SSEFrames, "blocks", lambda self: None):
        yield


def _compared(upstream: bytes, downstream: bytes) -> tuple[str, str, str, dict[str, Any]]:
    comparison = compare_captures(Capture(upstream, PATH), Capture(downstream, PATH))
    return (repr(transcribe(Capture(upstream))), repr(comparison.upstream),
            repr(comparison.downstream), comparison_json(comparison))


def _blocks(*payloads: bytes) -> bytes:
    return b"".join(b"data: " + payload + b"\n\n" for payload in payloads)


TEXT_LISTS = _blocks(
    _chunk([{"index": 0, "delta": {"role": "assistant"}}]),
    _chunk([{"index": 0, "delta": {"content": "a"}}]),
    _chunk([{"index": 0, "delta": {"content": [{"type": "text"}]}}]),
    _chunk([{"index": 0, "delta": {"content": [{"type": "text"}]}}]),
)
"""A text delta after a delta without text: the SDK then holds a string, and lists of parts
that follow it change nothing (held as a list, the second would raise)."""


@examples(500)
@example(TEXT_LISTS, TEXT_LISTS, sse.WINDOW, 32)
@given(bodies(), bodies(), st.sampled_from([64, 300, 4096, sse.WINDOW]),
       st.sampled_from([0, 1, 3, 32]))
def test_plain_blocks_read_as_the_parser_and_orjson_read_them(
    upstream: bytes, downstream: bytes, window: int, near: int
) -> None:
    with mock.patch.object(sse, "WINDOW", window), mock.patch.object(sse, "_NEAR_END", near):
        fast = _compared(upstream, downstream)
    with _general():
        general = _compared(upstream, downstream)
    assert fast == general


def test_a_plain_body_is_cut_into_its_events_and_nothing_else_is() -> None:
    body = b'data: {"a":1}\n\ndata: \n\ndata: x y\n\n'
    blocks = sse.Blocks.of(body)
    assert blocks is not None and blocks.count == 3
    [window] = blocks.windows()
    assert [window.event(index) for index in range(3)] == sse.parse(body)[0]
    for other in (b"data: a\n\n\n\n", b"data:a\n\n", b"data: a\ndata: b\n\n", b"data: a\r\n\r\n",
                  b"\xef\xbb\xbfdata: a\n\n", b": c\n\ndata: a\n\n", b"data: a\n", b""):
        assert sse.Blocks.of(other) is None


def test_a_payload_nested_deeper_than_orjson_reads_goes_the_general_way() -> None:
    """orjson reads 1024 levels; msgspec as many as the recursion limit allows, here more."""
    nested = b"[" * 1100 + b'{"a":1,"a":2}' + b"]" * 1100
    body = (b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
            b'data: {"created":' + nested + b',"choices":[]}\n\ndata: [DONE]\n\n')
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        fast = repr(transcribe(Capture(body)))
        with _general():
            general = repr(transcribe(Capture(body)))
    finally:
        sys.setrecursionlimit(limit)
    assert fast == general
    assert "DUPLICATE_KEY" in fast


def test_a_long_plain_body_is_read_a_window_at_a_time() -> None:
    body = b"".join(b"data: " + str(n).encode() * (n % 7) + b"\n\n" for n in range(500))
    with mock.patch.object(sse, "WINDOW", 256):
        blocks = sse.Blocks.of(body)
        assert blocks is not None and blocks.count == 500
        windows = list(blocks.windows())
    assert len(windows) > 10
    events = [window.event(index) for window in windows for index in range(len(window.data))]
    assert events == sse.parse(body)[0]


def test_short_payloads_are_decoded_into_chunks_and_long_ones_are_left_to_orjson() -> None:
    short = _chunk([{"index": 0, "delta": {"content": "a"}}])
    chunk = chat_chunks.decode_chunk(short)
    assert chunk is not None and chunk.choices[0].delta == {"content": "a"}
    longest = b'{"choices":[{"index":0,"delta":{"content":"%s"}}]}'
    longest %= b"x" * (2047 - len(longest % b""))
    assert len(longest) == 2047
    assert chat_chunks.decode_chunk(longest).__class__ is chat_chunks.Chunk
    assert chat_chunks.decode_chunk(longest[:-5] + b'x"}}]}') is None
    with pytest.raises(chat_chunks.REJECTED):
        chat_chunks.decode_chunk(_chunk([{"index": 0, "delta": {}}], unknown=1))


def test_faithful_tells_the_integers_orjson_keeps_from_those_it_makes_floats() -> None:
    def faithful(value: int) -> bool:
        payload = b'{"choices":[{"index":0,"delta":{"n":[%d]}}],"usage":{"u":{"v":1}}}' % value
        decoded = chat_chunks.decode_chunk(payload)
        assert decoded is not None
        return chat_chunks.faithful(decoded, payload)

    for kept in (0, 10**18 - 1, 10**18, 2**64 - 1, -(2**63)):
        assert faithful(kept), kept
    for floated in (2**64, -(2**63) - 1):
        assert not faithful(floated), floated
    assert orjson.loads(str(2**64).encode()).__class__ is float
    assert orjson.loads(str(2**64 - 1).encode()).__class__ is int


def test_a_plain_chat_body_is_read_without_the_sse_parser() -> None:
    """The fast path is taken (what the law above cannot see: both ways give the same)."""
    body = _blocks(_chunk([{"index": 0, "delta": {"content": "a"}}]), b"[DONE]")
    with mock.patch.object(sse.SSEParser, "feed", side_effect=AssertionError("parser used")):
        transcript = transcribe(Capture(body, PATH))
    assert transcript.dialect == "openai.chat"
    assert transcript.choices[0].text == "a"
    assert transcript.framing == "sse"


def test_chunks_after_one_left_to_orjson_are_read_too() -> None:
    """A payload too long for the typed decoder, between short ones of the same window."""
    body = _blocks(_chunk([{"index": 0, "delta": {"role": "assistant", "content": "a"}}]),
                   _chunk([{"index": 0, "delta": {"content": "b" * 3000}}]),
                   _chunk([{"index": 0, "delta": {"content": "c"}}]),
                   _chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]), b"[DONE]")
    fast = _compared(body, body)
    with _general():
        general = _compared(body, body)
    assert fast == general
    assert transcribe(Capture(body, PATH)).choices[0].text == "a" + "b" * 3000 + "c"
