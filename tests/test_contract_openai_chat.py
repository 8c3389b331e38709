"""What the Chat Completions reducer promises beyond the usual stream: chunks that do not name
themselves, fields that come late or malformed, keep-alives, and where each thing was seen."""

from __future__ import annotations

from typing import Any

import pytest

from calltap.codes import Code
from calltap.dialects import openai_chat
from calltap.sse import parse
from calltap.transcript import Position
from dialect_helpers import clean_choice, codes, read, token_counts
from fixtures.chat_stream import call_start, chunk, delta, sse, usage


def positions(body: bytes) -> list[Position]:
    """Where each event of a body starts, as findings and choices point at it."""
    events, _ = parse(body)
    return [Position(event.ordinal, event.offset) for event in events]


def bare(*choices: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A chunk as some gateways send it: `choices` and nothing that names the object."""
    return {"choices": list(choices), **fields}


@pytest.mark.parametrize(
    ("payload", "sniffed"),
    [
        ({"object": "chat.completion.chunk", "choices": []}, True),
        ({"object": "chat.completion"}, True),
        (bare({"index": 0, "delta": {"content": "a"}}), True),
        (bare({"index": 0, "message": {"content": "a"}}), True),
        (bare({"index": 0, "text": "a"}), False),
        (bare("not a choice"), False),
        (bare(), False),
        (bare(prompt_filter_results=[]), True),
        ({"prompt_filter_results": [], "choices": None}, False),
        ({"object": "response", "choices": []}, False),
        ([{"object": "chat.completion.chunk"}], False),
    ],
)
def test_a_payload_is_chat_completions_by_its_object_or_by_the_shape_of_its_choices(
    payload: Any, sniffed: bool
) -> None:
    assert openai_chat.sniff(payload) is sniffed


def test_a_stream_of_chunks_without_object_after_azures_preamble_reads_as_chat() -> None:
    body = sse(
        [
            bare(prompt_filter_results=[{"prompt_index": 0, "content_filter_results": {}}]),
            bare({"index": 0, "delta": {"role": "assistant", "content": "o"}}),
            bare({"index": 0, "delta": {"content": "k"}, "finish_reason": "stop"}),
        ]
    )
    transcript = read(body)
    choice = clean_choice(transcript, "openai.chat", streaming=True)
    at = positions(body)
    assert (choice.text, choice.finish_reason) == ("ok", "stop")
    assert (choice.position, choice.finish_position) == (at[1], at[2])


def test_the_usage_only_chunk_is_the_usage_and_says_where_it_was() -> None:
    body = sse(
        [
            chunk([delta(content="hi", finish_reason="stop")], usage=None),
            chunk([], usage=usage(7, 2)),
            chunk([], usage={"prompt_tokens": None}),
        ]
    )
    transcript = read(body)
    assert transcript.findings == []
    assert token_counts(transcript) == (7, 2, 9)
    assert transcript.usage_position == positions(body)[1]


def test_a_call_whose_id_and_name_come_only_in_a_later_fragment_takes_them() -> None:
    body = sse(
        [
            chunk([delta(tool_calls=[{"index": 0, "function": {"arguments": '{"a"'}}])]),
            chunk(
                [
                    delta(
                        tool_calls=[
                            {"index": 0, "id": "call_a", "function": {"name": "f", "arguments": ""}}
                        ]
                    )
                ]
            ),
            chunk([delta(tool_calls=[{"index": 0, "function": {"arguments": ": 1}"}}])]),
            chunk([delta(finish_reason="tool_calls")]),
        ]
    )
    transcript = read(body)
    (call,) = clean_choice(transcript, "openai.chat", streaming=True).tool_calls
    assert (call.id, call.name, call.arguments, call.fragments) == ("call_a", "f", '{"a": 1}', 3)
    assert call.position == positions(body)[0]


def test_a_choice_without_an_integer_index_is_choice_zero_and_choice_index_missing() -> None:
    """Read as choice 0, as a tolerant client would; the openai SDK's accumulator raises on it."""
    body = sse(
        [
            bare({"delta": {"content": "a"}}),
            bare({"index": "1", "delta": {"content": "b"}}),
            bare({"index": None, "delta": {}, "finish_reason": "stop"}),
        ]
    )
    transcript = read(body)
    assert list(transcript.choices) == [0]
    assert transcript.choices[0].text == "ab"
    assert [(f.code, f.choice, f.count, f.position) for f in transcript.findings] == [
        (Code.CHOICE_INDEX_MISSING, None, 3, positions(body)[0])
    ]


def test_a_malformed_choice_entry_is_skipped_and_the_next_one_read() -> None:
    body = sse(
        [
            chunk([None, delta(1, content="b", finish_reason="length")]),  # type: ignore[list-item]
            chunk([delta(0, content="a", finish_reason="stop")]),
        ]
    )
    transcript = read(body)
    at = positions(body)
    assert transcript.findings == []
    assert [(i, c.text, c.finish_reason, c.position) for i, c in transcript.choices.items()] == [
        (0, "a", "stop", at[1]),
        (1, "b", "length", at[0]),
    ]


def test_a_legacy_function_call_is_the_call_at_index_zero_and_a_null_one_is_nothing() -> None:
    body = sse(
        [
            chunk([{"index": 0, "delta": {"function_call": None}, "finish_reason": None}]),
            chunk([{"index": 0, "delta": {"function_call": {"name": "f", "arguments": '{"a"'}}}]),
            chunk([{"index": 0, "delta": {"function_call": {"arguments": ": 1}"}}}]),
            chunk([delta(finish_reason="function_call")]),
        ]
    )
    transcript = read(body)
    choice = clean_choice(transcript, "openai.chat", streaming=True)
    (call,) = choice.tool_calls
    assert (call.index, call.id, call.name, call.arguments, call.fragments) == (
        0,
        None,
        "f",
        '{"a": 1}',
        2,
    )
    assert call.position == positions(body)[1]
    assert (choice.finish_reason, choice.raw_finish_reason) == ("tool_calls", "function_call")


def test_ping_events_are_keep_alives_whatever_their_data() -> None:
    body = (
        b"event: ping\ndata: keep-alive\n\n"
        + sse([chunk([delta(content="ok")])], done=False)
        + b"event: ping\ndata: {not json\n\n"
        + sse([chunk([delta(finish_reason="stop")])])
    )
    transcript = read(body)
    assert clean_choice(transcript, "openai.chat", streaming=True).text == "ok"
    assert transcript.events == 5


def test_a_non_string_finish_reason_is_kept_as_its_repr() -> None:
    transcript = read(sse([chunk([delta(content="a") | {"finish_reason": 3}])]))
    choice = transcript.choices[0]
    assert (choice.finish_reason, choice.raw_finish_reason) == ("3", "3")
    assert codes(transcript) == []


def test_a_body_call_takes_its_place_in_the_list_and_the_body_position() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }
    payload = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    transcript = openai_chat.reduce_json(payload)
    choice = clean_choice(transcript, "openai.chat", streaming=False)
    assert [(c.index, c.id, c.name, c.position) for c in choice.tool_calls] == [
        (0, "c1", "f", Position(None, 0)),
        (1, "c2", "g", Position(None, 0)),
    ]



def test_a_payload_that_is_not_json_says_why_in_its_finding() -> None:
    body = b'data: {"choices": [\n\n' + sse([chunk([delta(content="a", finish_reason="stop")])])
    transcript = read(body)
    (finding,) = transcript.findings
    assert (finding.code, finding.position, finding.detail) == (
        Code.JSON_INVALID,
        Position(0, 0),
        "Expecting value: line 1 column 14 (char 13)",
    )


def test_malformed_call_fragments_are_skipped_and_the_rest_read() -> None:
    body = sse(
        [
            chunk([delta(tool_calls=[None, "x", call_start(0, "c1", "f", "{}")])]),  # type: ignore
            chunk([delta(finish_reason="tool_calls")]),
        ]
    )
    transcript = read(body)
    (call,) = clean_choice(transcript, "openai.chat", streaming=True).tool_calls
    assert (call.index, call.id, call.name, call.arguments) == (0, "c1", "f", "{}")


def test_a_legacy_function_call_that_is_not_an_object_is_no_call() -> None:
    body = sse([chunk([{"index": 0, "delta": {"function_call": "f"}, "finish_reason": "stop"}])])
    assert clean_choice(read(body), "openai.chat", streaming=True).tool_calls == []
