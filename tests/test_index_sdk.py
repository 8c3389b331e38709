"""The official openai SDK's stream accumulator as the judge of the index rules: over generated
streams (valid ones, then damaged: a choice's index taken out, extension list entries with or
without an integer index, values that change kind, a tool-call fragment without index),
`ChatCompletionStreamState` raises exactly on the streams calltap names with an index code
(CHOICE_INDEX_MISSING, DELTA_LIST_INDEX_MISSING, TOOL_CALL_INDEX_MISSING, TOOL_CALL_INDEX_GAP),
at the chunk of the first such finding, and accepts every other one.

Checked against the openai package the dev extra installs (3.57.0 here), whose `accumulate_delta`
merges a new list by index from its first chunk when an entry has an `index` key (openai-python
#3201, fixed by PR #3425); the accumulator before that fix stored every new list as sent.

A tool-call fragment's index is damaged only by taking it out or making it null: the SDK's model
declares that field an `int` and its `construct_type` turns `"0"`, `1.0` or `true` into one, so
the Python SDK survives them where calltap, reading the JSON, reports TOOL_CALL_INDEX_MISSING (a
JSON string is no index to other clients). Extension fields and the choice's own index are not
coerced.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from dialect_helpers import read
from index_helpers import (
    INDEX_CODES,
    INTEGER_INDEXES,
    NOT_INTEGERS,
    REMOVED,
    Stream,
    entries,
    nested,
    sdk_failure,
    set_index,
    streams,
)

ANY_INDEX = st.one_of(INTEGER_INDEXES, st.sampled_from(NOT_INTEGERS))
LIST_ITEMS = st.one_of(st.text(max_size=2), st.none(), st.integers(0, 3),
                       entries(ANY_INDEX).map(lambda found: found[0]))
MIXED = st.one_of(entries(ANY_INDEX), st.lists(LIST_ITEMS, max_size=3), st.text(max_size=2),
                  st.dictionaries(st.sampled_from(["a", "b"]), entries(ANY_INDEX), max_size=2))
"""What a field may hold from one chunk to the next when a gateway is careless with it."""


@st.composite
def damaged(draw: st.DrawFn) -> Stream:
    stream = draw(streams(ANY_INDEX))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(1, len(stream.payloads)))
        choice = draw(st.integers(0, len(stream.owners[0]) - 1))
        stream.insert(at, choice, nested("mixed", draw(MIXED), draw(st.integers(0, 1))))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(stream.payloads) - 1))
        choices = stream.payloads[at]["choices"]
        which = draw(st.integers(0, len(choices) - 1))
        choices[which] = set_index(choices[which], draw(st.sampled_from(NOT_INTEGERS)))
    fragments = [(place, entry) for place, payload in enumerate(stream.payloads)
                 for entry in payload["choices"] if "tool_calls" in entry.get("delta", {})]
    if fragments and draw(st.booleans()):
        _, entry = draw(st.sampled_from(fragments))
        calls: list[dict[str, Any]] = entry["delta"]["tool_calls"]
        calls[0] = set_index(calls[0], draw(st.sampled_from([REMOVED, None])))
    return stream


@examples(300)
@given(damaged())
def test_the_sdk_raises_exactly_where_calltap_names_an_index_code(stream):
    body = stream.body()
    named = [f.position.event for f in read(body).findings
             if f.code in INDEX_CODES and f.position is not None]
    failure = sdk_failure(body)
    if failure is None:
        assert named == []
    else:
        assert named, failure.error
        assert min(named) == failure.event, failure.error
