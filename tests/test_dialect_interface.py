"""The declared dialect interface and the registry that dispatches through it.

Every registered dialect declares what `calltap.dialects.base` names; `transcribe` tells the
framing from the content (Content-Type only where the content cannot tell), offers the frames to
the dialects of that framing, and asks the path only when the content names none; the request
side (conversation, usage asked) is the dialect's, found by the request path.
"""

from __future__ import annotations

import gzip
import json
import zlib
from zlib import crc32

import orjson
import pytest

from calltap.codes import Code
from calltap.compare import check_capture, compare_captures
from calltap.dialects import (
    COMPARED_PATHS,
    DIALECTS,
    dialect_of_path,
    request_conversation,
    transcribe,
    usage_requested,
)
from calltap.dialects.base import FRAMINGS
from calltap.dialects.content import EncodingError, decode_content
from calltap.dialects.framing import EventStreamFrames, sniff_framing
from calltap.fakes import eventstream as wire
from calltap.report import check_json
from calltap.transcript import Capture, Finding, Position
from fixtures import chat_stream as chat

OLLAMA_LINES = (
    b'{"model":"m","message":{"role":"assistant","content":"Hi"},"done":false}\n'
    b'{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop",'
    b'"prompt_eval_count":3,"eval_count":1}\n'
)


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda dialect: dialect.NAME)
def test_every_dialect_declares_the_whole_interface(dialect) -> None:
    assert isinstance(dialect.NAME, str) and dialect.NAME
    assert dialect.PATHS and all(path.startswith(("/", ":")) for path in dialect.PATHS)
    assert set(dialect.PATHS) <= set(COMPARED_PATHS)
    assert dialect.FRAMING in FRAMINGS
    assert dialect.sniff({}) is False
    assert dialect.reduce_json({}).dialect == dialect.NAME
    assert dialect.reduce_events([]).dialect == dialect.NAME
    assert dialect.conversation({}) is None
    assert dialect.usage_requested(b"{}") is True


def test_the_new_dialects_endpoints_are_compared_by_default() -> None:
    assert {"/api/chat", "/converse", "/converse-stream", "/invoke",
            "/invoke-with-response-stream"} <= set(COMPARED_PATHS)


@pytest.mark.parametrize(
    ("path", "name"),
    [("/v1/chat/completions", "openai.chat"), ("/api/chat", "ollama.chat"),
     ("/model/meta.llama3-70b-instruct-v1:0/converse?x=1", "bedrock.converse"),
     ("/model/m/converse-stream/", "bedrock.converse"),
     ("/model/m/invoke-with-response-stream", "anthropic.messages"),
     ("/v1/responses", "openai.responses"), ("/v1/embeddings", None),
     ("/api/chat?next=/a?b", "ollama.chat"), ("/api/chatX", None)],
)
def test_a_path_names_its_dialect(path: str, name: str | None) -> None:
    dialect = dialect_of_path(path)
    assert (dialect.NAME if dialect else None) == name


@pytest.mark.parametrize(
    ("body", "content_type", "framing"),
    [
        (b'{"a": 1}', None, "json"),
        (b'\xef\xbb\xbf  [1, 2]', None, "jsonarray"),
        (b'{\n  "a": 1,\n  "b": 2\n}\n', None, "json"),
        (b'{"a": 1}\n\n', None, "json"),
        (OLLAMA_LINES, None, "ndjson"),
        (b"\xef\xbb\xbf" + OLLAMA_LINES, None, "ndjson"),
        (b'{"a": 1}\n', "application/x-ndjson", "ndjson"),
        (wire.event("messageStart", {"role": "assistant"}), None, "eventstream"),
        (wire.event("messageStart", {}), "text/event-stream", "eventstream"),
        (b"\x00\x00", "application/vnd.amazon.eventstream", "eventstream"),
        (wire.event("messageStart", {})[:12], None, "eventstream"),
        (b"\x00" * 12, "application/vnd.amazon.eventstream", "sse"),
        (b"data: {}\n\n", None, "sse"),
        (b"data: {}\n\n", "application/json", "sse"),
        (b"", None, "sse"),
    ],
)
def test_the_framing_is_told_from_the_content_first(body, content_type, framing) -> None:
    assert sniff_framing(body, content_type) == framing


def test_an_event_stream_message_is_keyed_by_its_event_or_exception_type() -> None:
    body = (wire.event("messageStart", {"role": "assistant"})
            + wire.exception("throttlingException", "slow down")
            + wire.encode({":message-type": "event"}, b"{}"))
    assert [EventStreamFrames.payload(message) for message in EventStreamFrames(body)] == [
        {"messageStart": {"role": "assistant"}},
        {"throttlingException": {"message": "slow down"}},
        None,
    ]


def test_a_broken_event_stream_ends_in_frame_invalid_saying_how() -> None:
    body = bytearray(wire.event("messageStart", {"role": "assistant"}) * 2)
    body[-1] ^= 1
    assert transcribe(Capture(bytes(body))).findings[-1] == Finding(
        Code.FRAME_INVALID, position=Position(None, 118),
        detail="message CRC mismatch: read 0x6fa8c598, computed 0x6fa8c599",
    )


def _prelude(total: int, headers: int) -> bytes:
    lengths = total.to_bytes(4) + headers.to_bytes(4)
    return lengths + crc32(lengths).to_bytes(4)


@pytest.mark.parametrize(
    ("total", "headers", "framing"),
    [(0x01000014, 10, "eventstream"), (8, 0, "sse"), (32, 0x01000000, "sse"),
     (16, 0, "eventstream"), (32, 16, "eventstream"), (20, 10, "sse")],
)
def test_an_event_stream_prelude_is_two_lengths_that_fit_and_their_crc(
    total: int, headers: int, framing: str
) -> None:
    assert sniff_framing(_prelude(total, headers)) == framing


def test_content_decoding_has_its_own_module() -> None:
    assert decode_content(gzip.compress(OLLAMA_LINES), "gzip") == OLLAMA_LINES
    with pytest.raises(EncodingError):
        decode_content(b"x", "br")


def test_content_codings_are_read_by_their_names_and_a_mislabelled_body_is_an_error() -> None:
    gzipped = gzip.compress(OLLAMA_LINES)
    assert decode_content(gzipped, "x-gzip") == OLLAMA_LINES
    assert decode_content(gzipped, "identity, gzip,") == OLLAMA_LINES
    assert decode_content(b"", "deflate") == b""
    assert decode_content(zlib.compress(OLLAMA_LINES)[:1], "deflate") == b""
    with pytest.raises(EncodingError, match="'gzip'"):
        decode_content(zlib.compress(OLLAMA_LINES), "gzip")
    with pytest.raises(EncodingError, match=r"^cannot decode Content-Encoding 'deflate': "):
        decode_content(b"\x78\x9c\xff\xff", "deflate")


def test_a_gzipped_ndjson_stream_is_read_as_ollama() -> None:
    transcript = transcribe(Capture(gzip.compress(OLLAMA_LINES), content_encoding="gzip"))
    assert (transcript.dialect, transcript.streaming) == ("ollama.chat", True)
    assert transcript.choices[0].text == "Hi"


@pytest.mark.parametrize(
    ("path", "dialect"),
    [("/api/chat", "ollama.chat"), ("/model/m/converse-stream", "bedrock.converse"),
     ("/model/m/invoke-with-response-stream", "anthropic.messages")],
)
def test_an_empty_body_is_cut_in_the_framing_its_path_names(path: str, dialect: str) -> None:
    transcript = transcribe(Capture(b"", path=path))
    assert transcript.dialect == dialect
    assert Code.DONE_MISSING in [finding.code for finding in transcript.findings]


@pytest.mark.parametrize(
    ("body", "streaming", "why"),
    [
        (b'{"choices": [}', False,
         "body is not JSON: Expecting value: line 1 column 14 (char 13)"),
        (b'{"a": 1}', False, "body is not a known dialect's JSON"),
        (b"<html>hi</html>\n\n", True, "body is neither JSON nor a stream of a known dialect"),
    ],
)
def test_a_body_no_dialect_reads_says_why_at_its_first_byte(body, streaming, why) -> None:
    transcript = transcribe(Capture(body))
    assert (transcript.dialect, transcript.streaming) == ("unknown", streaming)
    assert transcript.findings == [
        Finding(Code.JSON_INVALID, position=Position(None, 0), detail=why)
    ]


def test_a_body_whose_encoding_cannot_be_undone_says_so_and_keeps_its_length() -> None:
    transcript = transcribe(Capture(b"xx", content_encoding="gzip"))
    assert (transcript.dialect, transcript.streaming, transcript.bytes) == ("unknown", False, 2)
    assert transcript.findings == [
        Finding(Code.JSON_INVALID, position=Position(None, 0),
                detail="cannot decode Content-Encoding 'gzip': Error -3 while decompressing data: "
                       "incorrect header check")
    ]


def test_a_truncated_capture_is_flagged_at_its_last_byte_after_what_the_body_says() -> None:
    codes_and_positions = [
        (finding.code, finding.position)
        for finding in transcribe(Capture(b'{"a":1}', truncated=True)).findings
    ]
    assert codes_and_positions == [
        (Code.JSON_INVALID, Position(None, 0)),
        (Code.CAPTURE_TRUNCATED, Position(None, 7)),
    ]


def test_an_error_that_is_only_a_string_is_its_own_summary() -> None:
    body = b'{"error": "rate limited"}'
    assert transcribe(Capture(body, path="/v1/chat/completions", status=200)).findings == [
        Finding(Code.ERROR_IN_STREAM, position=Position(None, 0), detail="rate limited")
    ]


def test_detection_reads_the_first_eight_events_then_asks_the_path() -> None:
    chunk = (b'data: {"object":"chat.completion.chunk","choices":[{"index":0,'
             b'"delta":{"content":"Hi"}}]}\n\n')
    body = b'data: {"x": 1}\n\n' * 8 + chunk
    unread = transcribe(Capture(body))
    assert (unread.dialect, unread.events) == ("unknown", 9)
    assert transcribe(Capture(body, path="/v1/chat/completions")).dialect == "openai.chat"
    assert transcribe(Capture(body[16:])).dialect == "openai.chat"


def test_a_json_body_s_own_issues_come_first_at_its_first_byte() -> None:
    body = (b'{"object":"chat.completion","created":NaN,"choices":[{"index":0,'
            b'"message":{"role":"assistant","content":"x"}}]}')
    assert transcribe(Capture(body)).findings == [
        Finding(Code.NON_FINITE_NUMBER, position=Position(None, 0), detail="at /created"),
        Finding(Code.FINISH_REASON_MISSING, choice=0, position=Position(None, 0)),
    ]


def test_a_stream_of_another_framing_is_not_read_by_the_path() -> None:
    """An SSE body on an Ollama path: the path names a dialect of lines, the content has events."""
    body = chat.sse([{"unknown": True}])
    assert transcribe(Capture(body, path="/api/chat")).dialect == "unknown"


def test_a_forced_dialect_reads_the_body_in_its_own_framing() -> None:
    body = wire.event("messageStart", {"role": "assistant"})
    forced = transcribe(Capture(body, dialect="anthropic.messages"))
    assert (forced.dialect, forced.framing) == ("anthropic.messages", "eventstream")
    assert transcribe(Capture(OLLAMA_LINES, dialect="openai.chat")).dialect == "unknown"
    lines = transcribe(Capture(b'data: {"done": true}\n\n', dialect="ollama.chat"))
    assert (lines.dialect, lines.framing) == ("ollama.chat", "ndjson")
    messages = transcribe(Capture(b'data: {"done": true}\n\n', dialect="bedrock.converse"))
    assert (messages.dialect, messages.framing) == ("bedrock.converse", "eventstream")


def test_a_forced_dialect_of_two_framings_takes_the_one_the_content_type_names() -> None:
    """Anthropic Messages is SSE, and an event stream on Bedrock: an empty body says neither."""
    for content_type, framing in [("application/vnd.amazon.eventstream", "eventstream"),
                                  ("text/event-stream", "sse")]:
        empty = transcribe(Capture(b"", content_type=content_type, dialect="anthropic.messages"))
        assert (empty.dialect, empty.framing) == ("anthropic.messages", framing)


def test_the_request_side_is_the_dialect_of_the_path() -> None:
    converse = {"messages": [{"role": "user", "content": [{"text": "Hi"}]}],
                "toolConfig": {"tools": [{"toolSpec": {"name": "f"}}]}}
    read = request_conversation(converse, "/model/m/converse")
    assert read is not None
    assert read.entries == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert read.tools == ["f"]
    assert request_conversation({"input": "Hi"}, "/v1/embeddings") is None


def test_a_chat_request_offers_its_tools_and_legacy_functions_past_malformed_entries() -> None:
    hi = [{"role": "user", "content": "Hi"}]
    tools = ["junk", {"type": "function", "function": {"name": "f"}}, {"name": "g"}]
    both = request_conversation({"messages": hi, "tools": tools, "functions": [{"name": "h"}]},
                                "/v1/chat/completions")
    legacy = request_conversation({"messages": hi, "functions": [{"name": "h"}]},
                                  "/v1/chat/completions")
    assert (both.tools, legacy.tools) == (["f", "g", "h"], ["h"])


def test_only_a_chat_client_can_ask_for_no_usage() -> None:
    streamed = orjson.dumps({"stream": True, "messages": []})
    assert usage_requested("openai.chat", streamed) is False
    assert usage_requested("ollama.chat", streamed) is True
    assert usage_requested("unknown", streamed) is True


def test_compare_captures_asks_the_downstream_dialect_whether_usage_was_asked() -> None:
    upstream = Capture(OLLAMA_LINES, path="/api/chat")
    body = chat.sse([chat.chunk([chat.delta(content="Hi", finish_reason="stop")])])
    request = json.dumps({"stream": True, "messages": []}).encode()
    asked = compare_captures(upstream, Capture(body), downstream_request=None)
    not_asked = compare_captures(upstream, Capture(body), downstream_request=request)
    assert [f.code for f in asked.findings] == [Code.USAGE_MISSING]
    assert (not_asked.verdict, not_asked.findings) == ("equal", [])


@pytest.mark.parametrize(
    ("body", "framing"),
    [
        (OLLAMA_LINES, "ndjson"),
        (wire.event("messageStart", {"role": "assistant"}), "eventstream"),
        (b'[{"candidates": []}]', "json"),
        (b'{"object": "chat.completion", "choices": []}', "json"),
        (chat.sse([chat.chunk([chat.delta(content="Hi")])]), "sse"),
    ],
)
def test_each_side_of_a_report_names_its_framing(body: bytes, framing: str) -> None:
    assert check_json(check_capture(Capture(body)))["capture"]["framing"] == framing
