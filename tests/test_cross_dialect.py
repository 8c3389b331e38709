"""A translating gateway: Anthropic Messages or OpenAI Responses upstream, OpenAI Chat downstream.

`compare` works on transcripts, so a faithful translation (new ids, tool indexes renumbered from
0, usage in the other shape) must come out equal with only cosmetic findings, and a lossy one must
name what was lost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.compare import Comparison, compare
from calltap.dialects import transcribe
from calltap.transcript import Capture, Transcript
from fixtures import chat_stream as chat
from fixtures.anthropic import stream as anthropic
from fixtures.openai_responses import stream as responses

TEXT = ["I'll check both", " at once."]
CALLS = [
    ("get_weather", '{"city": "Lisbon", "unit": "celsius"}'),
    ("find_places", '{"city": "Lisbon", "kind": "museum", "open_now": true}'),
]
TOOL_IDS = ["toolu_01A09q90qw90lq917835lq9", "toolu_01B7n2mWk8e4kJqYhVz3Rt5P"]
CHAT_IDS = ["call_Wq7Lz2Nc4Yb8Tr1Hx5Kd", "call_Fp3Jm6Vs9Qa2Ue4Gn8Rb"]


def read(body: bytes) -> Transcript:
    return transcribe(Capture(body))


def codes(comparison: Comparison) -> set[Code]:
    return {finding.code for finding in comparison.findings}


def count_of(comparison: Comparison, code: Code) -> int | None:
    return next(finding.count for finding in comparison.findings if finding.code is code)


def anthropic_stream(
    calls: Sequence[tuple[str, str]] = CALLS,
    *,
    cuts: Sequence[Sequence[int]] = ((9, 20), (12, 30, 41)),
    stop_reason: str = "tool_use",
    cache_read: int = 0,
) -> bytes:
    """Text at block 0, then one tool_use block per call from block 1."""
    start = anthropic.message_start(input_tokens=72)
    start["message"]["usage"]["cache_read_input_tokens"] = cache_read
    events = [start, anthropic.PING, *anthropic.text_block(0, TEXT)]
    for k, (name, arguments) in enumerate(calls):
        fragments = anthropic.split(arguments, cuts[k])
        events += anthropic.tool_block(k + 1, TOOL_IDS[k], name, fragments)
    events += [anthropic.message_delta(stop_reason, 41), anthropic.STOP]
    return anthropic.sse(events)


def chat_translation(
    calls: Sequence[tuple[str, str]] = CALLS,
    *,
    finish_reason: str = "tool_calls",
    tokens: tuple[int, int] = (72, 41),
    cuts: Sequence[Sequence[int]] = ((5,), (7, 19)),
) -> bytes:
    """The Chat Completions stream a translating gateway hands the client: indexes from 0."""
    return chat.tool_call_stream(
        calls,
        ids=CHAT_IDS[: len(calls)],
        indexes=list(range(len(calls))),
        cuts=cuts[: len(calls)],
        interleave=False,
        text_parts=TEXT,
        finish_reason=finish_reason,
        tokens=tokens,
    )


def responses_stream(
    calls: Sequence[tuple[str, str]] = CALLS,
    *,
    status: str = "completed",
    incomplete_reason: str | None = None,
) -> bytes:
    """A message item with the text at output 0, then one function_call item per call."""
    events = [*responses.opening(), *responses.message_item(0, "msg_a", TEXT)]
    for k, (name, arguments) in enumerate(calls):
        fragments = anthropic.split(arguments, (4, 11))
        events += responses.function_call_item(k + 1, f"fc_{k}", CHAT_IDS[k], name, fragments)
    terminal = responses.response(
        status, usage=responses.usage(72, 41), incomplete_reason=incomplete_reason
    )
    events.append({"type": f"response.{status}", "response": terminal})
    return responses.sse(events)


ARGUMENTS = st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.one_of(st.integers(-1000, 1000), st.text(max_size=8), st.booleans(), st.none()),
    max_size=4,
)


@examples(40, deadline=None)
@given(
    arguments=st.lists(ARGUMENTS, min_size=2, max_size=2),
    up_cuts=st.lists(st.lists(st.integers(0, 60), max_size=5), min_size=2, max_size=2),
    down_cuts=st.lists(st.lists(st.integers(0, 60), max_size=5), min_size=2, max_size=2),
)
def test_a_faithful_chat_translation_of_parallel_tool_use_is_equal(
    arguments: list[dict[str, Any]], up_cuts: list[list[int]], down_cuts: list[list[int]]
) -> None:
    calls = [("get_weather", json.dumps(arguments[0])), ("find_places", json.dumps(arguments[1]))]
    comparison = compare(
        read(anthropic_stream(calls, cuts=up_cuts)),
        read(chat_translation(calls, cuts=down_cuts)),
    )
    assert comparison.upstream.dialect == "anthropic.messages"
    assert comparison.downstream.dialect == "openai.chat"
    assert comparison.verdict == "equal"
    assert codes(comparison) == {Code.TOOL_CALL_IDS_REMAPPED}
    assert count_of(comparison, Code.TOOL_CALL_IDS_REMAPPED) == 2


def test_a_translation_missing_the_second_tool_use_drops_it() -> None:
    comparison = compare(read(anthropic_stream()), read(chat_translation(CALLS[:1])))
    assert comparison.verdict == "diverged"
    assert codes(comparison) == {
        Code.TOOL_CALLS_DROPPED,
        Code.TOOL_CALL_SET_CHANGED,
        Code.TOOL_CALL_IDS_REMAPPED,
    }
    assert count_of(comparison, Code.TOOL_CALLS_DROPPED) == 1
    dropped = next(f for f in comparison.findings if f.code is Code.TOOL_CALLS_DROPPED)
    assert dropped.detail == "missing downstream: find_places"


def test_max_tokens_translated_as_stop_is_finish_reason_changed_and_as_length_is_equal() -> None:
    upstream = read(anthropic_stream(stop_reason="max_tokens"))
    as_stop = compare(upstream, read(chat_translation(finish_reason="stop")))
    assert as_stop.verdict == "diverged"
    assert codes(as_stop) == {Code.FINISH_REASON_CHANGED, Code.TOOL_CALL_IDS_REMAPPED}
    changed = next(f for f in as_stop.findings if f.code is Code.FINISH_REASON_CHANGED)
    assert changed.detail == "max_tokens (length) -> stop"
    assert compare(upstream, read(chat_translation(finish_reason="length"))).verdict == "equal"


def test_cache_tokens_count_as_prompt_tokens_across_the_translation() -> None:
    upstream = read(anthropic_stream(cache_read=1000))
    with_cache = compare(upstream, read(chat_translation(tokens=(1072, 41))))
    assert with_cache.verdict == "equal"
    without_cache = compare(upstream, read(chat_translation(tokens=(72, 41))))
    assert codes(without_cache) == {Code.USAGE_CHANGED, Code.TOOL_CALL_IDS_REMAPPED}


def test_a_faithful_chat_translation_of_a_responses_stream_is_equal() -> None:
    comparison = compare(read(responses_stream()), read(chat_translation()))
    assert comparison.upstream.dialect == "openai.responses"
    assert comparison.verdict == "equal"
    assert codes(comparison) == {Code.TOOL_CALL_IDS_REMAPPED}


def test_a_responses_translation_missing_the_second_call_drops_it() -> None:
    comparison = compare(read(responses_stream()), read(chat_translation(CALLS[:1])))
    assert comparison.verdict == "diverged"
    assert {Code.TOOL_CALLS_DROPPED, Code.TOOL_CALL_SET_CHANGED} <= codes(comparison)
    assert count_of(comparison, Code.TOOL_CALLS_DROPPED) == 1


def test_an_incomplete_response_translated_as_stop_is_finish_reason_changed() -> None:
    upstream = read(responses_stream(status="incomplete", incomplete_reason="max_output_tokens"))
    comparison = compare(upstream, read(chat_translation(finish_reason="stop")))
    assert Code.FINISH_REASON_CHANGED in codes(comparison)
    assert compare(upstream, read(chat_translation(finish_reason="length"))).verdict == "equal"


def anthropic_error_stream() -> bytes:
    start = anthropic.message_start(input_tokens=72)
    events = [start, *anthropic.text_block(0, TEXT)[:-1], anthropic.error()]
    return anthropic.sse(events)


def chat_error_translation(*, with_error: bool) -> bytes:
    """The text so far, the usage message_start reported, then the error unless it was lost."""
    payloads: list[dict[str, Any] | str] = [
        chat.chunk([chat.delta(role="assistant", content="")]),
        *(chat.chunk([chat.delta(content=part)]) for part in TEXT),
        chat.chunk([], usage=chat.usage(72, 2)),
    ]
    if with_error:
        payloads.append({"error": {"message": "Overloaded", "type": "overloaded_error"}})
    return chat.sse(payloads, done=False)


def test_an_anthropic_error_event_translated_into_an_error_payload_reached_the_client() -> None:
    comparison = compare(
        read(anthropic_error_stream()), read(chat_error_translation(with_error=True))
    )
    assert comparison.verdict == "equal"
    assert comparison.findings == []


def test_an_anthropic_error_event_lost_in_translation_is_error_dropped() -> None:
    comparison = compare(
        read(anthropic_error_stream()), read(chat_error_translation(with_error=False))
    )
    assert comparison.verdict == "diverged"
    assert codes(comparison) == {Code.ERROR_DROPPED}


def test_ollama_stop_after_calls_forwarded_as_stop_names_both_meanings():
    """Ollama says `stop` after tool calls, which means tool_calls; a gateway that forwards the
    word changes the meaning, and the finding says so rather than "stop -> stop"."""
    calls = [{"function": {"name": name, "arguments": json.loads(arguments)}}
             for name, arguments in CALLS]
    lines = [
        {"model": "llama3.1", "message": {"role": "assistant", "content": "".join(TEXT),
                                          "tool_calls": calls}, "done": False},
        {"model": "llama3.1", "message": {"role": "assistant", "content": ""}, "done": True,
         "done_reason": "stop", "prompt_eval_count": 72, "eval_count": 41},
    ]
    upstream = transcribe(Capture(b"".join(json.dumps(line).encode() + b"\n" for line in lines),
                                  path="/api/chat", content_type="application/x-ndjson"))

    comparison = compare(upstream, read(chat_translation(finish_reason="stop")))

    changed = next(f for f in comparison.findings if f.code is Code.FINISH_REASON_CHANGED)
    assert changed.detail == "stop (tool_calls) -> stop"
