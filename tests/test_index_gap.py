"""TOOL_CALL_INDEX_GAP: a streamed choice's tool-call indexes run 0, 1, 2, … in order of first
appearance, or list-based client accumulators (openai's `chat.completions.stream()`) fail.

The shape that motivated it: a gateway bridging Chat Completions clients to the Responses API kept
the provider's `output_index` (a reasoning item at 0), so the two calls streamed at 1 and 2.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from calltap.codes import Code
from calltap.compare import compare, compare_captures
from calltap.transcript import Capture, Position
from dialect_helpers import codes, read
from fixtures.chat_stream import (
    call_arguments,
    call_start,
    chunk,
    delta,
    sse,
    tool_call_stream,
)

CALLS = [("weather", '{"city": "Taipei"}'), ("clock", '{"zone": "UTC"}'), ("search", "{}")]


def stream(indexes: list[int], *, interleave: bool = True) -> bytes:
    """The calls of CALLS[:len(indexes)], call k starting on `indexes[k]`, in list order."""
    calls = CALLS[: len(indexes)]
    return tool_call_stream(
        calls,
        ids=[f"call_{k}" for k in range(len(calls))],
        indexes=indexes,
        cuts=[[3, 9]] * len(calls),
        interleave=interleave,
    )


def test_two_calls_at_one_and_two_are_one_gap_finding_counting_both() -> None:
    transcript = read(stream([1, 2]))
    (gap,) = [f for f in transcript.findings if f.code is Code.TOOL_CALL_INDEX_GAP]
    first = transcript.choices[0].tool_calls[0]
    assert (gap.side, gap.choice, gap.count) == (None, 0, 2)
    assert gap.position == first.position == Position(1, first.position.byte)
    assert gap.detail == "index 1 first seen where 0 was expected"
    assert [call.index for call in transcript.choices[0].tool_calls] == [1, 2]
    assert [call.name for call in transcript.choices[0].tool_calls] == ["weather", "clock"]


def test_a_skipped_index_counts_only_the_calls_that_land_off_place() -> None:
    transcript = read(stream([0, 2, 3]))
    (gap,) = [f for f in transcript.findings if f.code is Code.TOOL_CALL_INDEX_GAP]
    assert gap.count == 2
    assert gap.detail == "index 2 first seen where 1 was expected"


def test_contiguous_indexes_and_indexless_calls_are_no_gap() -> None:
    assert Code.TOOL_CALL_INDEX_GAP not in codes(read(stream([0, 1, 2])))
    indexless = sse(
        [
            chunk([delta(tool_calls=[{"id": "a", "function": {"name": "f", "arguments": "{}"}}])]),
            chunk([delta(tool_calls=[{"id": "b", "function": {"name": "g", "arguments": "{}"}}])]),
            chunk([delta(finish_reason="tool_calls")]),
        ]
    )
    assert codes(read(indexless)) == [Code.TOOL_CALL_INDEX_MISSING]


def test_each_choice_is_judged_on_its_own_indexes() -> None:
    body = sse(
        [
            chunk([delta(tool_calls=[call_start(0, "a", "f")], index=0)]),
            chunk([delta(tool_calls=[call_start(1, "b", "g")], index=1)]),
            chunk([delta(tool_calls=[call_arguments(1, "{}")], index=1)]),
            chunk([delta(finish_reason="tool_calls", index=0)]),
            chunk([delta(finish_reason="tool_calls", index=1)]),
        ]
    )
    (gap,) = [f for f in read(body).findings if f.code is Code.TOOL_CALL_INDEX_GAP]
    assert (gap.choice, gap.count) == (1, 1)


def test_a_json_body_has_no_indexes_to_check() -> None:
    body = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "a", "index": 3, "type": "function",
                         "function": {"name": "f", "arguments": "{}"}},
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    assert codes(read(json.dumps(body).encode())) == []


def test_a_gap_only_downstream_is_a_divergence_and_one_on_both_sides_is_not() -> None:
    faithful, shifted = Capture(stream([0, 1])), Capture(stream([1, 2]))
    diverged = compare_captures(faithful, shifted)
    assert diverged.verdict == "diverged"
    gaps = [f for f in diverged.findings if f.code is Code.TOOL_CALL_INDEX_GAP]
    assert [(f.side, f.choice, f.count) for f in gaps] == [("downstream", 0, 2)]
    inherited = compare_captures(shifted, Capture(stream([1, 2])))
    assert inherited.verdict == "equal"
    assert Code.TOOL_CALL_INDEX_GAP in codes(inherited.downstream)


@given(
    order=st.permutations(range(3)).flatmap(
        lambda order: st.tuples(st.just(list(order)), st.integers(0, 3))
    ),
    interleave=st.booleans(),
)
def test_any_index_permutation_is_a_gap_exactly_where_an_index_lands_off_place(
    order: tuple[list[int], int], interleave: bool
) -> None:
    """Calls starting on `permutation + offset`: a gap unless each call takes the next free
    index, counted once per call that does not."""
    permutation, offset = order
    indexes = [index + offset for index in permutation]
    transcript = read(stream(indexes, interleave=interleave))
    gaps = [f for f in transcript.findings if f.code is Code.TOOL_CALL_INDEX_GAP]
    off_place = sum(1 for place, index in enumerate(indexes) if index != place)
    assert [f.count for f in gaps] == ([off_place] if off_place else [])
    assert compare(transcript, transcript).verdict == "equal"
