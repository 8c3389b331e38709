"""Laws the request comparator keeps over any Chat Completions request.

The requests are generated: tools with parameter schemas (a `$ref` now and then), a tool choice,
the parallel flag, sampling with its 0s, a conversation of user turns (text and images, as a
string or parts), assistant turns with tool calls (ids unique in the request) and the tool
messages that answer them (text, and an image now and then), and assistant answers.

- What keeps the meaning reads equal, with no finding at all: (a) any order of every object's
  keys (a call's arguments text included, written with other spacing); (b) any one-to-one remap
  of the tool-call ids, in the calls and the results alike; (c) a user message's parts split into
  consecutive user messages, and a run of tool messages in any order.
- What loses a part is always found: (d) one tool dropped is REQUEST_TOOL_DROPPED naming it; one
  tool message dropped is HISTORY_TOOL_RESULT_CHANGED; one media part dropped is MESSAGE_CHANGED
  or HISTORY_TOOL_RESULT_CHANGED; one sampling key dropped (a 0 too) is SAMPLING_CHANGED naming it.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.ask import SAMPLING_KEYS
from calltap.codes import Code
from calltap.compare_requests import RequestComparison, compare_requests
from calltap.dialects.asks import read_ask
from calltap.dialects.openai_chat_request import CARRIES

PATH = "/v1/chat/completions"
TOOL_NAMES = ("weather", "clock", "search", "read_file", "write_file")
CHAT_SAMPLING = tuple(key for key in SAMPLING_KEYS if f"sampling.{key}" in CARRIES)
"""The sampling keys Chat Completions carries to a provider. (`top_k`, which OpenAI-compatible
servers take, is read but not carried: OpenAI refuses it, so dropping it is unsupported.)"""
IMAGES = (
    "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
    "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQ==",
    "https://example.com/cat.png",
)
"""Few, so that one image stands in a result and again beside it."""

words = st.sampled_from(["the", "weather", "in", "Taipei", "is", "31", "C", "ok", " ", "\n"])
texts = st.lists(words, min_size=1, max_size=5).map(" ".join)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "b"]),
                    st.sampled_from([0, 0.0, 1.5]))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["x", "y", "z"]), inner, max_size=3)),
    max_leaves=6,
)
leaf_schemas = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda low: {"type": "integer", "minimum": low}, st.integers(0, 3)),
    st.lists(st.sampled_from(["c", "f", "k", 0, 1.0]), min_size=1, max_size=3, unique=True)
    .map(lambda values: {"enum": values}),
    st.sampled_from(["a", 0, None]).map(lambda value: {"const": value}),
    st.just({"type": "array", "items": {"type": "string"}, "description": "a list"}),
    st.just({"type": ["string", "null"], "title": "maybe"}),
)


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["city", "unit", "days", "path", "query"]),
                          max_size=4, unique=True))
    properties = {name: draw(leaf_schemas) for name in names}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if names and draw(st.booleans()):
        schema["required"] = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    if names and draw(st.booleans()):
        schema["$defs"] = {"shared": properties[names[0]]}
        properties[names[0]] = {"$ref": "#/$defs/shared"}
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.booleans())
    return schema


@st.composite
def tools(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(TOOL_NAMES), max_size=4, unique=True))
    offered = []
    for name in names:
        function: dict[str, Any] = {"name": name, "parameters": draw(schemas())}
        if draw(st.booleans()):
            function["description"] = draw(texts)
        strict = draw(st.sampled_from([None, True, False]))
        if strict is not None:
            function["strict"] = strict
        offered.append({"type": "function", "function": function})
    return offered


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


@st.composite
def user_message(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 3)) == 0:
        return {"role": "user", "content": draw(texts)}
    parts = draw(st.lists(st.one_of(texts.map(lambda text: {"type": "text", "text": text}),
                                    st.sampled_from(IMAGES).map(image)),
                          min_size=1, max_size=4))
    return {"role": "user", "content": parts}


@st.composite
def tool_round(draw: st.DrawFn, ids: Iterator[int]) -> list[dict[str, Any]]:
    """An assistant message with tool calls, and a tool message for each call in any order."""
    calls = [{"id": f"call_{next(ids)}", "type": "function",
              "function": {"name": draw(st.sampled_from(TOOL_NAMES)),
                           "arguments": orjson.dumps(draw(st.dictionaries(
                               st.sampled_from(["city", "days", "q"]), json_values,
                               max_size=3))).decode()}}
             for _ in range(draw(st.integers(1, 3)))]
    assistant = {"role": "assistant", "content": draw(st.one_of(st.none(), texts)),
                 "tool_calls": calls}
    answered = draw(st.permutations(calls))
    results = []
    for call in answered:
        content: Any = draw(texts)
        if draw(st.integers(0, 3)) == 0:
            content = [{"type": "text", "text": content}, image(draw(st.sampled_from(IMAGES)))]
        results.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return [assistant, *results]


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = iter(range(1000))
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(texts)})
    for _ in range(draw(st.integers(1, 4))):
        messages.append(draw(user_message()))
        for _ in range(draw(st.integers(0, 2))):
            messages.extend(draw(tool_round(ids)))
        if draw(st.booleans()):
            messages.append({"role": "assistant", "content": draw(texts)})
    return messages


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = {"model": "gpt-4o", "messages": draw(conversations())}
    offered = draw(tools())
    if offered:
        request["tools"] = offered
        forced = [{"type": "function", "function": {"name": tool["function"]["name"]}}
                  for tool in offered]
        choice = draw(st.sampled_from([None, "none", "auto", "required", *forced]))
        if choice is not None:
            request["tool_choice"] = choice
        parallel = draw(st.sampled_from([None, True, False]))
        if parallel is not None:
            request["parallel_tool_calls"] = parallel
    for key in draw(st.lists(st.sampled_from(CHAT_SAMPLING), unique=True)):
        request[key] = draw(st.sampled_from([0, 0.0, 0.5, 1, 42]))
    return request


def compared(client: dict[str, Any], provider: dict[str, Any]) -> RequestComparison:
    return compare_requests(read_ask(orjson.dumps(client), PATH),
                            read_ask(orjson.dumps(provider), PATH))


def assert_equal(client: dict[str, Any], provider: dict[str, Any]) -> None:
    comparison = compared(client, provider)
    assert comparison.client.readable, comparison.client.findings
    assert comparison.findings == [], comparison.findings
    assert comparison.verdict == "equal"


def codes(comparison: RequestComparison) -> set[Code]:
    return {finding.code for finding in comparison.findings}


# --- (a) key order ------------------------------------------------------------------------------


def reordered(value: Any, rng: random.Random) -> Any:
    """Every object's keys in another order; a call's arguments text decoded, reordered and
    written again with other spacing."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        result = {key: reordered(item, rng) for key, item in items}
        if isinstance(result.get("arguments"), str):
            spacing = rng.choice([(",", ":"), (", ", ": "), (" ,", " : ")])
            result["arguments"] = json.dumps(reordered(json.loads(result["arguments"]), rng),
                                             separators=spacing)
        return result
    if isinstance(value, list):
        return [reordered(item, rng) for item in value]
    return value


@examples(60)
@given(requests(), st.randoms(use_true_random=False))
def test_any_order_of_keys_reads_equal(request: dict[str, Any], rng: random.Random) -> None:
    assert_equal(request, reordered(request, rng))


# --- (b) tool-call ids --------------------------------------------------------------------------


def call_ids(request: dict[str, Any]) -> list[str]:
    return [call["id"] for message in request["messages"]
            for call in message.get("tool_calls") or []]


def with_ids(request: dict[str, Any], remap: Callable[[str], str]) -> dict[str, Any]:
    changed = copy.deepcopy(request)
    for message in changed["messages"]:
        for call in message.get("tool_calls") or []:
            call["id"] = remap(call["id"])
        if message["role"] == "tool":
            message["tool_call_id"] = remap(message["tool_call_id"])
    return changed


@examples(60)
@given(requests(), st.randoms(use_true_random=False))
def test_any_remap_of_call_ids_reads_equal(request: dict[str, Any], rng: random.Random) -> None:
    ids = call_ids(request)
    fresh = [f"toolu_{n:02d}" for n in rng.sample(range(100), len(ids))]
    assert_equal(request, with_ids(request, dict(zip(ids, fresh, strict=True)).__getitem__))


# --- (c) splits ---------------------------------------------------------------------------------


def split(request: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Each user message's parts cut into consecutive user messages at random places, and each
    run of tool messages in a random order."""
    messages: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for message in [*request["messages"], None]:
        if message is not None and message["role"] == "tool":
            run.append(message)
            continue
        rng.shuffle(run)
        messages.extend(run)
        run = []
        if message is None:
            break
        if message["role"] == "user" and isinstance(message["content"], list):
            parts = message["content"]
            cuts = sorted(rng.sample(range(1, len(parts)), rng.randint(0, len(parts) - 1)))
            for start, end in zip([0, *cuts], [*cuts, len(parts)], strict=True):
                piece = parts[start:end]
                single = len(piece) == 1 and piece[0]["type"] == "text" and rng.random() < 0.5
                messages.append({"role": "user",
                                 "content": piece[0]["text"] if single else piece})
        else:
            messages.append(message)
    return {**request, "messages": messages}


@examples(60)
@given(requests(), st.randoms(use_true_random=False))
def test_split_user_messages_and_reordered_tool_messages_read_equal(
        request: dict[str, Any], rng: random.Random) -> None:
    assert_equal(request, split(request, rng))


# --- (d) what is dropped is found ---------------------------------------------------------------


@examples(60)
@given(requests(), st.data())
def test_a_tool_dropped_is_found_by_name(request: dict[str, Any], data: st.DataObject) -> None:
    offered = request.get("tools") or []
    if not offered:
        return
    index = data.draw(st.integers(0, len(offered) - 1))
    name = offered[index]["function"]["name"]
    if len(offered) == 1 and request.get("tool_choice") == "none":
        return  # no tool left and none to be called: asks the same (compare_requests)
    dropped = {**request, "tools": offered[:index] + offered[index + 1:]}
    comparison = compared(request, dropped)
    assert [f.tool for f in comparison.findings
            if f.code == Code.REQUEST_TOOL_DROPPED] == [name], comparison.findings
    assert comparison.verdict == "diverged"


@examples(60)
@given(requests(), st.data())
def test_a_tool_message_dropped_is_a_result_change(request: dict[str, Any],
                                                   data: st.DataObject) -> None:
    results = [n for n, message in enumerate(request["messages"]) if message["role"] == "tool"]
    if not results:
        return
    index = data.draw(st.sampled_from(results))
    dropped = {**request, "messages": request["messages"][:index]
               + request["messages"][index + 1:]}
    comparison = compared(request, dropped)
    assert Code.HISTORY_TOOL_RESULT_CHANGED in codes(comparison), comparison.findings
    assert comparison.verdict == "diverged"


def media_places(request: dict[str, Any]) -> list[tuple[int, int]]:
    return [(n, k) for n, message in enumerate(request["messages"])
            if isinstance(message.get("content"), list)
            for k, part in enumerate(message["content"]) if part["type"] == "image_url"]


@examples(60)
@given(requests(), st.data())
def test_a_media_part_dropped_is_found(request: dict[str, Any], data: st.DataObject) -> None:
    places = media_places(request)
    if not places:
        return
    message, part = data.draw(st.sampled_from(places))
    dropped = copy.deepcopy(request)
    del dropped["messages"][message]["content"][part]
    comparison = compared(request, dropped)
    assert codes(comparison) & {Code.MESSAGE_CHANGED, Code.HISTORY_TOOL_RESULT_CHANGED}, (
        comparison.findings)
    assert comparison.verdict == "diverged"


@examples(60)
@given(requests(), st.data())
def test_a_sampling_key_dropped_is_a_sampling_change(request: dict[str, Any],
                                                     data: st.DataObject) -> None:
    present = [key for key in CHAT_SAMPLING if key in request]
    if not present:
        return
    key = data.draw(st.sampled_from(present))
    dropped = {name: value for name, value in request.items() if name != key}
    comparison = compared(request, dropped)
    assert [f.detail for f in comparison.findings] == [
        f"sampling.{key}: {request[key]!r} -> absent"]
    assert codes(comparison) == {Code.SAMPLING_CHANGED}
