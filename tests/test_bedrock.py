"""Amazon Bedrock: Converse streams and bodies, Anthropic on InvokeModel, alone and against a Chat
downstream.

Event streams are written by `calltap.fakes.eventstream` from the shapes in
`tests/fixtures/bedrock/` (botocore's `bedrock-runtime` model; README.md there says where each
comes from).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.compare import compare
from calltap.dialects import bedrock, bedrock_anthropic
from calltap.eventstream import EventStreamDecoder
from calltap.fakes import eventstream as wire
from calltap.transcript import Position
from dialect_helpers import assert_survives, clean_choice, codes, damaged, read, token_counts
from fixtures import chat_stream as chat
from fixtures.anthropic import stream as anthropic
from fixtures.bedrock.converse_stream import THROTTLED, TOOL_USE, TOOL_USE_ID

STREAM_PATH = "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/converse-stream"
INVOKE_STREAM_PATH = "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/invoke-with-response-stream"
CHAT_IDS = ["call_Wq7Lz2Nc4Yb8Tr1Hx5Kd", "call_Fp3Jm6Vs9Qa2Ue4Gn8Rb"]


def converse(events: list[tuple[str, Any]]) -> bytes:
    return b"".join(wire.event(kind, body) for kind, body in events)


def replaced(kind: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """TOOL_USE with the body of its `kind` event replaced."""
    return [(k, body if k == kind else b) for k, b in TOOL_USE]


def test_the_tool_use_stream_reads_text_the_call_reason_and_the_usage_after_the_stop() -> None:
    transcript = read(converse(TOOL_USE))
    choice = clean_choice(transcript, "bedrock.converse", streaming=True)
    assert choice.text == "I'll check the weather in Paris for you."
    [only] = choice.tool_calls
    assert (only.id, only.name, only.index, only.fragments) == (TOOL_USE_ID, "get_weather", 1, 6)
    assert only.decoded.value == {"location": "Paris, FR", "unit": "celsius"}
    assert (choice.raw_finish_reason, choice.finish_reason) == ("tool_use", "tool_calls")
    assert token_counts(transcript) == (412, 58, 470)
    assert transcript.end_position == choice.finish_position
    assert transcript.events == len(TOOL_USE)


def test_events_after_the_metadata_are_counted_but_not_read() -> None:
    later = ("contentBlockDelta", {"delta": {"text": " More."}, "contentBlockIndex": 0})
    transcript = read(converse([*TOOL_USE, later]))
    assert transcript.choices[0].text == "I'll check the weather in Paris for you."
    assert transcript.events == len(TOOL_USE) + 1


@pytest.mark.parametrize(
    ("reason", "normalized"),
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("tool_use", "tool_calls"),
     ("max_tokens", "length"), ("guardrail_intervened", "content_filter"),
     ("content_filtered", "content_filter"), ("something_new", "something_new")],
)
def test_stop_reasons_are_normalized(reason: str, normalized: str) -> None:
    choice = read(converse(replaced("messageStop", {"stopReason": reason}))).choices[0]
    assert choice.finish_reason == normalized


def test_cache_tokens_count_in_the_prompt() -> None:
    usage = {"inputTokens": 12, "outputTokens": 58, "totalTokens": 470,
             "cacheReadInputTokens": 300, "cacheWriteInputTokens": 100}
    transcript = read(converse(replaced("metadata", {"usage": usage})))
    assert token_counts(transcript) == (412, 58, 470)


def test_an_exception_message_is_an_error_in_a_200() -> None:
    body = converse(TOOL_USE[:3]) + wire.exception(*THROTTLED)
    transcript = read(body, status=200)
    assert transcript.errors == [{"type": "throttlingException", "message": THROTTLED[1]}]
    assert codes(transcript) == [Code.ERROR_IN_STREAM, Code.FINISH_REASON_MISSING,
                                 Code.DONE_MISSING]


def test_a_broken_message_is_frame_invalid_and_nothing_past_it_is_read() -> None:
    body = bytearray(converse(TOOL_USE))
    third = len(converse(TOOL_USE[:2]))
    body[third + 20] ^= 0x01
    transcript = read(bytes(body))
    assert transcript.dialect == "bedrock.converse"
    assert transcript.choices[0].text == "I'll"
    assert transcript.findings[-1].code is Code.FRAME_INVALID
    assert transcript.findings[-1].position == Position(None, third)
    assert Code.DONE_MISSING in codes(transcript)


def test_a_cut_message_is_an_incomplete_event() -> None:
    body = converse(TOOL_USE)[:-10]
    assert codes(read(body)) == [Code.SSE_INCOMPLETE_EVENT]


def test_a_second_message_start_after_content_is_a_restart() -> None:
    events = [*TOOL_USE[:3], TOOL_USE[0], *TOOL_USE[1:]]
    transcript = read(converse(events))
    [restart] = [f for f in transcript.findings if f.code is Code.STREAM_RESTARTED]
    assert (restart.count, restart.position.event) == (1, 3)


def test_a_tool_block_never_stopped_is_a_cut_call() -> None:
    events = [event for event in TOOL_USE
              if event != ("contentBlockStop", {"contentBlockIndex": 1})]
    assert Code.TOOL_ARGUMENTS_INVALID in codes(read(converse(events)))


CONVERSE_BODY = {
    "output": {"message": {"role": "assistant", "content": [
        {"text": "I'll check the weather in Paris for you."},
        {"toolUse": {"toolUseId": TOOL_USE_ID, "name": "get_weather",
                     "input": {"location": "Paris, FR", "unit": "celsius"}}},
    ]}},
    "stopReason": "tool_use",
    "usage": {"inputTokens": 412, "outputTokens": 58, "totalTokens": 470},
    "metrics": {"latencyMs": 1418},
}


def test_a_converse_body_reads_like_its_stream() -> None:
    whole = read(json.dumps(CONVERSE_BODY).encode())
    streamed = read(converse(TOOL_USE))
    clean_choice(whole, "bedrock.converse", streaming=False)
    comparison = compare(streamed, whole)
    assert (comparison.verdict, comparison.findings) == ("equal", [])


@examples(60, deadline=None)
@given(cuts=st.lists(st.integers(0, 2600), max_size=8))
def test_any_split_of_the_bytes_gives_the_same_transcript(cuts: list[int]) -> None:
    body = converse(TOOL_USE)
    decoder = EventStreamDecoder()
    points = sorted(set(cuts))
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    transcript = bedrock.reduce_events(m for piece in pieces for m in decoder.feed(piece))
    transcript.bytes = len(body)
    assert transcript == read(body)


def test_a_field_of_any_wrong_type_never_breaks_the_reducer() -> None:
    bodies = [body for _, body in TOOL_USE[7:]]
    for _, damaged_bodies in damaged(bodies, depth=2, removing=True):
        events = [*TOOL_USE[:7], *zip([k for k, _ in TOOL_USE[7:]], damaged_bodies, strict=True)]
        assert_survives(read(converse(events), path=STREAM_PATH), "bedrock.converse")
    for _, [body] in damaged([CONVERSE_BODY], depth=2, removing=True):
        assert_survives(read(json.dumps(body).encode(), dialect="bedrock.converse"),
                        "bedrock.converse")


# Anthropic Messages on InvokeModelWithResponseStream.


def anthropic_events() -> list[dict[str, Any]]:
    return [anthropic.message_start(72), *anthropic.text_block(0, ["I'll check", " both."]),
            *anthropic.tool_block(1, "toolu_a", "get_weather", ['{"city":', ' "Paris"}']),
            anthropic.message_delta("tool_use", 41), anthropic.STOP]


def test_chunks_read_as_the_anthropic_stream_they_carry() -> None:
    wrapped = read(b"".join(wire.chunk(event) for event in anthropic_events()))
    direct = read(anthropic.sse(anthropic_events()))
    assert (wrapped.dialect, wrapped.framing) == ("anthropic.messages", "eventstream")
    assert (direct.dialect, direct.framing) == ("anthropic.messages", "sse")
    assert wrapped.findings == []
    comparison = compare(direct, wrapped)
    assert (comparison.verdict, comparison.findings) == ("equal", [])
    start = len(b"".join(wire.chunk(event) for event in anthropic_events()[:5]))
    assert wrapped.choices[0].tool_calls[0].position == Position(5, start)


def test_an_exception_in_an_invoke_stream_is_an_error_and_a_bad_chunk_is_invalid() -> None:
    events = anthropic_events()
    bad = wire.event("chunk", {"bytes": base64.b64encode(b"{oops").decode()})
    body = b"".join(wire.chunk(event) for event in events[:3]) + bad + wire.exception(*THROTTLED)
    transcript = read(body, path=INVOKE_STREAM_PATH, status=200)
    assert transcript.errors == [{"type": "throttlingException", "message": THROTTLED[1]}]
    assert codes(transcript)[:2] == [Code.JSON_INVALID, Code.ERROR_IN_STREAM]


def test_an_invoke_body_is_an_anthropic_message() -> None:
    body = {"id": "msg_bdrk_01", "type": "message", "role": "assistant", "model": "claude",
            "content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1}}
    assert read(json.dumps(body).encode()).dialect == "anthropic.messages"
    forced = read(json.dumps(body).encode(), dialect="anthropic.messages")
    assert clean_choice(forced, "anthropic.messages", streaming=False).text == "Hi"


# Against a Chat Completions downstream (LiteLLM's `bedrock/converse` provider).


def chat_downstream(*, arguments: str = '{"location": "Paris, FR", "unit": "celsius"}',
                    calls: int = 1, finish_reason: str = "tool_calls") -> bytes:
    return chat.tool_call_stream(
        [("get_weather", arguments)][:calls], ids=CHAT_IDS[:calls], indexes=[0][:calls],
        cuts=[(9, 20)][:calls], text_parts=["I'll check the weather", " in Paris for you."],
        finish_reason=finish_reason, tokens=(412, 58),
    )


def compared(downstream: bytes, upstream: bytes | None = None) -> tuple[str, set[Code]]:
    """The verdict and codes, but for the cosmetic remap of the call's id and index."""
    comparison = compare(read(upstream or converse(TOOL_USE)), read(downstream))
    found = {finding.code for finding in comparison.findings}
    return comparison.verdict, found - {Code.TOOL_CALL_IDS_REMAPPED}


def test_a_faithful_translation_is_equal() -> None:
    assert compared(chat_downstream()) == ("equal", set())


def test_a_dropped_call_is_found() -> None:
    assert compared(chat_downstream(calls=0, finish_reason="stop")) == (
        "diverged",
        {Code.TOOL_CALLS_DROPPED, Code.TOOL_CALL_SET_CHANGED, Code.FINISH_REASON_CHANGED},
    )


def test_a_number_turned_string_is_a_changed_call() -> None:
    upstream = converse([
        *TOOL_USE[:10],
        ("contentBlockDelta", {"delta": {"toolUse": {"input": '{"days": 5}'}},
                               "contentBlockIndex": 1}),
        *TOOL_USE[-4:],
    ])
    assert compared(chat_downstream(arguments='{"days": "5"}'), upstream) == (
        "diverged", {Code.TOOL_CALL_ARGUMENTS_CHANGED, Code.TOOL_CALL_SET_CHANGED})


def test_a_lost_finish_reason_is_missing() -> None:
    body = chat_downstream().replace(b'"finish_reason":"tool_calls"', b'"finish_reason":null')
    assert compared(body) == ("diverged", {Code.FINISH_REASON_MISSING})


def test_an_exception_not_forwarded_is_dropped() -> None:
    upstream = converse(TOOL_USE[:7]) + wire.exception(*THROTTLED)
    downstream = chat.sse([chat.chunk([chat.delta(content="I'll check the weather in Paris for "
                                                  "you.", finish_reason="stop")])])
    verdict, found = compared(downstream, upstream)
    assert verdict == "diverged"
    assert Code.ERROR_DROPPED in found


def test_a_converse_error_body_is_read_by_the_dialect_its_path_names() -> None:
    """Bedrock's error bodies carry `message`, not `error`: the error status lets the path
    name the dialect."""
    body = b'{"message": "Malformed input request, please reformat your input and try again."}'
    transcript = read(body, path="/model/m/converse", status=400)
    assert transcript.dialect == "bedrock.converse"
    assert transcript.errors and codes(transcript) == []
    assert read(body, path="/model/m/converse", status=200).dialect == "unknown"


def starts(events: list[tuple[str, Any]]) -> list[int]:
    """The byte offset of each message of `converse(events)`."""
    return [len(converse(events[:n])) for n in range(len(events))]


def test_positions_point_at_the_messages_that_carry_each_fact() -> None:
    at = starts(TOOL_USE)
    transcript = read(converse(TOOL_USE))
    choice = transcript.choices[0]
    assert choice.position == Position(0, 0)
    assert choice.tool_calls[0].position == Position(8, at[8])
    assert choice.finish_position == Position(15, at[15])
    assert transcript.usage_position == Position(16, at[16])


def test_a_call_whose_block_start_was_lost_begins_at_its_first_input() -> None:
    events = [event for event in TOOL_USE if event[0] != "contentBlockStart"]
    transcript = read(converse(events))
    [call] = transcript.choices[0].tool_calls
    assert (call.index, call.id, call.position) == (1, None, Position(8, starts(events)[8]))
    assert call.decoded.value == {"location": "Paris, FR", "unit": "celsius"}


def test_an_error_message_is_an_error_with_its_code_and_text() -> None:
    headers = {":message-type": "error", ":error-code": "InternalFailure",
               ":error-message": "The server failed"}
    body = converse(TOOL_USE[:3]) + wire.encode(headers)
    transcript = read(body, status=200)
    assert transcript.errors == [{"code": "InternalFailure", "message": "The server failed"}]
    [error] = [f for f in transcript.findings if f.code is Code.ERROR_IN_STREAM]
    assert error.position == Position(3, len(converse(TOOL_USE[:3])))


@pytest.mark.parametrize(
    ("usage", "counts"),
    [
        ({"inputTokens": 12, "outputTokens": 58}, (12, 58, 70)),
        ({"cacheReadInputTokens": 300, "outputTokens": 58, "totalTokens": 1}, (300, 58, 1)),
        ({"outputTokens": 58}, (None, 58, None)),
        ({"inputTokens": 12}, (12, None, None)),
        ({"totalTokens": 9, "inputTokens": "12"}, (None, None, 9)),
        ({"inputTokens": 12, "outputTokens": "58"}, (12, None, None)),
    ],
)
def test_usage_counts_what_is_given_and_sums_a_missing_total(
    usage: dict[str, Any], counts: tuple[int | None, ...]
) -> None:
    assert token_counts(read(converse(replaced("metadata", {"usage": usage})))) == counts


def test_usage_without_any_count_is_no_usage() -> None:
    transcript = read(converse(replaced("metadata", {"usage": {"inputTokens": "1"}})))
    assert (transcript.usage, transcript.usage_position) == (None, None)


def test_a_converse_body_places_its_calls_and_its_error_at_the_body() -> None:
    whole = read(json.dumps(CONVERSE_BODY).encode())
    assert whole.choices[0].tool_calls[0].position == Position(None, 0)
    error = {"message": "Malformed input request"}
    failed = read(json.dumps(error).encode(), dialect="bedrock.converse", status=200)
    assert failed.errors == [error]
    assert [(f.code, f.position) for f in failed.findings] == [
        (Code.ERROR_IN_STREAM, Position(None, 0))]
    with_output = read(json.dumps({**CONVERSE_BODY, "message": "x"}).encode(), status=200)
    assert with_output.errors == []


@pytest.mark.parametrize("dropped", [1, 2, 3])
def test_without_message_start_the_choice_begins_at_its_first_content(dropped: int) -> None:
    """Dropping the start, then the text too, then the call's block start as well."""
    kinds = ["messageStart", "contentBlockDelta:text", "contentBlockStart"][:dropped]

    def kind_of(event: tuple[str, Any]) -> str:
        return event[0] + (":text" if "text" in event[1].get("delta", {}) else "")

    events = [event for event in TOOL_USE if kind_of(event) not in kinds]
    first = 0 if dropped == 1 else 1  # after the text block's stop
    assert read(converse(events)).choices[0].position == Position(first, starts(events)[first])


@pytest.mark.parametrize(
    "opening",
    [("contentBlockDelta", {"delta": {"text": ""}, "contentBlockIndex": 0}),
     ("contentBlockStart", {"start": {}, "contentBlockIndex": 0})],
)
def test_a_block_begun_then_a_second_message_start_is_a_restart(
    opening: tuple[str, Any],
) -> None:
    events = [TOOL_USE[0], opening, *TOOL_USE]
    [restart] = [f for f in read(converse(events)).findings if f.code is Code.STREAM_RESTARTED]
    assert restart.position == Position(2, starts(events)[2])


def test_a_payload_that_is_not_json_is_invalid_and_the_stream_goes_on() -> None:
    bad = wire.encode({":event-type": "contentBlockDelta", ":message-type": "event"}, b"{oops")
    body = converse(TOOL_USE[:2]) + bad + converse(TOOL_USE[2:])
    transcript = read(body)
    assert [(f.code, f.position) for f in transcript.findings] == [
        (Code.JSON_INVALID, Position(2, len(converse(TOOL_USE[:2]))))]
    assert transcript.choices[0].text == "I'll check the weather in Paris for you."
    assert token_counts(transcript) == (412, 58, 470)


def test_messages_without_a_message_type_are_events() -> None:
    body = b"".join(wire.encode({":event-type": kind}, json.dumps(payload).encode())
                    for kind, payload in TOOL_USE)
    assert read(body).choices[0].finish_reason == "tool_calls"


def test_an_exception_without_a_json_message_and_one_outside_a_2xx() -> None:
    garbled = wire.encode({":message-type": "exception", ":exception-type": "x"}, b"<html>")
    assert read(converse(TOOL_USE[:3]) + garbled).errors == [{"type": "x", "message": None}]
    refused = read(converse(TOOL_USE[:3]) + wire.exception(*THROTTLED), status=429)
    assert len(refused.errors) == 1
    assert Code.ERROR_IN_STREAM not in codes(refused)


def test_the_usage_after_the_stop_is_read_past_other_messages_and_none_ends_it_early() -> None:
    stray = ("contentBlockStop", {"contentBlockIndex": 1})
    after = [*TOOL_USE[:-1], stray, TOOL_USE[-1]]
    assert token_counts(read(converse(after))) == (412, 58, 470)
    early = {"usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}}
    before = [*TOOL_USE[:-2], ("metadata", early), *TOOL_USE[-2:]]
    transcript = read(converse(before))
    assert transcript.choices[0].finish_reason == "tool_calls"
    assert token_counts(transcript) == (412, 58, 470)


def test_a_stop_reason_that_is_not_a_string_is_kept_as_written() -> None:
    choice = read(converse(replaced("messageStop", {"stopReason": 5}))).choices[0]
    assert (choice.raw_finish_reason, choice.finish_reason) == ("5", "5")


def test_only_an_event_or_a_body_with_its_output_message_and_stop_reason_is_converse() -> None:
    assert bedrock.sniff({"messageStop": {"stopReason": "end_turn"}})
    assert bedrock.sniff(CONVERSE_BODY)
    for payload in ([CONVERSE_BODY], "messageStop", {"stopReason": "end_turn", "x": 1},
                    {"output": {"text": "Hi"}, "stopReason": "end_turn"}):
        assert not bedrock.sniff(payload)


def test_an_invoke_stream_reads_its_chunks_past_other_messages_and_unreadable_chunks() -> None:
    events = anthropic_events()
    other = wire.event("initial-response", {})
    array = wire.encode({":event-type": "chunk", ":message-type": "event"}, b"[1]")
    body = (b"".join(wire.chunk(event) for event in events[:3]) + other + array
            + b"".join(wire.chunk(event) for event in events[3:]))
    transcript = read(body, path=INVOKE_STREAM_PATH)
    assert codes(transcript) == [Code.JSON_INVALID]
    assert transcript.findings[0].position.event == 4
    assert compare(read(anthropic.sse(events)), transcript).verdict == "inconclusive"
    assert transcript.choices[0].tool_calls[0].decoded.value == {"city": "Paris"}


def test_only_a_lone_chunk_with_bytes_is_an_invoke_stream_event() -> None:
    assert bedrock_anthropic.sniff({"chunk": {"bytes": ""}})
    for payload in ({"chunk": {"bytes": ""}, "x": 1}, [1], {"chunk": "x"}, {"chunk": {}}):
        assert not bedrock_anthropic.sniff(payload)


def test_a_chunk_whose_bytes_are_not_strict_base64_is_unreadable() -> None:
    events = anthropic_events()
    encoded = base64.b64encode(json.dumps(events[1]).encode()).decode()
    loose = wire.event("chunk", {"bytes": encoded[:8] + "!" + encoded[8:]})
    body = wire.chunk(events[0]) + loose + b"".join(wire.chunk(event) for event in events[2:])
    assert codes(read(body, path=INVOKE_STREAM_PATH))[0] == Code.JSON_INVALID


def test_a_stream_that_opens_with_its_stop_begins_there() -> None:
    transcript = read(converse(TOOL_USE[-2:]))
    assert transcript.choices[0].position == Position(0, 0)
