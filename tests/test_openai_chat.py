"""The Chat Completions reducer and `transcribe`: what a careful client makes of each stream."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest

from calltap.codes import Code
from calltap.transcript import Position
from dialect_helpers import assert_survives, clean_choice, codes, damaged, read, token_counts
from fixtures.chat_stream import (
    call_arguments,
    call_start,
    chunk,
    delta,
    sse,
    tool_call_stream,
    usage,
)

FIXTURES = Path(__file__).parent / "fixtures" / "openai_chat"


def tool_chunk(*fragments: dict) -> dict:
    return chunk([delta(tool_calls=list(fragments))])


def finished(*payloads: dict | str, reason: str = "tool_calls", done: bool = True) -> bytes:
    return sse([*payloads, chunk([delta(finish_reason=reason)])], done=done)


def test_seed_stream_reduces_to_two_calls_with_usage_and_no_findings() -> None:
    body = (FIXTURES / "seed.upstream.sse").read_bytes()
    transcript = read(body)
    choice = clean_choice(transcript, "openai.chat", streaming=True)
    assert (transcript.bytes, transcript.events, transcript.terminal_seen) == (len(body), 12, True)
    assert choice.finish_reason == "tool_calls"
    assert [(c.name, c.arguments, c.id, c.index, c.fragments) for c in choice.tool_calls] == [
        ("weather", '{"city": "Taipei"}', "call_Wx3kP9aTq1hZ", 0, 4),
        ("clock", '{"zone": "UTC"}', "call_Ck7mR2bLs5nY", 1, 4),
    ]
    assert choice.tool_calls[0].decoded.value == {"city": "Taipei"}
    assert token_counts(transcript) == (82, 41, 123)


def test_later_fragments_with_null_id_empty_name_or_repeated_type_continue_the_call() -> None:
    body = finished(
        tool_chunk(call_start(0, "call_a", "weather")),
        tool_chunk(
            {
                "index": 0,
                "id": None,
                "type": "function",
                "function": {"name": "", "arguments": '{"city"'},
            }
        ),
        tool_chunk(
            {"index": 0, "id": "call_a", "function": {"name": "weather", "arguments": ': "Oslo"}'}}
        ),
    )
    transcript = read(body)
    (call,) = transcript.choices[0].tool_calls
    assert (call.name, call.id, call.arguments, call.fragments) == (
        "weather",
        "call_a",
        '{"city": "Oslo"}',
        3,
    )
    assert transcript.findings == []


def test_an_id_that_is_not_a_string_or_is_empty_leaves_the_call_without_id() -> None:
    body = finished(
        tool_chunk({"index": 0, "id": 5, "function": {"arguments": "{"}}),
        tool_chunk({"index": 0, "id": "", "function": {"name": "f", "arguments": "}"}}),
    )
    (call,) = read(body).choices[0].tool_calls
    assert (call.id, call.name, call.arguments) == (None, "f", "{}")


@pytest.mark.parametrize(
    ("counts", "read_as"),
    [
        ({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 9}, (3, 2, 9)),
        ({"prompt_tokens": 3, "completion_tokens": 2}, (3, 2, 5)),
        ({"total_tokens": 7}, (None, None, 7)),
        ({"prompt_tokens": "3", "completion_tokens": True, "total_tokens": 7}, (None, None, 7)),
        ({"prompt_tokens": "3"}, None),
    ],
)
def test_usage_counts_are_integers_as_reported_and_a_missing_total_is_their_sum(
    counts: dict, read_as: tuple | None
) -> None:
    body = json.dumps({
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                     "finish_reason": "stop"}],
        "usage": counts,
    }).encode()
    usage = read(body).usage
    assert (usage and (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)) == read_as


def test_a_new_id_on_an_index_in_use_is_a_conflict_and_still_accumulates_there() -> None:
    body = finished(
        tool_chunk(call_start(0, "call_a", "weather", '{"city": "Oslo"}')),
        tool_chunk(call_start(0, "call_b", "clock", '{"zone": "UTC"}')),
    )
    transcript = read(body)
    (call,) = transcript.choices[0].tool_calls
    assert (call.name, call.id, call.arguments) == (
        "weather",
        "call_a",
        '{"city": "Oslo"}{"zone": "UTC"}',
    )
    assert codes(transcript) == [Code.TOOL_CALL_ID_CONFLICT, Code.TOOL_ARGUMENTS_INVALID]
    conflict = transcript.findings[0]
    assert (conflict.choice, conflict.position) == (0, Position(1, body.index(b"\n\ndata: ") + 2))


def test_deltas_without_index_start_a_call_on_a_new_id_and_otherwise_continue_the_latest() -> None:
    body = finished(
        tool_chunk({"id": "call_a", "function": {"name": "weather", "arguments": '{"city":'}}),
        tool_chunk({"function": {"arguments": ' "Oslo"}'}}),
        tool_chunk({"id": "call_b", "function": {"name": "clock", "arguments": '{"zone": "UTC"}'}}),
    )
    transcript = read(body)
    calls = transcript.choices[0].tool_calls
    assert [(c.name, c.index, c.arguments) for c in calls] == [
        ("weather", 0, '{"city": "Oslo"}'),
        ("clock", 1, '{"zone": "UTC"}'),
    ]
    (finding,) = transcript.findings
    assert (finding.code, finding.choice, finding.count) == (Code.TOOL_CALL_INDEX_MISSING, 0, 3)
    assert finding.position == Position(0, 0)


def test_whole_call_in_one_delta_with_index_after_function_and_first_index_one_is_a_gap() -> None:
    body = finished(
        chunk([delta(content="Let me check.")]),
        tool_chunk(
            {
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                "id": "c1",
                "index": 1,
            }
        ),
    )
    transcript = read(body)
    (call,) = transcript.choices[0].tool_calls
    assert (call.index, call.fragments, call.decoded.value) == (1, 1, {"city": "Oslo"})
    assert transcript.choices[0].text == "Let me check."
    (gap,) = transcript.findings
    assert (gap.code, gap.choice, gap.count) == (Code.TOOL_CALL_INDEX_GAP, 0, 1)


def test_empty_arguments_decode_as_an_empty_object_without_a_finding() -> None:
    transcript = read(finished(tool_chunk(call_start(0, "c1", "list_tables"))))
    (call,) = transcript.choices[0].tool_calls
    assert call.arguments == ""
    assert call.decoded.value == {}
    assert transcript.findings == []


def test_invalid_joined_arguments_point_at_the_first_fragment_of_the_call() -> None:
    body = finished(
        chunk([delta(role="assistant", content="")]),
        tool_chunk(call_start(0, "c1", "weather", '{"city": "Os')),
    )
    transcript = read(body)
    (finding,) = transcript.findings
    assert finding.code is Code.TOOL_ARGUMENTS_INVALID
    assert (finding.choice, finding.position.event) == (0, 1)
    assert finding.position.byte == body.index(b"data: ", 10)
    assert transcript.choices[0].tool_calls[0].decoded is None


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ('{"id": 9007199254740993}', Code.UNSAFE_INTEGER),
        ('{"a": 1, "a": 2}', Code.DUPLICATE_KEY),
        ('{"x": NaN}', Code.NON_FINITE_NUMBER),
    ],
)
def test_argument_issues_are_warnings_of_their_choice(arguments: str, code: Code) -> None:
    transcript = read(finished(tool_chunk(call_start(0, "c1", "f", arguments))))
    (finding,) = transcript.findings
    assert (finding.code, finding.choice) == (code, 0)


def test_done_ends_the_stream_only_as_the_whole_payload() -> None:
    arguments = '{"q": "data: [DONE]"}'
    body = sse(
        [
            tool_chunk(call_start(0, "c1", "search", arguments[:13])),
            tool_chunk(call_arguments(0, "[DONE]")),
            tool_chunk(call_arguments(0, arguments[19:])),
            chunk([delta(content="[DONE]")]),
            chunk([delta(finish_reason="tool_calls")]),
        ]
    )
    transcript = read(body)
    assert transcript.choices[0].tool_calls[0].arguments == arguments
    assert transcript.choices[0].text == "[DONE]"
    assert transcript.terminal_seen
    assert transcript.findings == []


def test_done_without_space_is_terminal_and_done_with_trailing_text_is_not() -> None:
    text = chunk([delta(content="hi", finish_reason="stop")])
    assert read(sse([text], done=False) + b"data:[DONE]\n\n").terminal_seen
    transcript = read(sse([text], done=False) + b"data: [DONE] \n\n")
    assert not transcript.terminal_seen
    assert codes(transcript) == [Code.JSON_INVALID, Code.DONE_MISSING]


def test_events_after_done_are_counted_but_not_read() -> None:
    body = tool_call_stream([("weather", "{}")], ids=["c1"], indexes=[0], cuts=[[]])
    body += sse([tool_chunk(call_start(1, "c2", "clock", "{}"))], done=False)
    transcript = read(body)
    assert [c.name for c in transcript.choices[0].tool_calls] == ["weather"]
    assert transcript.events == 7
    assert transcript.findings == []


def test_usage_chunks_azure_preamble_pings_and_keepalives_are_normal() -> None:
    preamble = {
        "choices": [],
        "created": 0,
        "id": "",
        "model": "",
        "object": "",
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
    }
    body = (
        b": OPENROUTER PROCESSING\n\n"
        + sse([preamble], done=False)
        + b"event: ping\ndata: {}\n\n"
        + sse([chunk([delta(content="ok", finish_reason="stop")]), chunk([], usage=usage(3, 1))])
    )
    transcript = read(body)
    assert transcript.findings == []
    assert transcript.choices[0].text == "ok"
    assert transcript.usage is not None and transcript.usage.total_tokens == 4
    assert transcript.events == 5


def test_n2_interleaved_choices_keep_their_own_text_and_finish_reason() -> None:
    body = sse(
        [
            chunk([delta(1, content="B1")]),
            chunk([delta(0, content="A1")]),
            chunk([delta(1, content="B2", finish_reason="length")]),
            chunk(
                [
                    delta(0, content="A2"),
                ]
            ),
            chunk([delta(0, finish_reason="stop")]),
        ]
    )
    choices = read(body).choices
    assert [(i, c.text, c.finish_reason) for i, c in choices.items()] == [
        (0, "A1A2", "stop"),
        (1, "B1B2", "length"),
    ]


def test_legacy_function_call_is_a_tool_call_and_its_finish_reason_is_tool_calls() -> None:
    body = sse(
        [
            chunk([delta() | {"delta": {"function_call": {"name": "weather", "arguments": ""}}}]),
            chunk([delta() | {"delta": {"function_call": {"arguments": '{"city": "Oslo"}'}}}]),
            chunk([delta(finish_reason="function_call")]),
        ]
    )
    choice = read(body).choices[0]
    assert (choice.finish_reason, choice.raw_finish_reason) == ("tool_calls", "function_call")
    assert [(c.name, c.arguments) for c in choice.tool_calls] == [("weather", '{"city": "Oslo"}')]


def test_missing_terminal_marker_and_finish_reason_are_findings_at_the_last_event() -> None:
    body = sse([chunk([delta(content="cut")])], done=False)
    transcript = read(body)
    assert codes(transcript) == [Code.FINISH_REASON_MISSING, Code.DONE_MISSING]
    assert all(f.position == Position(0, 0) for f in transcript.findings)


def test_error_object_in_a_200_is_error_in_stream_but_not_in_a_500() -> None:
    error = {"error": {"message": "overloaded", "code": 502}}
    body = sse([chunk([delta(content="Hel")]), error], done=False)
    in_200 = read(body, status=200)
    assert codes(in_200) == [Code.ERROR_IN_STREAM, Code.FINISH_REASON_MISSING, Code.DONE_MISSING]
    assert in_200.findings[0].position == Position(1, body.index(b'data: {"error'))
    in_500 = read(body, status=500)
    assert Code.ERROR_IN_STREAM not in codes(in_500)
    assert in_500.errors == [error["error"]]


def test_a_payload_that_is_not_json_is_a_warning_with_its_position() -> None:
    body = b'data: {"id": "x", "choices": [\n\n' + finished(
        chunk([delta(content="ok")]), reason="stop"
    )
    transcript = read(body)
    (finding,) = transcript.findings
    assert (finding.code, finding.position) == (Code.JSON_INVALID, Position(0, 0))
    assert transcript.choices[0].text == "ok"


def test_an_envelope_that_orjson_rejects_is_read_strictly_with_its_issues_at_its_event() -> None:
    text = json.dumps(chunk([delta(content="ok")]))
    body = finished(text[:-1] + ', "score": NaN}', reason="stop")
    transcript = read(body)
    (finding,) = transcript.findings
    assert (finding.code, finding.position) == (Code.NON_FINITE_NUMBER, Position(0, 0))
    assert finding.detail == "at /score"
    assert transcript.choices[0].text == "ok"


def test_a_payload_that_is_json_but_not_an_object_is_a_warning() -> None:
    body = b"data: [1, 2]\n\n" + finished(chunk([delta(content="ok")]), reason="stop")
    transcript = read(body)
    (finding,) = transcript.findings
    assert (finding.code, finding.position) == (Code.JSON_INVALID, Position(0, 0))
    assert finding.detail == "payload is not a JSON object"


def test_incomplete_final_event_and_truncated_capture_are_warnings() -> None:
    whole = finished(chunk([delta(content="ok")]), reason="stop")
    cut = whole + b'data: {"id"'
    transcript = read(cut, truncated=True)
    assert codes(transcript) == [Code.SSE_INCOMPLETE_EVENT, Code.CAPTURE_TRUNCATED]
    assert transcript.findings[0].position == Position(None, len(whole))


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),
        ("identity", lambda data: data),
        ("gzip, identity", gzip.compress),
    ],
)
def test_content_encoding_is_undone_and_bytes_count_the_recorded_body(encoding, encode) -> None:
    body = (FIXTURES / "seed.upstream.sse").read_bytes()
    recorded = encode(body)
    transcript = read(recorded, content_encoding=encoding)
    assert transcript.tool_call_count == 2
    assert transcript.findings == []
    assert transcript.bytes == len(recorded)


def test_a_cut_gzip_body_yields_the_events_it_holds() -> None:
    recorded = gzip.compress((FIXTURES / "text.upstream.sse").read_bytes())
    transcript = read(recorded[:-60], content_encoding="gzip", truncated=True)
    assert transcript.dialect == "openai.chat"
    assert transcript.events > 0
    assert transcript.choices[0].text.startswith("The night market")
    assert codes(transcript)[-2:] == [Code.SSE_INCOMPLETE_EVENT, Code.CAPTURE_TRUNCATED]


def test_an_encoding_that_cannot_be_undone_gives_an_unknown_transcript_with_a_warning() -> None:
    transcript = read(b"\x1b\x00compressed", content_encoding="br")
    assert transcript.dialect == "unknown"
    (finding,) = transcript.findings
    assert finding.code is Code.JSON_INVALID
    assert "br" in finding.detail


def test_json_body_with_bom_and_whitespace_reads_choices_messages() -> None:
    body = b"\xef\xbb\xbf\n  " + (FIXTURES / "seed.upstream.json").read_bytes()
    transcript = read(body)
    assert (transcript.dialect, transcript.streaming, transcript.events) == (
        "openai.chat",
        False,
        0,
    )
    choice = transcript.choices[0]
    assert [(c.name, c.index, c.id) for c in choice.tool_calls] == [
        ("weather", 0, "call_Wx3kP9aTq1hZ"),
        ("clock", 1, "call_Ck7mR2bLs5nY"),
    ]
    assert choice.finish_reason == "tool_calls"
    assert transcript.findings == []


def test_json_error_body_is_error_in_stream_only_with_a_2xx_status() -> None:
    body = json.dumps({"error": {"message": "bad key", "type": "invalid_request_error"}}).encode()
    assert codes(read(body, path="/v1/chat/completions", status=401)) == []
    assert codes(read(body, path="/v1/chat/completions", status=200)) == [Code.ERROR_IN_STREAM]


@pytest.mark.parametrize(
    ("path", "dialect"),
    [
        ("/v1/chat/completions?api-version=2024-10-21", "openai.chat"),
        ("/v1/messages?beta=true", "anthropic.messages"),
        ("/v1/responses", "openai.responses"),
    ],
)
def test_path_names_the_dialect_when_the_content_does_not(path: str, dialect: str) -> None:
    transcript = read(b": keep-alive\n\n", path=path)
    assert transcript.dialect == dialect
    assert codes(transcript) == [Code.DONE_MISSING]


@pytest.mark.parametrize(
    "body", [b"", b"hello world\n\n", b"data: 42\n\n", b"{not json", b'{"kind": "other"}']
)
def test_a_body_of_no_known_dialect_is_unknown_with_a_warning(body: bytes) -> None:
    transcript = read(body)
    assert transcript.dialect == "unknown"
    assert codes(transcript) == [Code.JSON_INVALID]


WELL_FORMED = [
    chunk([delta(role="assistant", content="")]),
    chunk([delta(tool_calls=[call_start(0, "call_a", "f", '{"a"')])]),
    chunk([delta(tool_calls=[{"id": "call_b", "function": {"name": "h", "arguments": "{}"}}])]),
    chunk([delta(1, tool_calls=[call_arguments(0, ": 1}")], finish_reason="tool_calls")]),
    chunk([delta() | {"delta": {"function_call": {"name": "g", "arguments": "{}"}}}]),
    chunk([delta(finish_reason="stop")], usage=usage(1, 2)),
    {"error": {"message": "m", "code": 1}},
]


def test_a_field_of_any_wrong_type_or_missing_never_breaks_the_reducer() -> None:
    for path, payloads in damaged(WELL_FORMED, removing=True):
        bodies = [sse([chunk([]), *payloads])]
        if isinstance(payloads[path[0]], dict):
            bodies.append(json.dumps({**payloads[path[0]], "object": "chat.completion"}).encode())
        for body in bodies:
            assert_survives(read(body), "openai.chat")
