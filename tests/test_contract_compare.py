"""Every field of every cross-side finding, asserted whole: which side, which choice, how many,
where, and the words a reader gets. A finding that names the wrong choice or the wrong event sends
whoever reads the report to the wrong place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from calltap.codes import Code
from calltap.compare import compare, compare_captures
from calltap.dialects import transcribe
from calltap.transcript import Capture, Finding, Transcript
from fixtures.chat_stream import call_start, chunk, delta, sse, usage

ANTHROPIC = Path(__file__).parent / "fixtures" / "anthropic"


def stream(*payloads: dict[str, Any], done: bool = True) -> Transcript:
    return transcribe(Capture(sse(payloads, done=done)))


Said = tuple[str, list[tuple[str, str]]]
"""What one choice says: its text and its calls (name, argument text)."""


def answer(*choices: Said, tokens: tuple[int, int] = (5, 3)) -> Transcript:
    """A stream with choice k saying `choices[k]`: its text, then each call in a chunk of its own
    (ids `c<choice>_<call>`); then every finish in one chunk, and the usage."""
    payloads = []
    for index, (text, calls) in enumerate(choices):
        payloads.append(chunk([delta(index, content=text)]))
        payloads += [
            chunk([delta(index, tool_calls=[call_start(k, f"c{index}_{k}", name, arguments)])])
            for k, (name, arguments) in enumerate(calls)
        ]
    finishes = [
        delta(index, finish_reason="tool_calls" if calls else "stop")
        for index, (_, calls) in enumerate(choices)
    ]
    payloads.append(chunk(finishes))
    payloads.append(chunk([], usage=usage(*tokens)))
    return stream(*payloads)


def test_findings_on_the_second_choice_name_it_and_point_at_its_finish() -> None:
    upstream = answer(("a", []), ("Oslo", [("f", "{}"), ("g", "{}")]))
    downstream = answer(("a", []), ("Bergen", [("f", "{}")]))
    finish = downstream.choices[1].finish_position
    assert finish is not None
    assert compare(upstream, downstream).findings == [
        Finding(
            Code.TEXT_CHANGED,
            "downstream",
            1,
            position=finish,
            detail="upstream 4 chars, downstream 6 chars, first difference at char 0",
        ),
        Finding(
            Code.TOOL_CALLS_DROPPED,
            "downstream",
            1,
            count=1,
            position=finish,
            detail="missing downstream: g",
        ),
        Finding(Code.TOOL_CALL_SET_CHANGED, "downstream", 1, count=1, position=finish),
    ]


def test_one_added_call_is_counted_once_at_the_call() -> None:
    downstream = answer(("", [("f", "{}"), ("h", '{"x": 1}')]))
    comparison = compare(answer(("", [("f", "{}")])), downstream)
    added = downstream.choices[0].tool_calls[1]
    assert comparison.verdict == "diverged"
    assert comparison.findings == [
        Finding(
            Code.TOOL_CALLS_ADDED,
            "downstream",
            0,
            count=1,
            position=added.position,
            detail="only downstream: h",
        ),
        Finding(
            Code.TOOL_CALL_SET_CHANGED,
            "downstream",
            0,
            count=1,
            position=downstream.choices[0].finish_position,
        ),
    ]


def test_two_dropped_calls_are_one_finding_naming_both_in_upstream_order() -> None:
    downstream = answer(("", [("g", "{}")]))
    comparison = compare(answer(("", [("f", "{}"), ("g", "{}"), ("h", "{}")])), downstream)
    finish = downstream.choices[0].finish_position
    assert comparison.findings == [
        Finding(
            Code.TOOL_CALLS_DROPPED,
            "downstream",
            0,
            count=2,
            position=finish,
            detail="missing downstream: f, h",
        ),
        Finding(Code.TOOL_CALL_SET_CHANGED, "downstream", 0, count=2, position=finish),
        Finding(
            Code.TOOL_CALL_IDS_REMAPPED,
            "downstream",
            0,
            count=1,
            position=downstream.choices[0].tool_calls[0].position,
            detail="c0_1#1 -> c0_0#0",
        ),
    ]


def test_two_changed_calls_each_say_what_changed_and_the_set_counts_both() -> None:
    downstream = answer(("", [("f", '{"a": 2}'), ("g", '{"b": 2}')]))
    comparison = compare(answer(("", [("f", '{"a": 1}'), ("g", '{"b": 1}')])), downstream)
    f, g = downstream.choices[0].tool_calls
    assert comparison.findings == [
        Finding(
            Code.TOOL_CALL_ARGUMENTS_CHANGED,
            "downstream",
            0,
            position=f.position,
            detail='f: {"a": 1} -> {"a": 2}',
        ),
        Finding(
            Code.TOOL_CALL_ARGUMENTS_CHANGED,
            "downstream",
            0,
            position=g.position,
            detail='g: {"b": 1} -> {"b": 2}',
        ),
        Finding(
            Code.TOOL_CALL_SET_CHANGED,
            "downstream",
            0,
            count=2,
            position=downstream.choices[0].finish_position,
        ),
    ]


def test_calls_in_another_order_point_at_the_first_call_out_of_place() -> None:
    downstream = answer(("", [("g", "{}"), ("f", "{}")]))
    comparison = compare(answer(("", [("f", "{}"), ("g", "{}")])), downstream)
    g, _ = downstream.choices[0].tool_calls
    assert comparison.verdict == "equal"
    assert comparison.findings[0] == Finding(
        Code.TOOL_CALL_ORDER_CHANGED, "downstream", 0, position=g.position
    )
    assert comparison.findings[1].detail == "c0_1#1 -> c0_0#0; c0_0#0 -> c0_1#1"


def test_a_dropped_choice_points_at_the_end_and_an_added_one_at_its_start() -> None:
    one, two = answer(("a", [])), answer(("a", []), ("b", []))
    assert compare(two, one).findings == [
        Finding(Code.CHOICE_DROPPED, "downstream", 1, position=one.end_position)
    ]
    assert compare(one, two).findings == [
        Finding(Code.CHOICE_ADDED, "downstream", 1, position=two.choices[1].position)
    ]


def test_text_changed_without_a_finish_points_at_the_end_of_the_stream() -> None:
    upstream = stream(chunk([delta(content="abc", finish_reason="stop")]))
    downstream = stream(chunk([delta(content="abd")]), done=False)
    assert compare(upstream, downstream).findings == [
        Finding(
            Code.TEXT_CHANGED,
            "downstream",
            0,
            position=downstream.end_position,
            detail="upstream 3 chars, downstream 3 chars, first difference at char 2",
        ),
        Finding(Code.FINISH_REASON_MISSING, "downstream", 0, position=downstream.end_position),
        Finding(Code.DONE_MISSING, "downstream", position=downstream.end_position),
    ]


def test_finish_reason_changed_says_both_raw_reasons_at_the_downstream_finish() -> None:
    upstream = stream(chunk([delta(content="a", finish_reason="stop")]))
    downstream = stream(chunk([delta(content="a", finish_reason="length")]))
    assert compare(upstream, downstream).findings == [
        Finding(
            Code.FINISH_REASON_CHANGED,
            "downstream",
            0,
            position=downstream.choices[0].finish_position,
            detail="stop -> length",
        )
    ]


def test_a_warning_only_upstream_is_on_the_upstream_side() -> None:
    upstream = answer(("", [("f", '{"a": 1, "a": 2}')]))
    comparison = compare(upstream, answer(("", [("f", '{"a": 2}')])))
    assert comparison.verdict == "inconclusive"
    assert comparison.findings == [
        Finding(
            Code.DUPLICATE_KEY,
            "upstream",
            0,
            position=upstream.choices[0].tool_calls[0].position,
            detail="at /a",
        )
    ]


def test_usage_changed_says_both_counts_at_the_downstream_usage() -> None:
    upstream, downstream = answer(("a", [])), answer(("a", []), tokens=(5, 4))
    assert compare(upstream, downstream).findings == [
        Finding(
            Code.USAGE_CHANGED,
            "downstream",
            position=downstream.usage_position,
            detail="prompt 5, completion 3, total 8 -> prompt 5, completion 4, total 9",
        )
    ]


def test_usage_only_downstream_is_changed_from_none_and_only_upstream_is_missing() -> None:
    with_usage = answer(("a", []))
    without = stream(chunk([delta(content="a", finish_reason="stop")]))
    assert compare(without, with_usage).findings == [
        Finding(
            Code.USAGE_CHANGED,
            "downstream",
            position=with_usage.usage_position,
            detail="none -> prompt 5, completion 3, total 8",
        )
    ]
    assert compare(with_usage, without).findings == [
        Finding(Code.USAGE_MISSING, "downstream", position=without.end_position)
    ]
    assert compare(with_usage, without, usage_requested=False).findings == []


def test_a_request_that_asks_for_no_usage_excuses_it_only_in_chat_completions() -> None:
    """`stream_options` is a Chat Completions field: an Anthropic answer always carries usage, so
    whatever the request says, a whole body without it is USAGE_MISSING."""
    body = json.loads((ANTHROPIC / "tools.upstream.json").read_bytes())
    without_usage = json.dumps({key: value for key, value in body.items() if key != "usage"})
    comparison = compare_captures(
        Capture((ANTHROPIC / "tools.upstream.json").read_bytes()),
        Capture(without_usage.encode()),
        downstream_request=b'{"stream": true}',
    )
    assert comparison.findings == [
        Finding(Code.USAGE_MISSING, "downstream", position=comparison.downstream.end_position)
    ]
    text = chunk([delta(content="a", finish_reason="stop")])
    chat = compare_captures(
        Capture(sse([text, chunk([], usage=usage(1, 1))])),
        Capture(sse([text])),
        downstream_request=b'{"stream": true}',
    )
    assert chat.findings == []


def test_a_dropped_error_counts_the_errors_sent_and_quotes_them() -> None:
    error = {"error": {"type": "server_error", "code": 502, "message": "overloaded"}}
    upstream = stream(chunk([delta(content="a")]), error, error, done=False)
    downstream = stream(chunk([delta(content="a", finish_reason="stop")]))
    findings = compare(upstream, downstream).findings
    assert findings[-1] == Finding(
        Code.ERROR_DROPPED,
        "downstream",
        count=2,
        position=downstream.end_position,
        detail="server_error: 502: overloaded; server_error: 502: overloaded",
    )


def test_added_calls_are_named_in_downstream_order() -> None:
    downstream = answer(("", [("i", "{}"), ("f", "{}"), ("h", "{}")]))
    (added, _, _) = compare(answer(("", [("f", "{}")])), downstream).findings
    assert (added.code, added.count, added.position, added.detail) == (
        Code.TOOL_CALLS_ADDED,
        2,
        downstream.choices[0].tool_calls[0].position,
        "only downstream: i, h",
    )
