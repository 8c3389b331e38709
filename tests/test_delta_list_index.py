"""DELTA_LIST_INDEX_MISSING: a Chat Completions delta field holding a list of objects that the
openai SDK's `ChatCompletionStreamState` must merge by `index` (it recurs in a later chunk of the
same choice) while an entry lacks an integer `index`: the SDK raises `RuntimeError: Expected list
delta entry to have an `index` key`. The rule is the SDK's `accumulate_delta` (see
`calltap.dialects.chat_deltas`), at any depth of the delta.

The real shape (tests/fixtures/index_defects/README.md): LiteLLM 1.74.x streams Claude's thinking
as `thinking_blocks` entries without index, again inside `provider_specific_fields`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.compare import compare_captures
from calltap.transcript import Capture
from dialect_helpers import codes, read
from fixtures.chat_stream import call_arguments, call_start
from index_helpers import (
    EXTENSION_KEYS,
    INTEGER_INDEXES,
    NOT_INTEGERS,
    Stream,
    entries,
    findings_in_pieces,
    nested,
    positions,
    sdk_failure,
    streams,
)

FIXTURES = Path(__file__).parent / "fixtures" / "index_defects"
CHAT = "/v1/chat/completions"
THOUGHT = [{"type": "thinking", "thinking": "so"}]


def deltas(*items: dict[str, Any]) -> Stream:
    """Choice 0 opened, then each delta in a chunk of its own, then its finish reason."""
    stream = Stream([], [])
    for delta in ({"role": "assistant", "content": ""}, *items, {}):
        stream.insert(len(stream.payloads), 0, delta)
    stream.payloads[-1]["choices"][0]["finish_reason"] = "stop"
    return stream


def list_findings(body: bytes) -> list[tuple[int | None, int | None, int | None, str]]:
    return [(f.choice, f.count, f.position.event if f.position else None, f.detail)
            for f in read(body).findings if f.code is Code.DELTA_LIST_INDEX_MISSING]


def test_litellms_thinking_blocks_are_a_divergence_where_the_sdk_raises() -> None:
    upstream = (FIXTURES / "litellm-thinking.upstream.sse").read_bytes()
    downstream = (FIXTURES / "litellm-thinking.downstream.sse").read_bytes()
    comparison = compare_captures(Capture(upstream, "/v1/messages"), Capture(downstream, CHAT))
    assert comparison.verdict == "diverged"
    assert [(f.code, f.side, f.choice, f.count, f.position, f.detail)
            for f in comparison.findings] == [
        (Code.DELTA_LIST_INDEX_MISSING, "downstream", 0, 2, positions(downstream)[1],
         "thinking_blocks: an entry without index")]
    failure = sdk_failure(downstream)
    assert failure is not None and failure.event == 1
    assert isinstance(failure.error, RuntimeError)
    assert "Expected list delta entry to have an `index` key" in str(failure.error)


def test_the_shape_on_both_sides_is_each_sides_own_and_no_divergence() -> None:
    body = (FIXTURES / "litellm-thinking.downstream.sse").read_bytes()
    comparison = compare_captures(Capture(body, CHAT), Capture(body, CHAT))
    assert comparison.verdict == "equal"
    assert codes(comparison.upstream) == codes(comparison.downstream) == [
        Code.DELTA_LIST_INDEX_MISSING]


def test_a_list_seen_once_is_stored_as_sent_and_is_no_finding() -> None:
    body = deltas({"thinking_blocks": THOUGHT}, {"content": "hi"}).body()
    assert list_findings(body) == [] and sdk_failure(body) is None


def test_one_delta_mixing_entries_with_and_without_index_fails_the_first_time() -> None:
    body = deltas({"x": [{"index": 0, "a": "1"}, {"a": "2"}]}).body()
    assert list_findings(body) == [(0, 1, 1, "x: an entry without index")]
    failure = sdk_failure(body)
    assert failure is not None and failure.event == 1


def test_a_null_index_fails_even_the_first_time_and_a_list_of_strings_never() -> None:
    body = deltas({"x": [{"index": None}]}, {"y": ["a"]}, {"y": ["b"]}).body()
    assert list_findings(body) == [(0, 1, 1, "x: an entry whose index is not an integer")]
    assert sdk_failure(body) is not None


def test_entries_merged_into_a_string_fail_and_a_kind_change_is_ignored() -> None:
    body = deltas({"x": ["a"]}, {"x": [{"index": 0}]}, {"x": [{"index": 0}]},
                  {"y": "text"}, {"y": THOUGHT}, {"y": THOUGHT}).body()
    assert list_findings(body) == [
        (0, 1, 3, "x: an entry merged by index into one that is not an object (0)")]
    failure = sdk_failure(body)
    assert failure is not None and failure.event == 3


def test_calls_without_index_are_tool_call_index_missing_alone() -> None:
    start = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    more = {"function": {"arguments": "{}"}}
    body = deltas({"tool_calls": [start]}, {"tool_calls": [more]}).body()
    assert Code.TOOL_CALL_INDEX_MISSING in codes(read(body))
    assert list_findings(body) == []
    failure = sdk_failure(body)
    assert failure is not None and failure.event == 1


def test_a_list_inside_a_call_is_the_delta_list_rule() -> None:
    start = {**call_start(0, "call_1", "f"), "x": THOUGHT}
    body = deltas({"tool_calls": [start]}, {"tool_calls": [{**call_arguments(0, "{}"),
                                                            "x": THOUGHT}]}).body()
    assert list_findings(body) == [(0, 1, 2, "tool_calls[0].x: an entry without index")]
    failure = sdk_failure(body)
    assert failure is not None and failure.event == 2


@st.composite
def recurring(draw: st.DrawFn, index: st.SearchStrategy[Any]) -> tuple[Stream, int, list[int]]:
    """A valid stream with two more chunks of one choice carrying the same extension list (at a
    depth of 0 to 2 objects), whose entries take their index from `index`; the choice and the
    places of the two chunks."""
    stream = draw(streams())
    choice = draw(st.integers(0, len(stream.owners[0]) - 1))
    key, depth = draw(EXTENSION_KEYS), draw(st.integers(0, 2))
    first = draw(st.integers(1, len(stream.payloads) - 1))
    second = draw(st.integers(first + 1, len(stream.payloads)))
    stream.insert(first, choice, nested(key, draw(entries(index)), depth))
    stream.insert(second, choice, nested(key, draw(entries(index)), depth))
    return stream, choice, [first, second]


@examples(100)
@given(recurring(st.sampled_from(NOT_INTEGERS)))
def test_any_list_of_objects_recurring_without_integer_indexes_is_found_where_the_sdk_raises(
        case):
    """At its return; or already at its first chunk when that one is merged by index (an entry
    has an `index` key, and the list is new inside an object the message already holds)."""
    stream, choice, places = case
    body = stream.body()
    (found,) = [f for f in read(body).findings if f.code is Code.DELTA_LIST_INDEX_MISSING]
    assert found.choice == choice
    assert found.position in [positions(body)[at] for at in places]
    failure = sdk_failure(body)
    assert failure is not None and found.position is not None
    assert failure.event == found.position.event


@examples(100)
@given(recurring(INTEGER_INDEXES))
def test_the_same_lists_with_integer_indexes_are_no_finding(case):
    stream, _, _ = case
    assert read(stream.body()).findings == []


@examples(100)
@given(recurring(st.sampled_from([*NOT_INTEGERS, 0, 1])), st.lists(st.integers(0, 4000),
                                                                     max_size=8))
def test_any_split_of_the_bytes_gives_the_same_findings(case, cuts):
    body = case[0].body()
    assert findings_in_pieces(body, cuts) == read(body).findings
