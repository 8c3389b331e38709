"""The comparator's rules, and the laws it must keep whatever the gateway does to the framing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.compare import check, compare, compare_captures
from calltap.dialects import openai_chat, transcribe
from calltap.sse import SSEParser
from calltap.transcript import Capture, Transcript
from fixtures.chat_stream import chunk, delta, split, sse, tool_call_stream, usage

FIXTURES = Path(__file__).parent / "fixtures" / "openai_chat"


def calls_stream(*calls: tuple[str, str], **options: Any) -> Transcript:
    """A transcript of a stream carrying `calls` (name, argument text) on indexes 0, 1, ..."""
    body = tool_call_stream(
        calls,
        ids=[f"call_{k}" for k in range(len(calls))],
        indexes=list(range(len(calls))),
        cuts=[[3] for _ in calls],
        **options,
    )
    return transcribe(Capture(body))


def text_stream(text: str, *, finish_reason: str | None = "stop", done: bool = True) -> Transcript:
    payloads = [
        chunk([delta(content=text, finish_reason=finish_reason)]),
        chunk([], usage=usage(5, 3)),
    ]
    return transcribe(Capture(sse(payloads, done=done)))


def found(comparison: Any) -> dict[Code, Any]:
    return {finding.code: finding for finding in comparison.findings}


def test_seed_one_of_two_interleaved_calls_is_dropped() -> None:
    upstream = transcribe(Capture((FIXTURES / "seed.upstream.sse").read_bytes()))
    downstream = transcribe(Capture((FIXTURES / "seed.one-call.sse").read_bytes()))
    comparison = compare(upstream, downstream)
    assert comparison.verdict == "diverged"
    assert [f.code for f in comparison.findings] == [
        Code.TOOL_CALLS_DROPPED,
        Code.TOOL_CALL_SET_CHANGED,
    ]
    dropped = comparison.findings[0]
    assert (dropped.side, dropped.choice, dropped.count) == ("downstream", 0, 1)
    assert dropped.position == downstream.choices[0].finish_position
    assert "clock" in dropped.detail


def test_seed_with_new_ids_and_calls_in_the_other_order_is_equal_with_cosmetic_findings() -> None:
    comparison = compare_captures(
        Capture((FIXTURES / "seed.upstream.sse").read_bytes()),
        Capture((FIXTURES / "seed.remapped.sse").read_bytes()),
    )
    assert comparison.verdict == "equal"
    codes = found(comparison)
    assert set(codes) == {Code.TOOL_CALL_ORDER_CHANGED, Code.TOOL_CALL_IDS_REMAPPED}
    assert codes[Code.TOOL_CALL_IDS_REMAPPED].count == 2
    clock = comparison.downstream.choices[0].tool_calls[0]
    assert (clock.name, clock.index) == ("clock", 0)
    assert codes[Code.TOOL_CALL_ORDER_CHANGED].position == clock.position


def test_same_function_with_other_arguments_is_arguments_changed_not_dropped() -> None:
    comparison = compare(
        calls_stream(("weather", '{"city": "Oslo"}'), ("clock", "{}")),
        calls_stream(("weather", '{"city": "Bergen"}'), ("clock", "{}")),
    )
    assert comparison.verdict == "diverged"
    codes = found(comparison)
    assert set(codes) == {Code.TOOL_CALL_ARGUMENTS_CHANGED, Code.TOOL_CALL_SET_CHANGED}
    assert codes[Code.TOOL_CALL_ARGUMENTS_CHANGED].position.event == 1


def test_a_call_the_provider_never_made_is_added_with_its_count() -> None:
    comparison = compare(
        calls_stream(("weather", "{}")),
        calls_stream(("weather", "{}"), ("delete_account", "{}"), ("delete_backups", "{}")),
    )
    codes = found(comparison)
    assert set(codes) == {Code.TOOL_CALLS_ADDED, Code.TOOL_CALL_SET_CHANGED}
    assert codes[Code.TOOL_CALLS_ADDED].count == 2


def test_identical_calls_are_a_multiset() -> None:
    comparison = compare(
        calls_stream(("ping", '{"host": "a"}'), ("ping", '{"host": "a"}')),
        calls_stream(("ping", '{"host": "a"}')),
    )
    assert found(comparison)[Code.TOOL_CALLS_DROPPED].count == 1


def test_arguments_compare_as_json_values() -> None:
    same = compare(
        calls_stream(("f", '{"n": 1, "b": true}')), calls_stream(("f", '{ "b":true,"n":1.0}'))
    )
    assert same.verdict == "equal"
    other = compare(calls_stream(("f", '{"n": 1}')), calls_stream(("f", '{"n": true}')))
    assert Code.TOOL_CALL_ARGUMENTS_CHANGED in found(other)


def test_invalid_arguments_compare_by_raw_text_and_a_shared_defect_is_not_a_divergence() -> None:
    broken = ("f", '{"n": 1')
    same = compare(calls_stream(broken), calls_stream(broken))
    assert same.verdict == "equal"
    assert [f.code for f in same.upstream.findings] == [Code.TOOL_ARGUMENTS_INVALID]
    assert [f.code for f in same.downstream.findings] == [Code.TOOL_ARGUMENTS_INVALID]
    other = compare(calls_stream(broken), calls_stream(("f", '{"n": 2')))
    assert set(found(other)) == {Code.TOOL_CALL_ARGUMENTS_CHANGED, Code.TOOL_CALL_SET_CHANGED}


def test_a_defect_only_downstream_is_a_divergence_on_the_downstream_side() -> None:
    comparison = compare(calls_stream(("f", "{}")), calls_stream(("f", "{}"), done=False))
    (finding,) = comparison.findings
    assert (finding.code, finding.side, comparison.verdict) == (
        Code.DONE_MISSING,
        "downstream",
        "diverged",
    )


def test_a_side_defect_counts_per_choice() -> None:
    upstream_choice_one = transcribe(
        Capture(sse([chunk([delta(0, content="a", finish_reason="stop"), delta(1, content="b")])]))
    )
    downstream_choice_zero = transcribe(
        Capture(sse([chunk([delta(0, content="a"), delta(1, content="b", finish_reason="stop")])]))
    )
    comparison = compare(upstream_choice_one, downstream_choice_zero)
    missing = [f for f in comparison.findings if f.code is Code.FINISH_REASON_MISSING]
    assert [(f.side, f.choice) for f in missing] == [("downstream", 0)]


def test_masked_upstream_eof_is_finish_reason_changed() -> None:
    comparison = compare(
        text_stream("due on", finish_reason=None, done=False), text_stream("due on")
    )
    assert set(found(comparison)) == {Code.FINISH_REASON_CHANGED}
    assert found(comparison)[Code.FINISH_REASON_CHANGED].detail == "None -> stop"


def test_text_changed_says_where_the_texts_part() -> None:
    comparison = compare(
        text_stream("The report is due on Friday."), text_stream("The report is due")
    )
    finding = found(comparison)[Code.TEXT_CHANGED]
    assert finding.detail == "upstream 28 chars, downstream 17 chars, first difference at char 17"


def test_usage_missing_changed_and_only_downstream() -> None:
    with_usage = calls_stream(("f", "{}"))
    without = calls_stream(("f", "{}"), tokens=None)
    other = calls_stream(("f", "{}"), tokens=(82, 40))
    assert set(found(compare(with_usage, without))) == {Code.USAGE_MISSING}
    assert set(found(compare(with_usage, other))) == {Code.USAGE_CHANGED}
    assert set(found(compare(without, with_usage))) == {Code.USAGE_CHANGED}
    assert compare(without, without).verdict == "equal"


def test_any_warning_makes_the_comparison_inconclusive_even_beside_a_fatal_finding() -> None:
    upstream = calls_stream(("f", "{}"), ("g", "{}"))
    downstream = calls_stream(("f", '{"id": 9007199254740993}'))
    comparison = compare(upstream, downstream)
    assert comparison.verdict == "inconclusive"
    warning = found(comparison)[Code.UNSAFE_INTEGER]
    assert (warning.side, warning.choice) == ("downstream", 0)


def test_check_verdicts() -> None:
    assert check(calls_stream(("f", "{}"))).verdict == "clean"
    assert check(calls_stream(("f", "{}"), done=False)).verdict == "defective"
    defective_and_uncertain = calls_stream(("f", '{"a": 1, "a": 2}'), done=False)
    result = check(defective_and_uncertain)
    assert result.verdict == "inconclusive"
    assert [f.code for f in result.findings] == [Code.DUPLICATE_KEY, Code.DONE_MISSING]


# --- laws ---------------------------------------------------------------------------------------

NAMES = st.sampled_from(["weather", "clock", "search", "send_mail"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
ARGUMENTS = st.dictionaries(st.text(min_size=1, max_size=8), VALUES, max_size=4)
CALLS = st.lists(st.tuples(NAMES, ARGUMENTS), min_size=1, max_size=4)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
SEPARATORS = st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : ")])


@st.composite
def rendering(draw: st.DrawFn, calls: list[tuple[str, dict]], text: str) -> bytes:
    """One faithful way to stream `text` then `calls`: any ids, call order, key order, chunking.
    Indexes follow the order in which the calls start, as clients need (TOOL_CALL_INDEX_GAP)."""
    texts = []
    for _, arguments in calls:
        order = draw(st.permutations(list(arguments)))
        reordered = {key: arguments[key] for key in order}
        texts.append(
            json.dumps(
                reordered, separators=draw(SEPARATORS), indent=draw(st.sampled_from([None, 2]))
            )
        )
    cuts = [draw(st.lists(st.integers(1, max(1, len(t) - 1)), max_size=5)) for t in texts]
    text_cuts = draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=5))
    tag = draw(st.text("abcdef0123456789", min_size=4, max_size=8))
    order = draw(st.permutations(range(len(calls))))
    rendered = [(calls[k][0], texts[k]) for k in order]
    return tool_call_stream(
        rendered,
        ids=[f"call_{tag}_{k}" for k in order],
        indexes=list(range(len(calls))),
        cuts=[cuts[k] for k in order],
        interleave=draw(st.booleans()),
        text_parts=split(text, text_cuts) if text else (),
    )


@examples(60, deadline=None)
@given(data=st.data(), calls=CALLS, text=TEXT)
def test_any_faithful_rendering_compares_equal(data: st.DataObject, calls: list, text: str) -> None:
    upstream = data.draw(rendering(calls, text))
    downstream = data.draw(rendering(calls, text))
    comparison = compare_captures(Capture(upstream), Capture(downstream))
    assert comparison.verdict == "equal", comparison.findings
    assert {f.code.severity for f in comparison.findings} <= {"cosmetic"}


@examples(40, deadline=None)
@given(data=st.data(), calls=CALLS, text=TEXT, crlf=st.booleans())
def test_any_split_of_the_byte_stream_gives_the_same_transcript(
    data: st.DataObject, calls: list, text: str, crlf: bool
) -> None:
    body = data.draw(rendering(calls, text))
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=12)))
    parser = SSEParser()
    events = []
    for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True):
        events += parser.feed(body[start:end])
    assert parser.close() is None
    pieces = openai_chat.reduce_events(events)
    whole = transcribe(Capture(body))
    assert compare(whole, pieces).findings == []
    assert [[c.arguments for c in ch.tool_calls] for ch in pieces.choices.values()] == [
        [c.arguments for c in ch.tool_calls] for ch in whole.choices.values()
    ]


@examples(60, deadline=None)
@given(
    data=st.data(), calls=st.lists(st.tuples(NAMES, ARGUMENTS), min_size=2, max_size=4), text=TEXT
)
def test_dropping_any_one_call_is_tool_calls_dropped_with_count_one(
    data: st.DataObject, calls: list, text: str
) -> None:
    dropped = data.draw(st.integers(0, len(calls) - 1))
    upstream = data.draw(rendering(calls, text))
    downstream = data.draw(rendering(calls[:dropped] + calls[dropped + 1 :], text))
    comparison = compare_captures(Capture(upstream), Capture(downstream))
    codes = found(comparison)
    assert comparison.verdict == "diverged"
    assert set(codes) - {Code.TOOL_CALL_ORDER_CHANGED, Code.TOOL_CALL_IDS_REMAPPED} == {
        Code.TOOL_CALLS_DROPPED,
        Code.TOOL_CALL_SET_CHANGED,
    }
    assert codes[Code.TOOL_CALLS_DROPPED].count == 1
    assert (
        codes[Code.TOOL_CALLS_DROPPED].position == comparison.downstream.choices[0].finish_position
    )


def test_ids_a_gateway_gives_calls_that_had_none_are_no_remapping() -> None:
    """Ollama's and Gemini's calls carry no id; the gateway must make some for its client."""
    up = calls_stream(("weather", "{}"), ("clock", "{}"))
    down = calls_stream(("weather", "{}"), ("clock", "{}"))
    for order, call in enumerate(up.choices[0].tool_calls):
        call.id = None
        down.choices[0].tool_calls[order].id = f"call_gw_{order}"
    assert compare(up, down).findings == []
    down.choices[0].tool_calls[0].index = 1
    down.choices[0].tool_calls[1].index = 0
    assert Code.TOOL_CALL_IDS_REMAPPED in found(compare(up, down))
