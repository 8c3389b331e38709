"""How a stream starts: the snapshot the start event carries, and a start that comes again.

- Anthropic's `message_start.message` and Responses' `response.created.response` are the SDKs'
  starting snapshots: content already in them is delivered, whole.
- A second start after content began is a retried attempt spliced into the client's stream:
  STREAM_RESTARTED, a fatal defect of that side.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from calltap.codes import Code
from calltap.compare import check, compare
from calltap.transcript import Position
from dialect_helpers import codes, read
from fixtures.anthropic import stream as anthropic
from fixtures.openai_responses import stream as responses

WEATHER_INPUT = {"city": "Lisbon", "units": "metric"}


def anthropic_snapshot(*content: dict[str, Any]) -> dict[str, Any]:
    start = anthropic.message_start()
    start["message"]["content"] = list(content)
    return start


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def anthropic_body(*events: dict[str, Any], stop_reason: str = "tool_use") -> bytes:
    return anthropic.sse([*events, anthropic.message_delta(stop_reason, 40), anthropic.STOP])


def test_a_tool_use_block_whole_in_message_start_is_a_delivered_call() -> None:
    body = anthropic_body(anthropic_snapshot(tool_use("toolu_1", "weather", WEATHER_INPUT)))
    transcript = read(body)
    assert codes(transcript) == []
    (call,) = transcript.choices[0].tool_calls
    assert (call.name, call.id, call.index, call.position) == ("weather", "toolu_1", 0,
                                                              Position(0, 0))
    assert call.decoded.value == WEATHER_INPUT
    assert check(transcript).verdict == "clean"


def test_streamed_blocks_follow_the_blocks_of_the_snapshot() -> None:
    body = anthropic_body(
        anthropic_snapshot({"type": "text", "text": "Checking."},
                           tool_use("toolu_1", "weather", WEATHER_INPUT)),
        *anthropic.tool_block(2, "toolu_2", "clock", ['{"zone"', ': "UTC"}']),
    )
    transcript = read(body)
    assert codes(transcript) == []
    choice = transcript.choices[0]
    assert choice.text == "Checking."
    assert [(c.name, c.index) for c in choice.tool_calls] == [("weather", 1), ("clock", 2)]


def test_a_second_message_start_after_content_is_a_restart_whatever_it_replaced() -> None:
    first_attempt = [
        anthropic.message_start(),
        *anthropic.text_block(0, ["Let me ", "check."]),
        *anthropic.tool_block(1, "toolu_1", "weather", ['{"city": "Lis'], stopped=False),
    ]
    second_start = anthropic.message_start()
    second_attempt = [
        second_start,
        *anthropic.text_block(0, ["Let me check."]),
        *anthropic.tool_block(1, "toolu_2", "weather", ['{"city": "Lisbon"}']),
    ]
    spliced = read(anthropic_body(*first_attempt, *second_attempt))
    restarts = [f for f in spliced.findings if f.code is Code.STREAM_RESTARTED]
    at = len(first_attempt)
    assert [(f.choice, f.count, f.position.event) for f in restarts] == [(0, 1, at)]
    assert check(spliced).verdict == "defective"
    faithful = read(anthropic_body(*second_attempt))
    comparison = compare(faithful, spliced)
    assert comparison.verdict == "diverged"
    assert [f.side for f in comparison.findings if f.code is Code.STREAM_RESTARTED] == [
        "downstream"
    ]


def test_a_repeated_start_before_any_content_is_no_restart() -> None:
    body = anthropic_body(
        anthropic.message_start(),
        anthropic.PING,
        anthropic.message_start(),
        *anthropic.tool_block(0, "toolu_1", "weather", ['{"city": "Lisbon"}']),
    )
    assert codes(read(body)) == []


@given(cut=st.integers(1, 9), restarts=st.integers(1, 3))
def test_a_start_spliced_at_any_event_is_a_restart_exactly_when_content_had_begun(
    cut: int, restarts: int
) -> None:
    """Events 1.. of a message (after its message_start) cut at `cut`, then whole attempts."""
    events = [
        anthropic.message_start(),
        anthropic.PING,
        *anthropic.text_block(1, ["a", "b"]),
        *anthropic.tool_block(2, "toolu_1", "weather", ['{"city"', ': "Oslo"}']),
    ]
    attempt = [
        anthropic.message_start(),
        *anthropic.tool_block(0, "toolu_2", "weather", ['{"city": "Oslo"}']),
    ]
    spliced = events[:cut] + attempt * restarts
    found = [f for f in read(anthropic_body(*spliced)).findings
             if f.code is Code.STREAM_RESTARTED]
    began = cut > 2
    expected = restarts if began else restarts - 1
    assert [f.count for f in found] == ([expected] if expected else [])


def responses_created(*output: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.created",
            "response": responses.response("in_progress", output)}


def responses_body(*events: dict[str, Any]) -> bytes:
    terminal = {"type": "response.completed",
                "response": responses.response("completed", usage=responses.usage(9, 4))}
    return responses.sse([*events, terminal])


def test_a_function_call_item_whole_in_response_created_is_a_delivered_call() -> None:
    item = responses.function_call("fc_1", "call_1", "weather", '{"city": "Lisbon"}', "completed")
    transcript = read(responses_body(responses_created(item)))
    assert codes(transcript) == []
    (call,) = transcript.choices[0].tool_calls
    assert (call.name, call.id, call.index, call.position.event) == ("weather", "call_1", 0, 0)
    assert transcript.choices[0].finish_reason == "tool_calls"


def test_a_second_response_created_after_an_output_item_is_a_restart() -> None:
    first = responses.opening() + responses.function_call_item(
        0, "fc_1", "call_1", "weather", ['{"city":'], closed=False
    )
    second = responses.opening() + responses.function_call_item(
        0, "fc_2", "call_2", "weather", ['{"city": "Lisbon"}']
    )
    transcript = read(responses_body(*first, *second))
    restarts = [f for f in transcript.findings if f.code is Code.STREAM_RESTARTED]
    assert [(f.count, f.position.event) for f in restarts] == [(1, len(first))]
    assert Code.STREAM_RESTARTED not in codes(read(responses_body(*second)))
