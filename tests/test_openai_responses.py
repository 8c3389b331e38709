"""The OpenAI Responses reducer: what a careful client makes of each stream and JSON body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.compare import compare
from calltap.dialects import openai_responses
from calltap.transcript import Finding, Position
from dialect_helpers import (
    ARGUMENTS,
    CUTS,
    assert_survives,
    clean_choice,
    codes,
    damaged,
    read,
    record_starts,
    split,
    token_counts,
)
from fixtures.openai_responses.stream import (
    error_event,
    function_call,
    function_call_item,
    message,
    message_item,
    opening,
    response,
    sse,
    usage,
)

FIXTURES = Path(__file__).parent / "fixtures" / "openai_responses"


def completed(*items: list[dict], status: str = "completed", **terminal: Any) -> bytes:
    events = opening()
    for item in items:
        events += item
    return sse([*events, {"type": f"response.{status}", "response": response(status, **terminal)}])


def call(index: int, fragments: list[str], **options: Any) -> list[dict]:
    return function_call_item(index, f"fc_{index}", f"call_{index}", "f", fragments, **options)


def test_two_function_call_items_reduce_to_two_calls_with_usage() -> None:
    transcript = read((FIXTURES / "tools.upstream.sse").read_bytes())
    choice = clean_choice(transcript, "openai.responses", streaming=True)
    assert transcript.terminal_seen
    assert (choice.finish_reason, choice.raw_finish_reason) == ("tool_calls", "completed")
    assert [(c.name, c.id, c.index, c.fragments) for c in choice.tool_calls] == [
        ("get_weather", "call_Wq7Lz2Nc4Yb8Tr1Hx5Kd", 0, 4),
        ("find_places", "call_Fp3Jm6Vs9Qa2Ue4Gn8Rb", 1, 5),
    ]
    assert choice.tool_calls[0].decoded.value == {"city": "Lisbon", "unit": "celsius"}
    assert token_counts(transcript) == (90, 64, 154)


def test_text_items_join_and_complete_as_stop() -> None:
    transcript = read((FIXTURES / "text.upstream.sse").read_bytes())
    choice = transcript.choices[0]
    assert choice.text.endswith("pastéis at Belém.")
    assert (choice.finish_reason, choice.tool_calls) == ("stop", [])
    assert transcript.findings == []


@pytest.mark.parametrize(
    ("status", "reason", "normalized", "raw"),
    [
        ("incomplete", "max_output_tokens", "length", "max_output_tokens"),
        ("incomplete", "content_filter", "content_filter", "content_filter"),
        ("incomplete", None, "length", "incomplete"),
        ("failed", None, "error", "failed"),
    ],
)
def test_terminal_status_gives_the_finish_reason(
    status: str, reason: str | None, normalized: str, raw: str
) -> None:
    body = completed(message_item(0, "msg_a", ["Hi"]), status=status, incomplete_reason=reason)
    choice = read(body).choices[0]
    assert (choice.finish_reason, choice.raw_finish_reason) == (normalized, raw)


def test_a_call_never_closed_is_one_invalid_arguments_finding() -> None:
    body = completed(call(0, ['{"a": ', "1, "], closed=False), status="incomplete")
    assert codes(read(body)) == [Code.TOOL_ARGUMENTS_INVALID]


@pytest.mark.parametrize("fragments", [[], ['{"a": 1}']])
def test_a_call_never_closed_is_invalid_even_when_what_arrived_decodes(
    fragments: list[str],
) -> None:
    transcript = read(completed(call(0, fragments, closed=False), status="incomplete"))
    assert codes(transcript) == [Code.TOOL_ARGUMENTS_INVALID]
    assert "never closed" in transcript.findings[0].detail


def test_argument_deltas_without_output_index_are_matched_by_item_id() -> None:
    first, second = call(0, ['{"a":', "1}"]), call(1, ['{"b":', "2}"])
    for event in first + second:
        if event["type"] == "response.function_call_arguments.delta":
            del event["output_index"]
    interleaved = [first[0], second[0], first[1], second[1], first[2], second[2]]
    body = completed(interleaved + first[3:] + second[3:])
    calls = read(body).choices[0].tool_calls
    assert [(c.index, c.decoded.value) for c in calls] == [(0, {"a": 1}), (1, {"b": 2})]


def test_without_deltas_the_done_event_or_the_done_item_gives_the_arguments() -> None:
    only_done = call(0, ['{"a": 1}'])
    del only_done[1]
    only_item = call(1, ['{"b": 2}'])
    del only_item[1:3]
    calls = read(completed(only_done, only_item)).choices[0].tool_calls
    assert [(c.arguments, c.fragments) for c in calls] == [('{"a": 1}', 1), ('{"b": 2}', 1)]


def test_events_after_the_terminal_event_are_counted_but_not_read() -> None:
    body = completed(message_item(0, "msg_a", ["Hi"])) + sse(call(1, ["{}"]))
    transcript = read(body)
    assert transcript.choices[0].tool_calls == []
    assert transcript.choices[0].finish_reason == "stop"
    assert transcript.findings == []


def test_error_event_and_failed_response_are_errors_in_a_200_only() -> None:
    failed = {"code": "insufficient_quota", "message": "You exceeded your current quota."}
    body = completed([error_event()], status="failed", error=failed)
    in_200 = read(body, status=200)
    assert codes(in_200) == [Code.ERROR_IN_STREAM, Code.ERROR_IN_STREAM]
    assert in_200.findings[0].detail.startswith("insufficient_quota")
    in_429 = read(body, status=429)
    assert codes(in_429) == []
    assert len(in_429.errors) == 2


def test_an_error_event_without_an_error_object_keeps_its_code_and_message() -> None:
    flat = {"type": "error", "code": "server_error", "message": "boom", "param": None}
    transcript = read(sse([flat]))
    assert transcript.dialect == "openai.responses"
    assert transcript.errors == [{"code": "server_error", "message": "boom"}]
    assert codes(transcript) == [Code.ERROR_IN_STREAM, Code.DONE_MISSING]


def test_a_stream_without_a_terminal_event_is_missing_its_finish_and_marker() -> None:
    transcript = read(sse([*opening(), *message_item(0, "msg_a", ["Hi"])]))
    assert codes(transcript) == [Code.FINISH_REASON_MISSING, Code.DONE_MISSING]


def test_json_body_reads_output_items() -> None:
    transcript = read((FIXTURES / "tools.upstream.json").read_bytes())
    choice = clean_choice(transcript, "openai.responses", streaming=False)
    assert choice.text == "Checking both at once."
    assert choice.finish_reason == "tool_calls"
    assert [(c.name, c.index) for c in choice.tool_calls] == [
        ("get_weather", 1),
        ("find_places", 2),
    ]
    assert token_counts(transcript) == (90, 64, 154)


def test_json_incomplete_body_and_error_body() -> None:
    cut = response(
        "incomplete",
        [message("msg_a", "Hi"), function_call("fc_a", "call_a", "f", '{"a"', "incomplete")],
        usage=usage(3, 4),
        incomplete_reason="max_output_tokens",
    )
    transcript = read(json.dumps(cut).encode())
    assert transcript.choices[0].finish_reason == "length"
    assert codes(transcript) == [Code.TOOL_ARGUMENTS_INVALID]
    error = json.dumps({"error": {"message": "bad", "type": "invalid_request_error"}}).encode()
    in_200 = read(error, path="/v1/responses", status=200)
    assert (in_200.dialect, codes(in_200), in_200.choices) == (
        "openai.responses",
        [Code.ERROR_IN_STREAM],
        {},
    )


@examples(60, deadline=None)
@given(arguments=ARGUMENTS, cuts=CUTS, text_cuts=st.lists(st.integers(0, 30), max_size=4))
def test_any_re_chunking_of_text_and_arguments_compares_equal(
    arguments: dict, cuts: list[int], text_cuts: list[int]
) -> None:
    text = "Checking the weather for you."
    encoded = json.dumps(arguments)
    reference = completed(message_item(0, "msg_a", [text]), call(1, [encoded]))
    rechunked = completed(
        message_item(0, "msg_a", split(text, text_cuts)), call(1, split(encoded, cuts))
    )
    comparison = compare(read(reference), read(rechunked))
    assert comparison.verdict == "equal"
    assert comparison.findings == []


WELL_FORMED = [
    *opening()[:1],
    *message_item(0, "msg_a", ["Hi"])[2:3],
    *call(1, ['{"a":', " 1}"]),
    error_event(),
    {
        "type": "response.incomplete",
        "response": response("incomplete", usage=usage(1, 2), incomplete_reason="x"),
    },
]


def test_a_field_of_any_wrong_type_never_breaks_the_reducer() -> None:
    for _, payloads in damaged(WELL_FORMED, depth=2):
        assert_survives(read(sse(payloads), path="/v1/responses"), "openai.responses")
        whole = json.dumps(payloads[-1]["response"]).encode()
        assert_survives(read(whole, dialect="openai.responses"), "openai.responses")



def test_positions_point_at_the_events_that_carry_each_fact() -> None:
    payloads = [
        *opening(),
        *message_item(0, "msg_a", ["Hi"]),
        *call(1, ['{"a":', " 1}"]),
        error_event(),
        {"type": "response.completed", "response": response("completed", usage=usage(3, 4))},
    ]
    body = sse(payloads)
    at = dict(enumerate(record_starts(body, b"\n\n")))
    kinds = [payload["type"] for payload in payloads]
    added = [n for n, kind in enumerate(kinds) if kind == "response.output_item.added"][1]
    error, last = kinds.index("error"), len(payloads) - 1
    transcript = read(body, status=200)
    choice = transcript.choices[0]
    assert choice.position == Position(0, 0)
    assert choice.tool_calls[0].position == Position(added, at[added])
    assert choice.finish_position == transcript.usage_position == Position(last, at[last])
    assert [(f.code, f.position) for f in transcript.findings] == [
        (Code.ERROR_IN_STREAM, Position(error, at[error]))
    ]


def test_a_stream_without_response_created_begins_at_its_first_response_event() -> None:
    for kind in ("response.in_progress", "response.queued"):
        payloads = [{"type": kind, "response": response("in_progress")}]
        body = completed(message_item(0, "msg_a", ["Hi"]))
        body = sse(payloads) + body.split(b"\n\n", 2)[2]
        assert read(body).choices[0].position == Position(0, 0)


def test_a_downstream_call_whose_item_never_came_is_added_at_its_first_delta() -> None:
    upstream = completed(message_item(0, "msg_a", ["Hi"]))
    stray = {"type": "response.function_call_arguments.delta", "item_id": "fc_9", "delta": "{}"}
    indexed = {**stray, "output_index": 4}
    for delta in (stray, indexed):
        payloads = [*opening(), *message_item(0, "msg_a", ["Hi"]), delta]
        payloads.append({"type": "response.completed", "response": response("completed")})
        body = sse(payloads)
        comparison = compare(read(upstream), read(body))
        found = {f.code: f for f in comparison.findings}
        assert Code.TOOL_CALLS_ADDED in found
        stray_at = len(payloads) - 2
        stray_offset = record_starts(body, b"\n\n")[stray_at]
        assert found[Code.TOOL_CALLS_ADDED].position == Position(stray_at, stray_offset)
        call_of = read(body).choices[0].tool_calls[0]
        assert (call_of.index, call_of.arguments) == (delta.get("output_index", 0), "{}")


def test_deltas_of_an_unknown_item_without_output_index_are_a_call_after_the_others() -> None:
    known = call(0, ['{"a": 1}'])
    stray = {"type": "response.function_call_arguments.delta", "item_id": "fc_x", "delta": "{}"}
    other = {**stray, "item_id": "fc_y", "delta": '{"b": 2}'}
    transcript = read(completed(known, [stray, other, {**stray, "delta": ""}]))
    calls = transcript.choices[0].tool_calls
    assert [(c.index, c.arguments) for c in calls] == [(0, '{"a": 1}'), (1, "{}"), (2, '{"b": 2}')]


def test_function_call_items_added_without_output_index_take_the_next_indexes() -> None:
    items = [call(n, [f'{{"n": {n}}}']) for n in range(2)]
    for events in items:
        events[0].pop("output_index")
    calls = read(completed(*items)).choices[0].tool_calls
    assert [(c.index, c.decoded.value) for c in calls] == [(0, {"n": 0}), (1, {"n": 1})]


def test_arguments_done_closes_a_call_and_states_its_arguments_without_the_item_done() -> None:
    events = call(0, ['{"a": 1}'])
    del events[1], events[-1]
    transcript = read(completed(events))
    calls = transcript.choices[0].tool_calls
    assert [(c.arguments, c.decoded.value) for c in calls] == [('{"a": 1}', {"a": 1})]
    assert transcript.findings == []


def test_arguments_that_are_not_a_string_are_read_as_none_given() -> None:
    item = function_call("fc_a", "call_a", "f", "", "completed")
    item["arguments"] = {"a": 1}
    transcript = read(json.dumps(response("completed", [item])).encode())
    assert transcript.choices[0].tool_calls[0].arguments == ""
    assert transcript.findings == []


def test_an_output_item_then_a_second_response_created_is_a_restart() -> None:
    created = opening()[0]
    body = sse([created, *message_item(0, "msg_a", [])[:1], created])
    assert codes(read(body))[0] == Code.STREAM_RESTARTED


def test_a_json_body_reads_text_past_a_malformed_part_and_places_all_at_the_body() -> None:
    text = message("msg_a", "Hi")
    text["content"].insert(0, "junk")
    cut = function_call("fc_a", "call_a", "f", '{"a"', "incomplete")
    transcript = read(json.dumps(response("incomplete", [text, cut])).encode())
    assert transcript.choices[0].text == "Hi"
    assert [(f.code, f.position) for f in transcript.findings] == [
        (Code.TOOL_ARGUMENTS_INVALID, Position(None, 0))
    ]


@pytest.mark.parametrize(
    "first",
    [
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"},
        {"type": "response.output_item.added", "output_index": 0,
         "item": function_call("fc_a", "call_a", "f", "", "in_progress")},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"},
        {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": "{}"},
    ],
)
def test_a_stream_cut_of_its_opening_begins_at_its_first_content(first: dict) -> None:
    body = sse([first, {"type": "response.completed", "response": response("completed")}])
    assert read(body).choices[0].position == Position(0, 0)


def test_a_call_first_seen_in_an_indexed_delta_keeps_the_item_id_later_deltas_name() -> None:
    delta = {"type": "response.function_call_arguments.delta", "item_id": "fc_9"}
    events = [{**delta, "output_index": 3, "delta": '{"a": '}, {**delta, "delta": "1}"}]
    calls = read(completed(events)).choices[0].tool_calls
    assert [(c.index, c.arguments) for c in calls] == [(3, '{"a": 1}')]


def test_a_failed_responses_error_is_kept_whole_at_the_terminal_event() -> None:
    failed = {"code": "server_error", "message": "The model failed."}
    body = completed([], status="failed", error=failed)
    event_starts = record_starts(body, b"\n\n")
    last = len(event_starts) - 1
    transcript = read(body, status=200)
    assert transcript.errors == [failed]
    assert [(f.code, f.position, f.detail) for f in transcript.findings] == [
        (Code.ERROR_IN_STREAM, Position(last, event_starts[last]),
         "server_error: The model failed.")]


@pytest.mark.parametrize("status", ["in_progress", "queued"])
def test_a_body_still_running_has_no_finish_reason(status: str) -> None:
    transcript = read(json.dumps(response(status, [message("msg_a", "Hi")])).encode())
    assert transcript.choices[0].finish_reason is None


def test_a_stream_of_only_its_terminal_event_begins_there() -> None:
    body = sse([{"type": "response.completed", "response": response("completed")}])
    assert read(body).choices[0].position == Position(0, 0)


def test_a_request_reads_its_chat_messages_or_its_input_and_every_tool_list() -> None:
    chat_shaped = {"messages": [{"role": "user", "content": "Hi"}], "input": 7}
    assert openai_responses.conversation(chat_shaped) is not None
    legacy = {"input": "Hi", "tools": [{"type": "function", "name": "f"}],
              "functions": [{"name": "g"}]}
    conversation = openai_responses.conversation(legacy)
    assert conversation is not None
    assert conversation[1] == ["f", "g"]


def test_text_then_a_second_response_created_is_a_restart() -> None:
    created = opening()[0]
    text = {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}
    assert codes(read(sse([created, text, created])))[0] == Code.STREAM_RESTARTED


def test_an_item_id_that_is_not_a_string_names_no_item_for_deltas_without_output_index() -> None:
    events = function_call_item(0, 7, "call_0", "f", ['{"a": 1}'])
    for event in events:
        if event["type"] == "response.function_call_arguments.delta":
            del event["output_index"]
    calls = read(completed(events)).choices[0].tool_calls
    assert [(c.index, c.id, c.arguments) for c in calls] == [
        (0, "call_0", '{"a": 1}'),
        (1, None, '{"a": 1}'),
    ]


def test_a_payload_that_says_it_is_a_response_is_one_whatever_its_type() -> None:
    assert openai_responses.sniff({"type": "message", "object": "response"}) is True
    assert openai_responses.sniff({"type": "message"}) is False


def test_an_event_that_is_not_json_is_invalid_at_its_event_with_the_decoder_s_reason() -> None:
    delta = b'data: {"type":"response.output_text.delta","delta":"x","output_index":0}\n\n'
    transcript = read(delta + b"data: nope\n\n")
    assert transcript.findings[0] == Finding(
        Code.JSON_INVALID, position=Position(1, len(delta)),
        detail="Expecting value: line 1 column 1 (char 0)",
    )


def test_an_empty_status_is_no_finish_reason() -> None:
    body = {"object": "response", "status": "", "output": [message("m", "Hi")]}
    transcript = read(json.dumps(body).encode())
    assert (transcript.choices[0].finish_reason, codes(transcript)) == (
        None, [Code.FINISH_REASON_MISSING]
    )
