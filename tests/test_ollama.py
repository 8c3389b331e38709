"""Ollama `/api/chat`: NDJSON streams and whole bodies, alone and against a Chat downstream.

Shapes are Ollama's documented ones (`tests/fixtures/ollama/README.md`): text lines, calls whole in
`message.tool_calls`, a final `done: true` line with `done_reason` and the eval counts.
"""

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
from calltap.dialects import ollama
from calltap.ndjson import NDJSONDecoder
from calltap.transcript import Finding, Position
from dialect_helpers import (
    assert_survives,
    clean_choice,
    codes,
    damaged,
    read,
    record_starts,
)
from fixtures import chat_stream as chat

FIXTURES = Path(__file__).parent / "fixtures" / "ollama"
PATH = "/api/chat"
MODEL = "llama3.2"
WEATHER = {"city": "Lisbon", "unit": "celsius"}
PLACES = {"city": "Lisbon", "kind": "museum", "open_now": True, "limit": 5}
CHAT_IDS = ["call_Wq7Lz2Nc4Yb8Tr1Hx5Kd", "call_Fp3Jm6Vs9Qa2Ue4Gn8Rb"]


def line(content: str = "", *, calls: list[dict[str, Any]] | None = None,
         done: bool = False, **final: Any) -> dict[str, Any]:
    """One `/api/chat` line; `final` adds the final line's fields."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    return {"model": MODEL, "created_at": "2025-05-27T22:54:57.641643Z", "message": message,
            "done": done, **final}


def call(name: str, arguments: dict[str, Any], index: int | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "arguments": arguments}
    if index is not None:
        function["index"] = index
    return {"function": function}


def last(reason: str | None = "stop", prompt: int = 72, completion: int = 41) -> dict[str, Any]:
    fields: dict[str, Any] = {"total_duration": 885095291, "prompt_eval_count": prompt,
                              "eval_count": completion}
    if reason is not None:
        fields["done_reason"] = reason
    return line(done=True, **fields)


def ndjson(lines: list[Any]) -> bytes:
    return b"".join(
        (item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))).encode()
        + b"\n"
        for item in lines
    )


def two_calls() -> bytes:
    """Text, then both calls in one line (with `function.index`, as newer releases send), then
    the final line."""
    return ndjson([
        line("I'll check both"), line(" at once."),
        line(calls=[call("get_weather", WEATHER, 0), call("find_places", PLACES, 1)]),
        last(),
    ])


def test_the_documented_text_stream_reads_its_text_reason_and_counts() -> None:
    transcript = read((FIXTURES / "chat.ndjson").read_bytes())
    choice = clean_choice(transcript, "ollama.chat", streaming=True)
    assert choice.text.endswith("scatter more — café 東京.")
    assert (choice.finish_reason, transcript.events) == ("stop", 17)
    assert transcript.usage is not None
    assert (transcript.usage.prompt_tokens, transcript.usage.total_tokens) == (26, 308)
    assert transcript.end_position == choice.finish_position == Position(16, 2162)


def test_the_documented_tool_call_is_one_whole_call_and_stop_means_tool_calls() -> None:
    choice = clean_choice(read((FIXTURES / "tools.ndjson").read_bytes()), "ollama.chat",
                          streaming=True)
    [only] = choice.tool_calls
    assert (only.name, only.index, only.fragments) == ("get_current_weather", 0, 1)
    assert only.decoded.value == {"format": "celsius", "location": "Paris, FR"}
    assert (choice.raw_finish_reason, choice.finish_reason) == ("stop", "tool_calls")


def test_parallel_calls_in_one_line_are_numbered_in_order() -> None:
    choice = clean_choice(read(two_calls()), "ollama.chat", streaming=True)
    assert choice.text == "I'll check both at once."
    assert [(c.name, c.index, c.decoded.value) for c in choice.tool_calls] == [
        ("get_weather", 0, WEATHER), ("find_places", 1, PLACES)]


@pytest.mark.parametrize(
    ("reason", "normalized"),
    [("stop", "stop"), ("length", "length"), ("load", "load"), (None, "stop")],
)
def test_done_reasons_are_normalized(reason: str | None, normalized: str) -> None:
    choice = read(ndjson([line("Hi"), last(reason)])).choices[0]
    assert choice.finish_reason == normalized


def test_without_the_done_line_the_stream_is_cut() -> None:
    transcript = read(ndjson([line("Hi"), line(" there")]), path=PATH)
    assert codes(transcript) == [Code.FINISH_REASON_MISSING, Code.DONE_MISSING]
    assert transcript.usage is None


def test_a_line_that_is_not_json_is_invalid_and_skipped() -> None:
    transcript = read(ndjson([line("Hi"), "{not json", line(" there"), last()]))
    assert codes(transcript) == [Code.JSON_INVALID]
    assert transcript.findings[0].position == Position(1, len(ndjson([line("Hi")])))
    assert transcript.choices[0].text == "Hi there"


def test_bytes_that_are_not_utf8_are_invalid_where_they_are() -> None:
    body = ndjson([line("Hi"), last()]).replace(b'"Hi"', b'"H\xffi"')
    transcript = read(body)
    assert codes(transcript) == [Code.JSON_INVALID]
    assert transcript.findings[0].position == Position(0, body.index(b"\xff"))


def test_an_error_line_is_an_error_in_a_200_but_not_in_a_500() -> None:
    body = ndjson([line("Hi"), {"error": "an error was encountered while running the model"}])
    in_200 = read(body, path=PATH, status=200)
    assert in_200.errors == ["an error was encountered while running the model"]
    assert codes(in_200) == [Code.ERROR_IN_STREAM, Code.FINISH_REASON_MISSING, Code.DONE_MISSING]
    assert Code.ERROR_IN_STREAM not in codes(read(body, path=PATH, status=500))


def test_lines_after_the_done_line_are_counted_but_not_read() -> None:
    transcript = read(ndjson([line("Hi"), last(), line(" more")]))
    assert (transcript.choices[0].text, transcript.events) == ("Hi", 3)


def test_a_whole_body_reads_like_the_final_line_of_a_stream() -> None:
    body = line("Hi", calls=[call("get_weather", WEATHER)], done=True, done_reason="stop",
                prompt_eval_count=9, eval_count=4)
    transcript = read(json.dumps(body).encode())
    choice = clean_choice(transcript, "ollama.chat", streaming=False)
    assert (choice.text, choice.finish_reason, len(choice.tool_calls)) == ("Hi", "tool_calls", 1)


def test_a_one_line_stream_is_a_stream_only_when_its_content_type_says_so() -> None:
    body = ndjson([last()])
    assert read(body).streaming is False
    assert read(body, content_type="application/x-ndjson; charset=utf-8").streaming is True


@examples(60, deadline=None)
@given(cuts=st.lists(st.integers(0, 400), max_size=8))
def test_any_split_of_the_bytes_gives_the_same_transcript(cuts: list[int]) -> None:
    body = two_calls()
    decoder = NDJSONDecoder()
    pieces = [body[start:end] for start, end in zip([0, *sorted(set(cuts))],
                                                    [*sorted(set(cuts)), len(body)], strict=True)]
    frames = [frame for piece in pieces for frame in decoder.feed(piece)]
    assert decoder.close() is None
    transcript = ollama.reduce_events(frames)
    transcript.bytes = len(body)
    assert transcript == read(body)


WELL_FORMED = [
    line("Hi", calls=[call("f", {"a": 1}, 0)]),
    {"error": "boom"},
    last(),
]


def test_a_field_of_any_wrong_type_never_breaks_the_reducer() -> None:
    for _, lines in damaged(WELL_FORMED, depth=2, removing=True):
        assert_survives(read(ndjson(lines), path=PATH), "ollama.chat")
        assert_survives(read(json.dumps(lines[0]).encode(), dialect="ollama.chat"),
                        "ollama.chat")


# Against a Chat Completions downstream (LiteLLM's `ollama_chat` provider translates both ways).


def chat_downstream(
    calls: list[tuple[str, dict[str, Any]]], *, indexes: list[int] | None = None,
    finish_reason: str = "tool_calls", ids: list[str] = CHAT_IDS,
) -> bytes:
    texts = [(name, json.dumps(arguments)) for name, arguments in calls]
    return chat.tool_call_stream(
        texts, ids=ids, indexes=indexes or list(range(len(calls))),
        cuts=[(5, 17)] * len(calls), text_parts=["I'll check both", " at once."],
        finish_reason=finish_reason, tokens=(72, 41),
    )


CALLS = [("get_weather", WEATHER), ("find_places", PLACES)]


def compared(downstream: bytes, upstream: bytes | None = None) -> tuple[str, set[Code]]:
    """The verdict and the codes found. Ollama's calls have no id; the ids the gateway gives
    them are no remapping."""
    comparison = compare(read(upstream or two_calls(), path=PATH), read(downstream))
    return comparison.verdict, {finding.code for finding in comparison.findings}


def test_a_faithful_translation_is_equal() -> None:
    comparison = compare(read(two_calls()), read(chat_downstream(CALLS)))
    assert (comparison.verdict, comparison.findings) == ("equal", [])


def test_a_dropped_call_is_found() -> None:
    verdict, found = compared(chat_downstream(CALLS[:1]))
    assert verdict == "diverged"
    assert found == {Code.TOOL_CALLS_DROPPED, Code.TOOL_CALL_SET_CHANGED}


def test_an_integer_argument_turned_string_is_a_changed_call() -> None:
    stringly = [CALLS[0], ("find_places", {**PLACES, "limit": "5"})]
    verdict, found = compared(chat_downstream(stringly))
    assert verdict == "diverged"
    assert found == {Code.TOOL_CALL_ARGUMENTS_CHANGED, Code.TOOL_CALL_SET_CHANGED}


def test_a_lost_finish_reason_is_missing() -> None:
    body = chat_downstream(CALLS).replace(b'"finish_reason":"tool_calls"', b'"finish_reason":null')
    assert compared(body) == ("diverged", {Code.FINISH_REASON_MISSING})


def test_an_error_line_not_forwarded_is_dropped() -> None:
    upstream = ndjson([line("I'll check both"), {"error": "model runner has unexpectedly stopped"}])
    downstream = chat.sse([chat.chunk([chat.delta(content="I'll check both",
                                                  finish_reason="stop")],
                                      usage=chat.usage(72, 41))])
    verdict, found = compared(downstream, upstream)
    assert verdict == "diverged"
    assert Code.ERROR_DROPPED in found


def test_every_parallel_call_merged_onto_index_0_diverges() -> None:
    """LiteLLM's Ollama stream translation has put every call at index 0: a client keyed by
    index joins them into one call whose arguments are two objects back to back."""
    merged = read(chat_downstream(CALLS, indexes=[0, 0]))
    assert len(merged.choices[0].tool_calls) == 1
    verdict, found = compared(chat_downstream(CALLS, indexes=[0, 0]))
    assert verdict == "diverged"
    assert {Code.TOOL_CALL_ID_CONFLICT, Code.TOOL_ARGUMENTS_INVALID,
            Code.TOOL_CALLS_DROPPED} <= found




def test_positions_point_at_the_lines_that_carry_each_fact() -> None:
    with_id = {**call("get_weather", WEATHER), "id": "call_7"}
    body = ndjson([line("Hi"), {"error": "model runner stopped"}, line(calls=[with_id]), last()])
    at = record_starts(body, b"\n")
    transcript = read(body, status=200)
    choice = transcript.choices[0]
    assert choice.position == Position(0, 0)
    [only] = choice.tool_calls
    assert (only.id, only.position) == ("call_7", Position(2, at[2]))
    assert choice.finish_position == transcript.usage_position == Position(3, at[3])
    assert [(f.code, f.position) for f in transcript.findings] == [
        (Code.ERROR_IN_STREAM, Position(1, at[1]))]


def test_a_stream_that_opens_with_a_call_begins_there() -> None:
    body = ndjson([{"message": {"tool_calls": [call("f", {})]}}, last()])
    assert read(body, path=PATH).choices[0].position == Position(0, 0)


@pytest.mark.parametrize(
    ("prompt", "completion", "expected"),
    [(72, None, (72, None, None)), (None, 41, (None, 41, None)), (None, None, None)],
)
def test_the_final_line_gives_whichever_counts_it_has(
    prompt: int | None, completion: int | None, expected: tuple | None
) -> None:
    final = last()
    for key, value in (("prompt_eval_count", prompt), ("eval_count", completion)):
        if value is None:
            del final[key]
        else:
            final[key] = value
    usage = read(ndjson([line("Hi"), final])).usage
    assert (usage and (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)) == (
        expected)


def test_a_line_with_a_byte_that_is_not_utf8_says_which() -> None:
    body = ndjson([line("Hi")]) + b'{"x": "\xff"}\n' + ndjson([last()])
    [finding] = [f for f in read(body, path=PATH).findings if f.code is Code.JSON_INVALID]
    assert finding.detail.startswith("byte ")
    assert finding.detail.endswith(" is not UTF-8")


def test_lines_with_json_issues_non_objects_and_non_json_are_flagged_where_they_are() -> None:
    first = ndjson([line("Hi")])
    with_nan = ndjson([line("!")])[:-2] + b',"x":NaN}\n'
    body = first + with_nan + ndjson(["[1]", "nope", last()])
    transcript = read(body)
    assert transcript.choices[0].text == "Hi!"
    at = [0, len(first), len(first) + len(with_nan), len(first) + len(with_nan) + 4]
    assert transcript.findings == [
        Finding(Code.NON_FINITE_NUMBER, position=Position(1, at[1]), detail="at /x"),
        Finding(Code.JSON_INVALID, position=Position(2, at[2]),
                detail="payload is not a JSON object"),
        Finding(Code.JSON_INVALID, position=Position(3, at[3]),
                detail="Expecting value: line 1 column 1 (char 0)"),
    ]


def test_a_call_id_that_is_not_a_string_or_is_empty_is_none_and_bad_arguments_say_why() -> None:
    calls = [{"id": 5, "function": {"name": "f", "arguments": "{"}},
             {"id": "", "function": {"name": "g", "arguments": {}}}]
    transcript = read(ndjson([line(calls=calls), last()]))
    assert [(c.id, c.name) for c in transcript.choices[0].tool_calls] == [(None, "f"), (None, "g")]
    assert transcript.findings == [
        Finding(Code.TOOL_ARGUMENTS_INVALID, choice=0, position=Position(0, 0),
                detail="f: Expecting property name enclosed in double quotes: line 1 column 2 "
                       "(char 1)"),
    ]
