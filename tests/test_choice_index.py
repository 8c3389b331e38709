"""CHOICE_INDEX_MISSING: a streamed Chat Completions chunk with a choice that has no integer
`index`, on which the openai SDK's `ChatCompletionStreamState` raises `TypeError` (it indexes its
list of choices by it).

The real shape (tests/fixtures/index_defects/README.md): Portkey's anthropic route ends a stream
cut by a provider error with `{"choices":[{"finish_reason":"overloaded_error","delta":{"content":
""}}]}` then `data: [DONE]`.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.compare import compare_captures
from calltap.transcript import Capture
from dialect_helpers import codes, read
from index_helpers import (
    NOT_INTEGERS,
    Stream,
    findings_in_pieces,
    positions,
    sdk_failure,
    set_index,
    streams,
)

FIXTURES = Path(__file__).parent / "fixtures" / "index_defects"
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_portkeys_chunk_after_a_provider_error_is_a_divergence_where_the_sdk_raises() -> None:
    upstream, downstream = fixture("portkey-error.upstream.sse"), fixture(
        "portkey-error.downstream.sse")
    comparison = compare_captures(Capture(upstream, MESSAGES), Capture(downstream, CHAT))
    (missing,) = [f for f in comparison.findings if f.code is Code.CHOICE_INDEX_MISSING]
    at = positions(downstream)[4]
    assert (missing.side, missing.choice, missing.count, missing.position) == (
        "downstream", None, 1, at)
    assert comparison.verdict == "diverged"
    assert Code.CHOICE_INDEX_MISSING not in codes(comparison.upstream)
    failure = sdk_failure(downstream)
    assert failure is not None and failure.event == at.event
    assert isinstance(failure.error, TypeError)


def test_the_shape_on_both_sides_is_each_sides_own_and_no_divergence() -> None:
    body = fixture("portkey-error.downstream.sse")
    comparison = compare_captures(Capture(body, CHAT), Capture(body, CHAT))
    assert comparison.verdict == "equal"
    assert Code.CHOICE_INDEX_MISSING not in [f.code for f in comparison.findings]
    assert Code.CHOICE_INDEX_MISSING in codes(comparison.upstream)
    assert Code.CHOICE_INDEX_MISSING in codes(comparison.downstream)


def test_the_choice_reads_as_choice_zero_and_one_finding_counts_every_such_choice() -> None:
    stream = Stream([], [])
    for text in ("a", "b", "c"):
        stream.insert(len(stream.payloads), 0, {"content": text})
    stream.payloads[1]["choices"][0] = set_index(stream.payloads[1]["choices"][0], None)
    stream.payloads[2]["choices"][0] = set_index(stream.payloads[2]["choices"][0], "2")
    transcript = read(stream.body())
    assert transcript.choices[0].text == "abc"
    (missing,) = [f for f in transcript.findings if f.code is Code.CHOICE_INDEX_MISSING]
    assert (missing.count, missing.position) == (2, positions(stream.body())[1])


def test_a_whole_json_body_has_no_choice_index_to_miss() -> None:
    body = {"object": "chat.completion", "choices": [
        {"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    assert codes(read(json.dumps(body).encode())) == []


DAMAGED = st.tuples(streams(), st.data(), st.sampled_from(NOT_INTEGERS))


def damage(stream: Stream, data: st.DataObject, index: object) -> int:
    """Take the integer index out of one choice entry of one chunk; that chunk's place."""
    at = data.draw(st.integers(0, len(stream.payloads) - 1))
    choices = stream.payloads[at]["choices"]
    which = data.draw(st.integers(0, len(choices) - 1))
    choices[which] = set_index(choices[which], index)
    return at


@examples(100)
@given(DAMAGED)
def test_any_stream_with_one_choice_index_taken_out_is_choice_index_missing_there(damaged):
    stream, data, index = damaged
    assert Code.CHOICE_INDEX_MISSING not in codes(read(stream.body()))
    at = damage(stream, data, index)
    body = stream.body()
    (missing,) = [f for f in read(body).findings if f.code is Code.CHOICE_INDEX_MISSING]
    assert (missing.choice, missing.count, missing.position) == (None, 1, positions(body)[at])


@examples(100)
@given(DAMAGED, st.lists(st.integers(0, 4000), max_size=8))
def test_any_split_of_the_bytes_gives_the_same_findings(damaged, cuts):
    stream, data, index = damaged
    damage(stream, data, index)
    body = stream.body()
    assert findings_in_pieces(body, cuts) == read(body).findings
