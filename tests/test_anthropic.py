"""The Anthropic Messages reducer: what a careful client makes of each stream and JSON body."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.compare import compare
from calltap.dialects import anthropic, transcribe
from calltap.transcript import Capture, Position
from dialect_helpers import (
    ARGUMENTS,
    CUTS,
    assert_survives,
    clean_choice,
    codes,
    damaged,
    read,
    record_starts,
    token_counts,
)
from fixtures.anthropic.stream import (
    PING,
    STOP,
    error,
    message_delta,
    message_start,
    split,
    sse,
    text_block,
    tool_block,
)

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"


def message(*blocks: list[dict], stop_reason: str = "tool_use", tokens: int = 40) -> bytes:
    events = [message_start(), PING]
    for block in blocks:
        events += block
    return sse([*events, message_delta(stop_reason, tokens), STOP])


def test_text_block_then_two_tool_blocks_reduce_to_text_and_two_calls() -> None:
    body = (FIXTURES / "tools.upstream.sse").read_bytes()
    transcript = read(body)
    choice = clean_choice(transcript, "anthropic.messages", streaming=True)
    assert (transcript.events, transcript.terminal_seen) == (22, True)
    assert choice.text == "I'll check the weather and look for museums at once."
    assert (choice.finish_reason, choice.raw_finish_reason) == ("tool_calls", "tool_use")
    assert [(c.name, c.id, c.index, c.fragments) for c in choice.tool_calls] == [
        ("get_weather", "toolu_01A09q90qw90lq917835lq9", 1, 5),
        ("find_places", "toolu_01B7n2mWk8e4kJqYhVz3Rt5P", 2, 6),
    ]
    assert choice.tool_calls[1].decoded.value == {
        "city": "Lisbon",
        "kind": "museum",
        "open_now": True,
    }
    assert token_counts(transcript) == (472, 112, 584)
    assert transcript.end_position == Position(21, len(body) - len(sse([STOP])))


@pytest.mark.parametrize(
    ("stop_reason", "normalized"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "length"),
        ("model_context_window_exceeded", "length"),
        ("some_future_reason", "some_future_reason"),
    ],
)
def test_stop_reasons_are_normalized(stop_reason: str, normalized: str) -> None:
    choice = read(message(text_block(0, ["Hi"]), stop_reason=stop_reason)).choices[0]
    assert (choice.finish_reason, choice.raw_finish_reason) == (normalized, stop_reason)


def test_prompt_tokens_include_the_cache_and_the_last_output_count_wins() -> None:
    start = message_start(input_tokens=10)
    start["message"]["usage"] |= {"cache_creation_input_tokens": 200, "cache_read_input_tokens": 3}
    first = message_delta("end_turn", 7)
    last = message_delta("end_turn", 31)
    transcript = read(sse([start, *text_block(0, ["Hi"]), first, last, STOP]))
    assert token_counts(transcript) == (213, 31, 244)
    assert transcript.usage_position == Position(5, transcript.usage_position.byte)


def test_thinking_and_signature_are_not_text_and_server_tools_are_not_calls() -> None:
    thinking = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "The user wants"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"},
        },
        {"type": "content_block_stop", "index": 0},
    ]
    server = [
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"},
        },
        {"type": "content_block_stop", "index": 1},
    ]
    transcript = read(message(thinking, server, text_block(2, ["Done."]), stop_reason="end_turn"))
    choice = transcript.choices[0]
    assert choice.text == "Done."
    assert choice.tool_calls == []
    assert transcript.findings == []


def test_a_tool_block_never_stopped_is_one_invalid_arguments_finding() -> None:
    cut = tool_block(1, "toolu_a", "write_file", ['{"path": "a.md", "con'], stopped=False)
    transcript = read(message(text_block(0, ["Writing."]), cut, stop_reason="max_tokens"))
    assert codes(transcript) == [Code.TOOL_ARGUMENTS_INVALID]
    assert transcript.findings[0].position == transcript.choices[0].tool_calls[0].position


@pytest.mark.parametrize("fragments", [[], ['{"path": "a.md"}']])
def test_a_tool_block_never_stopped_is_invalid_even_when_what_arrived_decodes(
    fragments: list[str],
) -> None:
    cut = tool_block(0, "toolu_a", "write_file", fragments, stopped=False)
    transcript = read(message(cut, stop_reason="max_tokens"))
    assert codes(transcript) == [Code.TOOL_ARGUMENTS_INVALID]
    assert "never stopped" in transcript.findings[0].detail


def test_a_tool_block_without_fragments_takes_its_start_input() -> None:
    block = tool_block(0, "toolu_a", "lookup", [])
    block[0]["content_block"]["input"] = {"q": "Belém", "n": 3}
    del block[1]
    call = read(message(block)).choices[0].tool_calls[0]
    assert call.arguments == '{"q":"Belém","n":3}'
    assert call.decoded.value == {"q": "Belém", "n": 3}


def test_a_start_input_that_is_not_an_object_is_no_arguments() -> None:
    block = tool_block(0, "toolu_a", "lookup", [])
    block[0]["content_block"]["input"] = '{"q": 2}'
    del block[1]
    assert read(message(block)).choices[0].tool_calls[0].arguments == ""


def test_events_after_message_stop_are_counted_but_not_read() -> None:
    late = tool_block(1, "toolu_late", "late", ["{}"])
    body = message(text_block(0, ["Hi"]), stop_reason="end_turn") + sse(late)
    transcript = read(body)
    assert transcript.events == 7 + len(late)
    assert transcript.choices[0].tool_calls == []
    assert transcript.findings == []


def test_an_error_event_in_a_200_is_error_in_stream_but_not_in_a_529() -> None:
    body = sse([message_start(), PING, *text_block(0, ["Hel"])[:2], error()])
    in_200 = read(body, status=200)
    assert codes(in_200) == [Code.ERROR_IN_STREAM, Code.FINISH_REASON_MISSING, Code.DONE_MISSING]
    assert in_200.findings[0].detail == "overloaded_error: Overloaded"
    in_529 = read(body, status=529)
    assert Code.ERROR_IN_STREAM not in codes(in_529)
    assert in_529.errors == [{"type": "overloaded_error", "message": "Overloaded"}]


def test_a_stream_of_only_an_error_is_anthropic_with_no_choice() -> None:
    transcript = read(sse([error()]))
    assert transcript.dialect == "anthropic.messages"
    assert transcript.choices == {}
    assert codes(transcript) == [Code.ERROR_IN_STREAM, Code.DONE_MISSING]


def test_missing_message_delta_and_message_stop_are_findings() -> None:
    transcript = read(sse([message_start(), *text_block(0, ["Hi"])]))
    assert codes(transcript) == [Code.FINISH_REASON_MISSING, Code.DONE_MISSING]


def test_payload_type_decides_even_without_event_lines() -> None:
    with_lines = message(text_block(0, ["Hi", " there"]), stop_reason="end_turn")
    without = b"".join(
        line + b"\n" for line in with_lines.split(b"\n") if not line.startswith(b"event:")
    )
    stripped, kept = read(without).choices[0], read(with_lines).choices[0]
    assert (
        (stripped.text, stripped.finish_reason)
        == (kept.text, kept.finish_reason)
        == (
            "Hi there",
            "stop",
        )
    )


def test_json_body_reads_text_and_tool_use_inputs_as_arguments() -> None:
    transcript = read((FIXTURES / "tools.faithful.json").read_bytes())
    choice = clean_choice(transcript, "anthropic.messages", streaming=False)
    assert choice.finish_reason == "tool_calls"
    assert [(c.name, c.index, c.id) for c in choice.tool_calls] == [
        ("get_weather", 1, "toolu_01A09q90qw90lq917835lq9"),
        ("find_places", 2, "toolu_01B7n2mWk8e4kJqYhVz3Rt5P"),
    ]
    assert json.loads(choice.tool_calls[1].arguments) == {
        "open_now": True,
        "kind": "museum",
        "city": "Lisbon",
    }
    assert token_counts(transcript) == (472, 112, 584)


def test_json_input_with_an_unsafe_integer_still_compares_and_warns() -> None:
    body = {
        "type": "message",
        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"id": 2**53 + 1}}],
        "stop_reason": "tool_use",
    }
    transcript = read(json.dumps(body).encode())
    assert Code.UNSAFE_INTEGER in codes(transcript)
    assert transcript.choices[0].tool_calls[0].decoded is not None


def test_json_input_with_an_integer_too_long_for_int_is_the_infinity_a_client_reads() -> None:
    digits = "9" * 5000
    body = (
        '{"type": "message", "stop_reason": "tool_use", "content": [{"type": "tool_use", '
        f'"id": "t", "name": "f", "input": {{"n": {digits}, "m": -{digits}}}}}]}}'
    )
    transcript = read(body.encode())
    assert transcript.choices[0].tool_calls[0].arguments == '{"n":Infinity,"m":-Infinity}'
    assert Code.UNSAFE_INTEGER in codes(transcript)


def test_json_error_body_is_error_in_stream_only_with_a_2xx_status() -> None:
    body = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}})
    assert codes(read(body.encode(), status=429)) == []
    in_200 = read(body.encode(), status=200)
    assert codes(in_200) == [Code.ERROR_IN_STREAM]
    assert in_200.choices == {}


@examples(60, deadline=None)
@given(arguments=ARGUMENTS, cuts=CUTS, pings=st.booleans())
def test_any_re_chunking_of_the_fragments_compares_equal(
    arguments: dict, cuts: list[int], pings: bool
) -> None:
    text = json.dumps(arguments)
    reference = message(tool_block(0, "toolu_a", "f", [text]))
    block = tool_block(0, "toolu_a", "f", split(text, cuts))
    if pings:
        block.insert(1, PING)
    rechunked = message(block)
    comparison = compare(read(reference), read(rechunked))
    assert comparison.verdict == "equal"
    assert comparison.findings == []
    assert read(rechunked).choices[0].tool_calls[0].decoded.value == arguments


WELL_FORMED = [
    message_start(),
    *text_block(0, ["Hi"]),
    *tool_block(1, "toolu_a", "f", ['{"a":', " 1}"]),
    message_delta("tool_use", 9),
    error(),
    STOP,
]


def test_a_field_of_any_wrong_type_never_breaks_the_reducer() -> None:
    for _, payloads in damaged(WELL_FORMED, depth=2):
        assert_survives(read(sse(payloads), path="/v1/messages"), "anthropic.messages")
        whole = json.dumps(payloads[0]["message"]).encode()
        assert_survives(read(whole, dialect="anthropic.messages"), "anthropic.messages")



def test_positions_point_at_the_events_that_carry_each_fact() -> None:
    payloads = [message_start(), *text_block(0, ["Hi"]), *tool_block(1, "toolu_a", "f", ["{}"]),
                error(), message_delta("tool_use", 40), STOP]
    body = sse(payloads)
    at = record_starts(body, b"\n\n")
    transcript = read(body, status=200)
    choice = transcript.choices[0]
    assert choice.position == Position(0, 0)
    assert choice.tool_calls[0].position == Position(4, at[4])
    assert choice.finish_position == transcript.usage_position == Position(9, at[9])
    assert [(f.code, f.position) for f in transcript.findings] == [
        (Code.ERROR_IN_STREAM, Position(8, at[8]))]


def test_a_message_start_snapshot_gives_its_stop_reason_and_usage_at_its_event() -> None:
    start = message_start()
    start["message"].update(content=[{"type": "text", "text": "Hi"}], stop_reason="end_turn")
    start["message"]["usage"] = {"input_tokens": 7}
    transcript = read(sse([start, STOP]))
    choice = transcript.choices[0]
    assert (choice.text, choice.finish_reason, choice.finish_position) == (
        "Hi", "stop", Position(0, 0))
    assert (token_counts(transcript), transcript.usage_position) == ((7, None, None),
                                                                     Position(0, 0))


@pytest.mark.parametrize(
    "first",
    [
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        message_delta("end_turn", 3),
        {"type": "message_start", "message": "junk"},
    ],
)
def test_a_stream_cut_of_its_message_start_begins_at_its_first_event(first: dict) -> None:
    body = sse([PING, first, message_delta("end_turn", 3), STOP])
    event_starts = record_starts(body, b"\n\n")
    assert read(body, path="/v1/messages").choices[0].position == Position(1, event_starts[1])


def test_a_fragment_of_a_block_never_started_is_a_call_at_its_index_and_event() -> None:
    stray = {"type": "content_block_delta", "index": 2,
             "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'}}
    body = message(text_block(0, ["Hi"]), [stray, {"type": "content_block_stop", "index": 2}])
    [call] = read(body).choices[0].tool_calls
    assert (call.index, call.position) == (2, Position(5, record_starts(body, b"\n\n")[5]))
    assert call.decoded.value == {"a": 1}


def test_an_empty_delta_then_a_second_message_start_is_a_restart() -> None:
    empty = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ""}}
    body = sse([message_start(), empty, message_start(), message_delta("end_turn", 1), STOP])
    assert Code.STREAM_RESTARTED in codes(read(body))


def test_a_json_body_is_read_by_its_type_or_its_content_and_keeps_its_error_whole() -> None:
    typed = read(json.dumps({"type": "message", "stop_reason": "end_turn"}).encode(),
                 dialect="anthropic.messages")
    assert typed.choices[0].finish_reason == "stop"
    untyped = read(json.dumps({"content": [{"type": "text", "text": "Hi"}]}).encode(),
                   dialect="anthropic.messages")
    assert untyped.choices[0].text == "Hi"
    failure = {"type": "api_error", "message": "Internal server error"}
    failed = read(json.dumps({"type": "error", "error": failure}).encode(),
                  dialect="anthropic.messages", status=200)
    assert failed.errors == [failure]
    assert [(f.code, f.position) for f in failed.findings] == [
        (Code.ERROR_IN_STREAM, Position(None, 0))]


def test_payload_warnings_and_non_objects_are_placed_at_their_events_and_the_rest_read() -> None:
    body = sse([message_start(), *text_block(0, ["Hi"])])
    at = len(body)
    body += b'event: ping\ndata: {"type": "ping", "x": NaN}\n\n'
    second = len(body)
    body += b"event: ping\ndata: [1]\n\n"
    third = len(body)
    body += b"event: ping\ndata: {oops\n\n"
    body += sse([message_delta("end_turn", 3), STOP])
    transcript = read(body)
    found = [(f.code, f.position) for f in transcript.findings]
    assert found == [(Code.NON_FINITE_NUMBER, Position(4, at)),
                     (Code.JSON_INVALID, Position(5, second)),
                     (Code.JSON_INVALID, Position(6, third))]
    assert transcript.findings[1].detail == "payload is not a JSON object"
    assert transcript.findings[2].detail
    choice = transcript.choices[0]
    assert (choice.index, choice.text, choice.finish_reason) == (0, "Hi", "stop")


def test_a_payload_without_a_type_takes_its_event_line() -> None:
    untyped = b'event: message_delta\ndata: {"delta": {"stop_reason": "end_turn"}}\n\n'
    body = sse([message_start(), *text_block(0, ["Hi"])]) + untyped + sse([STOP])
    assert read(body).choices[0].finish_reason == "stop"


def test_a_cut_block_is_flagged_on_choice_0_with_its_index() -> None:
    cut_block = tool_block(1, "toolu_a", "f", ['{"a": 1}'], stopped=False)
    body = message(text_block(0, ["Hi"]), cut_block)
    [cut] = [f for f in read(body).findings if f.code is Code.TOOL_ARGUMENTS_INVALID]
    assert cut.choice == 0
    assert "tool_use block 1 never stopped" in (cut.detail or "")


def test_an_error_event_with_a_sequence_number_is_responses_not_messages() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "m"}}
    assert anthropic.sniff(error) is True
    assert anthropic.sniff({**error, "sequence_number": 1}) is False
    assert anthropic.sniff({"type": "error", "error": "m"}) is False
    assert anthropic.sniff({"type": "response.created"}) is False
    body = f"data: {json.dumps({**error, 'sequence_number': 1})}\n\n".encode()
    assert transcribe(Capture(body)).dialect == "openai.responses"
