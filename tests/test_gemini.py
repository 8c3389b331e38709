"""The Gemini reducer: what a careful client makes of each stream, array and body."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap import jsonarray, sse
from calltap.codes import Code
from calltap.compare import compare
from calltap.dialects import (
    COMPARED_PATHS,
    anthropic,
    gemini,
    openai_chat,
    openai_responses,
    request_conversation,
    usage_requested,
)
from calltap.proxy.fingerprint import request_fingerprint
from calltap.transcript import Position, Transcript
from dialect_helpers import (
    ARGUMENTS,
    assert_survives,
    clean_choice,
    codes,
    damaged,
    read,
    record_starts,
    token_counts,
)
from fixtures import chat_stream as chat
from fixtures.gemini.stream import (
    GEMINI_PATH,
    VERTEX_PATH,
    array,
    call,
    candidate,
    chunk,
    error,
    text,
    text_stream,
    usage,
)
from fixtures.gemini.stream import sse as gemini_sse

FIXTURES = Path(__file__).parent / "fixtures"
GEMINI = FIXTURES / "gemini"
NAME = "google.gemini"
WEATHER = {"city": "Lisbon", "unit": "celsius"}
PLACES = {"city": "Lisbon", "kind": "museum", "open_now": True}


def fixture(name: str) -> bytes:
    return (GEMINI / name).read_bytes()


def calls_of(transcript: Transcript, choice: int = 0) -> list[tuple[str, Any, int | None]]:
    return [
        (call.name, call.decoded.value, call.index)
        for call in transcript.choices[choice].tool_calls
    ]


def finished(reason: str, *parts: dict[str, Any]) -> bytes:
    return gemini_sse([chunk([candidate(list(parts) or [text("Hi")], finish=reason)], None)])


# What each body holds


def test_a_text_stream_joins_its_parts_and_ends_at_its_finish_reason() -> None:
    body = fixture("text.sse")
    transcript = read(body)
    choice = clean_choice(transcript, NAME, streaming=True)
    assert choice.text == "Lisbon is sunny today, 24 °C with a light breeze."
    assert (choice.finish_reason, choice.raw_finish_reason) == ("stop", "STOP")
    assert (transcript.events, transcript.terminal_seen) == (3, True)
    assert token_counts(transcript) == (9, 12 + 21, 42)
    last = body.rindex(b"data: ")
    assert transcript.end_position == Position(2, last)
    assert choice.finish_position == transcript.usage_position == Position(2, last)


def test_parallel_function_calls_are_whole_calls_indexed_in_order() -> None:
    transcript = read(fixture("tools.sse"))
    choice = clean_choice(transcript, NAME, streaming=True)
    assert choice.text == "I'll check the weather and look for museums at once."
    assert (choice.finish_reason, choice.raw_finish_reason) == ("tool_calls", "STOP")
    assert calls_of(transcript) == [("get_weather", WEATHER, 0), ("find_places", PLACES, 1)]
    assert [(call.id, call.fragments) for call in choice.tool_calls] == [(None, 1), (None, 1)]
    assert token_counts(transcript) == (83, 40 + 104, 227)


def test_the_array_framing_reads_as_the_stream_with_element_positions() -> None:
    body = fixture("tools.array.json")
    as_array = read(body, path=VERTEX_PATH)
    as_stream = read(fixture("tools.sse"))
    assert as_array.findings == []
    assert (as_array.dialect, as_array.streaming, as_array.events) == (NAME, True, 2)
    assert as_array.choices[0].text == as_stream.choices[0].text
    assert calls_of(as_array) == calls_of(as_stream)
    assert as_array.usage == as_stream.usage
    second = body.index(b"\r\n,") + 3
    assert as_array.choices[0].tool_calls[0].position == Position(1, second)
    assert compare(as_stream, as_array).findings == []


def test_a_generate_content_body_holds_the_whole_turn() -> None:
    transcript = read(fixture("tools.json"), path="/v1beta/models/gemini-2.5-flash:generateContent")
    choice = clean_choice(transcript, NAME, streaming=False)
    assert choice.text == "I'll check the weather and look for museums at once."
    assert choice.finish_reason == "tool_calls"
    assert calls_of(transcript) == [("get_weather", WEATHER, 0), ("find_places", PLACES, 1)]
    assert compare(read(fixture("tools.sse")), transcript).verdict == "equal"


def test_calls_across_chunks_are_parallel_and_keep_their_ids_and_empty_args() -> None:
    body = gemini_sse(
        [
            chunk([candidate([call("get_weather", WEATHER, "fc_1")])], None),
            chunk([candidate([call("now", None, "fc_2")])], None),
            chunk([candidate([call("find_places", PLACES)], finish="STOP")], usage(9, 30)),
        ]
    )
    transcript = read(body)
    assert calls_of(transcript) == [
        ("get_weather", WEATHER, 0),
        ("now", {}, 1),
        ("find_places", PLACES, 2),
    ]
    assert [call.id for call in transcript.choices[0].tool_calls] == ["fc_1", "fc_2", None]
    assert transcript.findings == []


def test_thought_parts_are_not_answer_text() -> None:
    body = gemini_sse(
        [
            chunk([candidate([text("**Planning** the reply", thought=True)])], None),
            chunk([candidate([text("Hello"), text(" again", thought=True)])], None),
            chunk([candidate([text(" there.")], finish="STOP")], usage(3, 2, 40)),
        ]
    )
    assert read(body).choices[0].text == "Hello there."


def test_two_candidates_are_two_choices_keyed_by_index_or_position() -> None:
    body = gemini_sse(
        [
            chunk([candidate([text("Yes")], index=None), candidate([text("No")], index=None)], {}),
            chunk([candidate([text(", gladly.")], index=1, finish="STOP")], None),
            chunk([candidate([text(", sure.")], finish="MAX_TOKENS")], usage(5, 8)),
        ]
    )
    transcript = read(body)
    assert [
        (index, choice.text, choice.finish_reason) for index, choice in transcript.choices.items()
    ] == [(0, "Yes, sure.", "length"), (1, "No, gladly.", "stop")]
    assert transcript.findings == []


def test_an_index_that_is_not_an_integer_is_the_position_in_the_list() -> None:
    second = {**candidate([text("No")], finish="STOP"), "index": "1"}
    body = gemini_sse([chunk([candidate([text("Yes")], finish="STOP"), second], None)])
    assert {i: c.text for i, c in read(body).choices.items()} == {0: "Yes", 1: "No"}


@pytest.mark.parametrize(
    ("reason", "normalized"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("LANGUAGE", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("IMAGE_SAFETY", "content_filter"),
        ("IMAGE_PROHIBITED_CONTENT", "content_filter"),
        ("IMAGE_RECITATION", "content_filter"),
        ("OTHER", "OTHER"),
        ("MALFORMED_FUNCTION_CALL", "MALFORMED_FUNCTION_CALL"),
        ("UNEXPECTED_TOOL_CALL", "UNEXPECTED_TOOL_CALL"),
        ("TOO_MANY_TOOL_CALLS", "TOO_MANY_TOOL_CALLS"),
        ("SOME_FUTURE_REASON", "SOME_FUTURE_REASON"),
    ],
)
def test_finish_reasons_are_normalized(reason: str, normalized: str) -> None:
    choice = read(finished(reason)).choices[0]
    assert (choice.finish_reason, choice.raw_finish_reason) == (normalized, reason)


def test_stop_with_calls_is_tool_calls_and_max_tokens_with_calls_stays_length() -> None:
    assert read(finished("STOP", call("f", {}))).choices[0].finish_reason == "tool_calls"
    assert read(finished("MAX_TOKENS", call("f", {}))).choices[0].finish_reason == "length"


def test_a_stream_without_a_finish_reason_is_finish_reason_missing_never_done_missing() -> None:
    for body in (
        gemini_sse(text_stream(["Hi", " there"], finish=None)),
        finished("FINISH_REASON_UNSPECIFIED"),
        array(text_stream(["Hi", " there"], finish=None), closed=False),
    ):
        transcript = read(body, path=GEMINI_PATH)
        assert Code.FINISH_REASON_MISSING in codes(transcript)
        assert Code.DONE_MISSING not in codes(transcript)
        assert transcript.choices[0].finish_reason is None
        assert not transcript.terminal_seen


def test_usage_is_the_last_snapshot_not_a_sum() -> None:
    body = gemini_sse(
        [
            chunk([candidate([text("a")])], usage(10, 1)),
            chunk([candidate([text("b")])], {}),
            chunk([candidate([text("c")], finish="STOP")], usage(10, 3)),
        ]
    )
    transcript = read(body)
    assert token_counts(transcript) == (10, 3, 13)
    assert transcript.usage_position == Position(2, body.rindex(b"data: "))


def test_thoughts_count_as_completion_tokens_unless_the_candidates_already_hold_them() -> None:
    exclusive = {
        "promptTokenCount": 4,
        "candidatesTokenCount": 49,
        "thoughtsTokenCount": 2042,
        "totalTokenCount": 2095,
    }
    inclusive = {**exclusive, "candidatesTokenCount": 2091}
    for counts, completion in ((exclusive, 2091), (inclusive, 2091)):
        transcript = read(gemini_sse([chunk([candidate([text("a")], finish="STOP")], counts)]))
        assert transcript.usage.completion_tokens == completion
        assert transcript.usage.total_tokens == 2095


def test_an_error_payload_in_a_200_stream_is_error_in_stream() -> None:
    body = gemini_sse([*text_stream(["Once upon"], finish=None), error()])
    transcript = read(body, status=200)
    assert codes(transcript) == [Code.ERROR_IN_STREAM, Code.FINISH_REASON_MISSING]
    assert transcript.errors == [error()["error"]]
    assert transcript.findings[0].detail == "500: Internal error encountered."


QUOTA = error(429, "Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED")


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (json.dumps(QUOTA, indent=2).encode(), "/v1beta/models/gemini-2.5-flash:generateContent"),
        (array([QUOTA]), VERTEX_PATH),
        (gemini_sse([QUOTA]), GEMINI_PATH + "?alt=sse"),
    ],
    ids=["body", "array", "stream"],
)
def test_an_error_body_is_kept_without_a_finding_only_with_a_4xx_status(
    body: bytes, path: str
) -> None:
    kept = read(body, path=path, status=429)
    assert (kept.dialect, kept.choices, kept.findings) == (NAME, {}, [])
    assert kept.errors == [QUOTA["error"]]
    in_200 = read(body, path=path, status=200)
    assert codes(in_200) == [Code.ERROR_IN_STREAM]
    assert in_200.findings[0].detail == "429: Resource has been exhausted (e.g. check quota)."


def test_a_prompt_blocked_before_any_candidate_is_a_content_filter_finish() -> None:
    transcript = read(fixture("blocked.json"))
    choice = clean_choice(transcript, NAME, streaming=False)
    assert (choice.text, choice.tool_calls) == ("", [])
    assert choice.finish_reason == "content_filter"
    assert choice.raw_finish_reason == "PROHIBITED_CONTENT"
    assert transcript.usage.prompt_tokens == 8


def test_a_cut_array_yields_what_it_holds_and_warns() -> None:
    body = fixture("tools.array.json")
    cut = body[: body.index(b"find_places")]
    transcript = read(cut, path=VERTEX_PATH)
    assert transcript.choices[0].text.startswith("I'll check")
    assert transcript.choices[0].tool_calls == []
    assert codes(transcript) == [Code.FINISH_REASON_MISSING, Code.SSE_INCOMPLETE_EVENT]
    incomplete = transcript.findings[1]
    second = body.index(b"\r\n,")
    assert incomplete.position == Position(None, second)
    assert incomplete.detail == f"{len(cut) - second} bytes after the last array element"


def test_an_answer_without_any_candidate_block_or_error_never_finished() -> None:
    for body in (b"[]", b'[{"object": "list", "data": []}]', b""):
        transcript = read(body, path=GEMINI_PATH)
        assert transcript.dialect == NAME
        assert [(f.code, f.choice) for f in transcript.findings] == [
            (Code.FINISH_REASON_MISSING, None)
        ]
    assert read(b'[{"object": "list", "data": []}]').dialect == "unknown"


def test_both_endpoints_of_both_apis_are_compared_and_confirm_the_dialect() -> None:
    assert {":streamGenerateContent", ":generateContent"} <= set(COMPARED_PATHS)
    only_error = gemini_sse([error()])
    for path in (GEMINI_PATH + "?alt=sse", VERTEX_PATH + "?alt=sse"):
        assert read(only_error, path=path, status=503).dialect == NAME
    assert read(only_error, path="/v1/messages", status=503).dialect == "anthropic.messages"


# Detection


def payloads_in(directory: Path, *, chat: bool = True) -> list[Any]:
    """Every payload of every fixture body in `directory`: SSE data, or a JSON body; without the
    Chat Completions translations (`*.chat*`) unless `chat`."""
    found: list[Any] = []
    for path in sorted(directory.iterdir()):
        if not chat and ".chat" in path.name:
            continue
        body = path.read_bytes()
        if path.suffix == ".sse":
            events, _ = sse.parse(body)
        elif body.lstrip().startswith(b"["):
            events, _ = jsonarray.parse(body)
        elif path.suffix == ".json":
            found.append(orjson.loads(body))
            continue
        else:
            continue
        for event in events:
            try:
                found.append(orjson.loads(event.data))
            except orjson.JSONDecodeError:
                continue
    return found


def test_sniff_claims_gemini_payloads_and_no_other_dialect_claims_them_or_is_claimed() -> None:
    ours = payloads_in(GEMINI, chat=False)
    assert ours and all(gemini.sniff(payload) for payload in ours)
    for other in (openai_chat, anthropic, openai_responses):
        assert not any(other.sniff(payload) for payload in ours), other.NAME
    theirs = [
        payload
        for directory in ("openai_chat", "anthropic", "openai_responses")
        for payload in payloads_in(FIXTURES / directory)
    ] + [payload for payload in payloads_in(GEMINI) if openai_chat.sniff(payload)]
    assert len(theirs) > 100
    assert not any(gemini.sniff(payload) for payload in theirs)


# The laws


WELL_FORMED = [
    chunk([candidate([text("Hi", thought=True), text("Hi")], index=None)], usage(4, 1)),
    chunk([candidate([call("f", {"a": 1}, "fc_1")], finish="STOP")], usage(4, 5, 9)),
    {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}},
    error(),
]


def test_a_field_of_any_wrong_type_never_breaks_the_reducer() -> None:
    for _, payloads in damaged(WELL_FORMED, depth=2, removing=True):
        assert_survives(read(gemini_sse(payloads), path=GEMINI_PATH), NAME)
        assert_survives(read(array(payloads), path=VERTEX_PATH), NAME)
        whole = json.dumps(payloads[1]).encode()
        assert_survives(read(whole, dialect=NAME), NAME)


def events_of(body: bytes, cuts: list[int], reader: type) -> list[sse.Event]:
    decoder = reader()
    points = [0, *sorted(cuts), len(body)]
    return [event for a, b in pairwise(points) for event in decoder.feed(body[a:b])]


@examples(60, deadline=None)
@given(
    arguments=st.lists(ARGUMENTS, min_size=1, max_size=3),
    pieces=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4),
    data=st.data(),
)
def test_any_split_of_the_stream_or_the_array_gives_the_same_transcript(
    arguments: list[dict[str, Any]], pieces: list[str], data: st.DataObject
) -> None:
    payloads = [
        *text_stream(pieces, finish=None),
        chunk(
            [candidate([call(f"f{k}", args) for k, args in enumerate(arguments)], finish="STOP")],
            usage(7, 11, 3),
        ),
    ]
    for body, reader in (
        (gemini_sse(payloads), sse.SSEParser),
        (array(payloads), jsonarray.JSONArrayDecoder),
    ):
        cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=8))
        whole = gemini.reduce_events(events_of(body, [], reader))
        assert gemini.reduce_events(events_of(body, cuts, reader)) == whole
        assert whole.findings == []
        assert whole.choices[0].text == "".join(pieces)
        assert [call.decoded.value for call in whole.choices[0].tool_calls] == arguments


# Across the translation: Gemini upstream, Chat Completions downstream

TURN_TEXT = "I'll check the weather and look for museums at once."
CALLS = [("get_weather", WEATHER), ("find_places", PLACES)]
CHAT_IDS = ["call_Wq7Lz2Nc4Yb8Tr1Hx5Kd", "call_Fp3Jm6Vs9Qa2Ue4Gn8Rb", "call_Zr5Hq1Lm8Kd3Ty6Nb2Ws"]


def upstream(
    calls: list[tuple[str, Any]] = CALLS, *, finish: str = "STOP", as_array: bool = False
) -> Transcript:
    """Text, then each call in a chunk of its own, the finish reason on the last; usage on each."""
    payloads = [chunk([candidate([text(TURN_TEXT)])], usage(83, 12, 104))]
    payloads += [chunk([candidate([call(*pair)])], usage(83, 40, 104)) for pair in calls]
    payloads[-1]["candidates"][0]["finishReason"] = finish
    if as_array:
        return read(array(payloads), path=VERTEX_PATH)
    return read(gemini_sse(payloads), path=GEMINI_PATH + "?alt=sse")


def downstream(
    calls: list[tuple[str, Any]] = CALLS,
    *,
    finish_reason: str | None = "tool_calls",
    indexes: list[int] | None = None,
    cuts: list[list[int]] | None = None,
    tokens: tuple[int, int] = (83, 144),
    done: bool = True,
) -> Transcript:
    """The Chat Completions stream a translating gateway hands the client."""
    body = chat.tool_call_stream(
        [(name, json.dumps(args)) for name, args in calls],
        ids=CHAT_IDS[: len(calls)],
        indexes=indexes if indexes is not None else list(range(len(calls))),
        cuts=cuts or [[5], [7, 19], [3]][: len(calls)],
        interleave=False,
        text_parts=[TURN_TEXT[:10], TURN_TEXT[10:]],
        finish_reason=finish_reason,  # type: ignore[arg-type]
        tokens=tokens,
        done=done,
    )
    return read(body, path="/v1/chat/completions")


def cross_codes(comparison: Any) -> set[Code]:
    return {finding.code for finding in comparison.findings}


@examples(40, deadline=None)
@given(
    arguments=st.lists(ARGUMENTS, min_size=2, max_size=2),
    cuts=st.lists(st.lists(st.integers(0, 60), max_size=5), min_size=2, max_size=2),
    as_array=st.booleans(),
)
def test_a_faithful_chat_translation_of_parallel_calls_is_equal(
    arguments: list[dict[str, Any]], cuts: list[list[int]], as_array: bool
) -> None:
    calls = [("get_weather", arguments[0]), ("find_places", arguments[1])]
    comparison = compare(upstream(calls, as_array=as_array), downstream(calls, cuts=cuts))
    assert comparison.upstream.dialect == NAME
    assert comparison.verdict == "equal"
    assert cross_codes(comparison) == set()


def test_a_dropped_parallel_call_is_tool_calls_dropped() -> None:
    comparison = compare(upstream(), downstream(CALLS[:1]))
    assert comparison.verdict == "diverged"
    assert cross_codes(comparison) == {
        Code.TOOL_CALLS_DROPPED,
        Code.TOOL_CALL_SET_CHANGED,
    }
    dropped = next(f for f in comparison.findings if f.code is Code.TOOL_CALLS_DROPPED)
    assert (dropped.count, dropped.detail) == (1, "missing downstream: find_places")


def test_arguments_of_another_type_are_changed_and_a_double_is_the_same_number() -> None:
    calls = [("forecast", {"city": "Lisbon", "days": 5})]
    as_string = [("forecast", {"city": "Lisbon", "days": "5"})]
    as_double = [("forecast", {"city": "Lisbon", "days": 5.0})]
    changed = compare(upstream(calls), downstream(as_string, tokens=(83, 144)))
    assert changed.verdict == "diverged"
    assert Code.TOOL_CALL_ARGUMENTS_CHANGED in cross_codes(changed)
    same = compare(upstream(calls), downstream(as_double))
    assert (same.verdict, cross_codes(same)) == ("equal", set())


def test_a_finish_reason_lost_in_translation_is_finish_reason_missing() -> None:
    comparison = compare(upstream(), downstream(finish_reason=None))
    assert comparison.verdict == "diverged"
    assert cross_codes(comparison) == {Code.FINISH_REASON_MISSING}
    missing = next(f for f in comparison.findings if f.code is Code.FINISH_REASON_MISSING)
    assert (missing.side, missing.choice) == ("downstream", 0)


def gemini_error_stream() -> Transcript:
    body = gemini_sse([*text_stream(["Once upon", " a time"], finish=None), error()])
    return read(body, path=GEMINI_PATH, status=200)


def chat_error_translation(*, with_error: bool) -> Transcript:
    payloads: list[dict[str, Any] | str] = [
        chat.chunk([chat.delta(role="assistant", content="")]),
        *(chat.chunk([chat.delta(content=part)]) for part in ("Once upon", " a time")),
        chat.chunk([], usage=chat.usage(9, 8 + 21)),
    ]
    if with_error:
        payloads.append({"error": {"message": "Internal error encountered.", "code": 500}})
    return read(chat.sse(payloads, done=False), path="/v1/chat/completions")


def test_an_upstream_error_not_forwarded_is_error_dropped_and_forwarded_is_equal() -> None:
    dropped = compare(gemini_error_stream(), chat_error_translation(with_error=False))
    assert dropped.verdict == "diverged"
    assert cross_codes(dropped) == {Code.ERROR_DROPPED}
    forwarded = compare(gemini_error_stream(), chat_error_translation(with_error=True))
    assert (forwarded.verdict, forwarded.findings) == ("equal", [])


def test_parallel_calls_all_emitted_on_index_0_downstream_diverge() -> None:
    calls = [*CALLS, ("get_weather", {"city": "Porto", "unit": "celsius"})]
    comparison = compare(upstream(calls), downstream(calls, indexes=[0, 0, 0]))
    assert comparison.verdict == "diverged"
    assert {
        Code.TOOL_CALL_ID_CONFLICT,
        Code.TOOL_ARGUMENTS_INVALID,
        Code.TOOL_CALLS_DROPPED,
    } <= cross_codes(comparison)
    (merged,) = comparison.downstream.choices[0].tool_calls
    assert merged.arguments.count("Lisbon") == 2


def test_a_malformed_function_call_told_as_stop_is_finish_reason_changed() -> None:
    comparison = compare(
        upstream([], finish="MALFORMED_FUNCTION_CALL"),
        downstream([], finish_reason="stop", tokens=(83, 116)),
    )
    assert cross_codes(comparison) == {Code.FINISH_REASON_CHANGED}
    changed = comparison.findings[0]
    assert changed.detail == "MALFORMED_FUNCTION_CALL -> stop"


def test_a_blocked_prompt_is_equal_to_a_content_filter_finish_only() -> None:
    blocked = read(fixture("blocked.json"))
    for reason, verdict in (("content_filter", "equal"), ("stop", "diverged")):
        answer = {
            "id": chat.CHUNK_ID,
            "object": "chat.completion",
            "created": chat.CREATED,
            "model": chat.MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None},
                    "finish_reason": reason,
                }
            ],
            "usage": {"prompt_tokens": 8, "completion_tokens": 0, "total_tokens": 8},
        }
        comparison = compare(blocked, read(json.dumps(answer).encode()))
        assert comparison.verdict == verdict, reason


def test_thought_tokens_left_out_of_the_completion_count_is_usage_changed() -> None:
    comparison = compare(upstream(), downstream(tokens=(83, 40)))
    assert cross_codes(comparison) == {Code.USAGE_CHANGED}


# The request side

CHAT_REQUEST = {
    "model": "gemini-2.5-flash",
    "stream": True,
    "messages": [
        {"role": "system", "content": "You are a travel assistant."},
        {"role": "user", "content": "Weather and museums in Lisbon?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": CHAT_IDS[0],
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps(WEATHER)},
                },
                {
                    "id": CHAT_IDS[1],
                    "type": "function",
                    "function": {"name": "find_places", "arguments": json.dumps(PLACES)},
                },
            ],
        },
        {"role": "tool", "tool_call_id": CHAT_IDS[0], "content": "24 °C, sunny"},
        {"role": "tool", "tool_call_id": CHAT_IDS[1], "content": '["MAAT", "Gulbenkian"]'},
    ],
    "tools": [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in ("get_weather", "find_places")
    ],
}
LITELLM_REQUEST = {
    "contents": [
        {"role": "user", "parts": [{"text": "Weather and museums in Lisbon?"}]},
        {
            "role": "model",
            "parts": [
                {"function_call": {"name": "get_weather", "args": WEATHER}},
                {"function_call": {"name": "find_places", "args": PLACES}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "function_response": {
                        "name": "get_weather",
                        "response": {"content": "24 °C, sunny"},
                    }
                },
                {
                    "function_response": {
                        "name": "find_places",
                        "response": {"content": '["MAAT", "Gulbenkian"]'},
                    }
                },
            ],
        },
    ],
    "system_instruction": {"parts": [{"text": "You are a travel assistant."}]},
    "tools": [{"function_declarations": [{"name": "get_weather"}, {"name": "find_places"}]}],
    "generationConfig": {"temperature": 0.2},
}


def test_a_gemini_request_reads_as_the_chat_request_it_was_translated_from() -> None:
    conversation = request_conversation(LITELLM_REQUEST, VERTEX_PATH)
    assert conversation is not None
    entries, names = conversation
    assert names == ["get_weather", "find_places"]
    assert [entry["role"] for entry in entries] == ["system", "user", "assistant", "tool", "tool"]
    assert entries[3:] == [
        {"role": "tool", "content": "24 °C, sunny"},
        {"role": "tool", "content": '["MAAT", "Gulbenkian"]'},
    ]
    assert request_fingerprint(orjson.dumps(LITELLM_REQUEST), GEMINI_PATH) == request_fingerprint(
        orjson.dumps(CHAT_REQUEST), "/v1/chat/completions"
    )


def test_both_spellings_of_a_request_and_a_single_part_object_read_alike() -> None:
    camel = {
        "contents": [
            {"role": "user", "parts": {"text": "Hi"}},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
            {
                "role": "function",
                "parts": [{"functionResponse": {"name": "f", "response": {"temp": 24}}}],
            },
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [{"functionDeclarations": [{"name": "f"}]}],
    }
    entries, names = gemini.conversation(camel) or ([], [])
    assert names == ["f"]
    assert entries == [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": []},
        {"role": "tool", "content": '{"temp":24}'},
    ]


def test_what_is_not_a_gemini_request_has_no_conversation_and_usage_is_always_sent() -> None:
    for request in ({}, CHAT_REQUEST, {"contents": {}}):
        assert gemini.conversation(request) is None
    assert usage_requested(NAME, orjson.dumps(LITELLM_REQUEST))
    assert usage_requested(NAME, b"not json")


def test_two_candidates_translated_as_two_chat_choices_are_equal_and_one_lost_is_dropped() -> None:
    both = read(
        gemini_sse(
            [
                chunk([candidate([text("Yes")]), candidate([text("No")], index=1)], None),
                chunk([candidate([text("!")], finish="STOP")], None),
                chunk([candidate([text(".")], index=1, finish="STOP")], usage(5, 4)),
            ]
        )
    )
    choices = [
        chat.chunk([chat.delta(0, content="Yes"), chat.delta(1, content="No")]),
        chat.chunk([chat.delta(0, content="!", finish_reason="stop")]),
        chat.chunk([chat.delta(1, content=".", finish_reason="stop")]),
        chat.chunk([], usage=chat.usage(5, 4)),
    ]
    assert compare(both, read(chat.sse(choices))).findings == []
    first_only = [
        chat.chunk([chat.delta(0, content="Yes")]),
        choices[1],
        choices[3],
    ]
    lost = compare(both, read(chat.sse(first_only)))
    assert [(f.code, f.choice) for f in lost.findings] == [(Code.CHOICE_DROPPED, 1)]


def test_a_forced_dialect_reads_an_array_by_elements_only_if_it_reads_events() -> None:
    body = fixture("tools.array.json")
    forced = read(body, dialect=NAME)
    assert (forced.dialect, forced.streaming, forced.events) == (NAME, True, 2)
    assert read(body, dialect="ollama.chat").streaming is False



def test_positions_point_at_the_chunks_that_carry_each_fact() -> None:
    payloads = [
        chunk([candidate([text("Hi")])], None),
        "{oops",
        chunk([candidate([text(" there")]), candidate([text("Yo")], index=1)], usage(3, 4)),
        error(),
        chunk([candidate([], finish="STOP"), candidate([], index=1, finish=7)], usage(3, 5)),
    ]
    body = gemini_sse(payloads)
    at = record_starts(body, b"\r\n\r\n")
    transcript = read(body, status=200)
    first, second = transcript.choices[0], transcript.choices[1]
    assert (first.position, second.position) == (Position(0, 0), Position(2, at[2]))
    assert (first.text, second.index) == ("Hi there", 1)
    assert first.finish_position == second.finish_position == Position(4, at[4])
    assert (second.raw_finish_reason, transcript.usage_position) == ("7", Position(4, at[4]))
    assert [(f.code, f.position) for f in transcript.findings] == [
        (Code.JSON_INVALID, Position(1, at[1])), (Code.ERROR_IN_STREAM, Position(3, at[3]))]


def test_a_candidate_not_yet_finished_has_no_raw_finish_reason() -> None:
    choice = read(gemini_sse([chunk([candidate([text("Hi")])], None)])).choices[0]
    assert (choice.raw_finish_reason, choice.finish_reason) == (None, None)


def test_a_blocked_prompt_finishes_its_one_choice_where_the_block_was_said() -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}}
    unspecified = {"promptFeedback": {"blockReason": "BLOCK_REASON_UNSPECIFIED"}}
    body = gemini_sse([chunk(None, None), unspecified, blocked])
    at = record_starts(body, b"\r\n\r\n")
    transcript = read(body, path=GEMINI_PATH)
    [(index, choice)] = transcript.choices.items()
    assert (index, choice.index, choice.raw_finish_reason) == (0, 0, "SAFETY")
    assert choice.position == choice.finish_position == Position(2, at[2])


def test_an_answer_without_candidates_is_missing_its_finish_at_the_end() -> None:
    body = gemini_sse([chunk(None, None)])
    transcript = read(body, path=GEMINI_PATH)
    assert [(f.code, f.position) for f in transcript.findings] == [
        (Code.FINISH_REASON_MISSING, transcript.end_position)]
    assert transcript.end_position is not None


def test_parts_past_one_that_is_not_an_object_are_read() -> None:
    body = gemini_sse([chunk([candidate(["junk", text("Hi")], finish="STOP")], None)])
    assert read(body).choices[0].text == "Hi"


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({"promptTokenCount": 5}, (5, 0, 5)),
        ({"candidatesTokenCount": 3}, (0, 3, 3)),
        ({"thoughtsTokenCount": 2}, (0, 2, 2)),
        ({"totalTokenCount": 7}, (0, 0, 7)),
        ({"promptTokenCount": 1, "candidatesTokenCount": 2}, (1, 2, 3)),
    ],
)
def test_a_usage_snapshot_counts_what_it_leaves_out_as_zero(
    counts: dict[str, int], expected: tuple[int, int, int]
) -> None:
    body = gemini_sse([chunk([candidate([text("Hi")], finish="STOP")], counts)])
    assert token_counts(read(body)) == expected


def test_a_request_keeps_the_order_of_text_and_function_responses_and_every_tool_list() -> None:
    request = {
        "contents": [{"role": "user", "parts": [
            text("Before."), text("Hidden.", thought=True),
            {"functionResponse": {"name": "f", "response": {"a": 1, "b": 2}}},
            text("After."),
        ]}],
        "tools": [{"functionDeclarations": [{"name": "f"}, "junk", {"name": 3}]}, "junk",
                  {"function_declarations": [{"name": "g"}]}],
    }
    entries, names = gemini.conversation(request) or ([], [])
    assert names == ["f", "g"]
    assert entries == [
        {"role": "user", "content": [{"type": "text", "text": "Before."}]},
        {"role": "tool", "content": '{"a":1,"b":2}'},
        {"role": "user", "content": [{"type": "text", "text": "After."}]},
    ]


@pytest.mark.parametrize(
    ("payload", "claimed"),
    [
        ({"usageMetadata": {}, "modelVersion": "m"}, True),
        ({"promptFeedback": {}, "responseId": "r"}, True),
        ({"usageMetadata": {}}, False),
        ({"promptFeedback": {}}, False),
        ({"modelVersion": "m", "responseId": "r"}, False),
    ],
)
def test_a_chunk_without_candidates_is_gemini_by_its_usage_or_feedback_and_its_ids(
    payload: dict[str, Any], claimed: bool
) -> None:
    assert gemini.sniff(payload) is claimed
