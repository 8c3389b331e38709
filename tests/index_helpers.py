"""Chat Completions streams for the index rules, and the official openai SDK's accumulator as the
judge of what a client survives.

`sdk_failure` reads a body the way `client.chat.completions.stream()` does: the SDK's own SSE
decoder, `data: [DONE]` ends it, each payload becomes a `ChatCompletionChunk` by `construct_type`
(what the client does with a response it does not validate strictly), chunks whose `object` is
not `chat.completion.chunk` are skipped, and every other one goes through
`ChatCompletionStreamState.handle_chunk`.

`streams` draws valid streams (one or two choices, text, tool calls at indexes 0, 1, … and
extension list fields whose entries carry an integer index) as a list of chunk payloads, each with
the choice it belongs to, so that a property can damage one place and know where it is.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from openai._models import construct_type
from openai._streaming import SSEDecoder
from openai.lib.streaming.chat._completions import (
    ChatCompletionStreamState,
    _is_valid_chat_completion_chunk_weak,
)
from openai.types.chat import ChatCompletionChunk

from calltap.codes import Code
from calltap.dialects import openai_chat
from calltap.sse import SSEParser
from calltap.transcript import Finding, Position
from dialect_helpers import record_starts, split
from fixtures.chat_stream import call_arguments, call_start, chunk, sse

INDEX_CODES = frozenset({Code.CHOICE_INDEX_MISSING, Code.DELTA_LIST_INDEX_MISSING,
                         Code.TOOL_CALL_INDEX_MISSING, Code.TOOL_CALL_INDEX_GAP})
"""The codes that say the SDK's accumulator fails on the stream."""
ARGUMENTS = '{"city": "Taipei"}'
REMOVED = object()
"""Stands for an `index` taken out of its object."""
NOT_INTEGERS = [REMOVED, None, "0", 1.5]
"""What an index is when it is not an integer (a boolean is one to the SDK: see chat_deltas)."""
DECLARED = {"content", "role", "tool_calls", "function_call", "refusal", "audio", "annotations",
            "parsed", "index", "type"}
"""Delta and message fields the SDK's models declare, or that it replaces instead of merging."""
INTEGER_INDEXES = st.integers(0, 2)
"""Indexes of extension list entries in a valid stream."""
EXTENSION_KEYS = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True).filter(
    lambda key: key not in DECLARED)


@dataclass(frozen=True, slots=True)
class Failure:
    """Where the SDK raised: the ordinal of the SSE event it was handling, and what."""

    event: int
    error: BaseException


def sdk_failure(body: bytes) -> Failure | None:
    """Feed `body` to the SDK's stream accumulator; where it raised, or None."""
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for ordinal, event in enumerate(SSEDecoder().iter_bytes(iter([body]))):
        if event.data.startswith("[DONE]"):
            return None
        chunk_ = construct_type(type_=ChatCompletionChunk, value=json.loads(event.data))
        if not _is_valid_chat_completion_chunk_weak(chunk_):
            continue
        try:
            list(state.handle_chunk(chunk_))
        except Exception as error:  # the judge: whatever the SDK raises
            return Failure(ordinal, error)
    return None


def positions(body: bytes) -> list[Position]:
    """Where each event of an SSE body whose events end with a blank line starts."""
    return [Position(ordinal, byte) for ordinal, byte in enumerate(record_starts(body, b"\n\n"))]


def findings_in_pieces(body: bytes, cuts: list[int]) -> list[Finding]:
    """The findings of `body` fed to the SSE parser in pieces cut at `cuts`, as the proxy does."""
    points = sorted({cut for cut in cuts if 0 < cut < len(body)})
    parser = SSEParser()
    events = [event for start, end in zip([0, *points], [*points, len(body)], strict=True)
              for event in parser.feed(body[start:end])]
    return openai_chat.reduce_events(events).findings


def set_index(entry: dict[str, Any], index: Any) -> dict[str, Any]:
    """`entry` with its index set to `index`, or without one for REMOVED."""
    changed = {key: value for key, value in entry.items() if key != "index"}
    if index is not REMOVED:
        changed = {"index": index, **changed}
    return changed


@dataclass
class Stream:
    """Chunk payloads and, for each, the choice indexes its entries belong to."""

    payloads: list[dict[str, Any]]
    owners: list[list[int]]

    def body(self) -> bytes:
        return sse(self.payloads)

    def copy(self) -> Stream:
        return Stream(copy.deepcopy(self.payloads), [list(o) for o in self.owners])

    def insert(self, at: int, choice: int, delta: dict[str, Any]) -> None:
        self.payloads.insert(at, chunk([{"index": choice, "delta": delta}]))
        self.owners.insert(at, [choice])


def entries(key_index: st.SearchStrategy[Any]) -> st.SearchStrategy[list[dict[str, Any]]]:
    """One or two thinking-block-like objects, each with an index drawn from `key_index`."""
    block = st.builds(lambda text, index: set_index({"type": "thinking", "thinking": text}, index),
                      st.text(max_size=4), key_index)
    return st.lists(block, min_size=1, max_size=2)


def nested(key: str, value: Any, depth: int) -> dict[str, Any]:
    """`{key: value}` under `depth` levels of LiteLLM's `provider_specific_fields`."""
    delta: dict[str, Any] = {key: value}
    for _ in range(depth):
        delta = {"provider_specific_fields": delta}
    return delta


@st.composite
def extension_deltas(draw: st.DrawFn, index: st.SearchStrategy[Any]) -> dict[str, Any]:
    """A delta carrying an extension field: a list of objects (indexes from `index`), a list of
    strings, or a string, each kind under keys of its own (a key that changes kind is a case of
    its own, not a valid stream)."""
    kind = draw(st.sampled_from(["objects", "strings", "text"]))
    if kind == "objects":
        key = draw(st.sampled_from(["thinking_blocks", "reasoning_details"]))
        value: Any = draw(entries(index))
    elif kind == "strings":
        key, value = "citations", draw(st.lists(st.text(max_size=3), max_size=2))
    else:
        key, value = "reasoning_content", draw(st.text(max_size=3))
    return nested(key, value, draw(st.integers(0, 1)))


@st.composite
def choice_deltas(draw: st.DrawFn, choice: int, index: st.SearchStrategy[Any]) -> list[Any]:
    """One choice's deltas after its first: text, calls at 0, 1, … and extension fields."""
    main: list[dict[str, Any]] = [{"content": part}
                                  for part in draw(st.lists(st.text(max_size=4), max_size=2))]
    for k in range(draw(st.integers(0, 2))):
        main.append({"tool_calls": [call_start(k, f"call_{choice}_{k}", f"f{k}")]})
        cuts = draw(st.lists(st.integers(1, len(ARGUMENTS) - 1), max_size=2))
        main += [{"tool_calls": [call_arguments(k, part)]} for part in split(ARGUMENTS, cuts)]
    for extra in draw(st.lists(extension_deltas(index), max_size=3)):
        main.insert(draw(st.integers(0, len(main))), extra)
    return main


@st.composite
def streams(draw: st.DrawFn, index: st.SearchStrategy[Any] = INTEGER_INDEXES) -> Stream:
    """A stream whose first chunk opens every choice, whose later chunks interleave the
    choices' deltas, each choice ending with its finish reason. Extension entries take their
    index from `index` (integers: a stream the SDK accepts)."""
    count = draw(st.integers(1, 2))
    opening = [{"index": c, "delta": {"role": "assistant", "content": ""}} for c in range(count)]
    payloads, owners = [chunk(opening)], [list(range(count))]
    queues = [draw(choice_deltas(c, index)) for c in range(count)]
    while any(queues):
        choice = draw(st.sampled_from([c for c in range(count) if queues[c]]))
        payloads.append(chunk([{"index": choice, "delta": queues[choice].pop(0)}]))
        owners.append([choice])
    for c in range(count):
        payloads.append(chunk([{"index": c, "delta": {}, "finish_reason": "stop"}]))
        owners.append([c])
    return Stream(payloads, owners)
