"""`drop-second-call` in the dialects coding agents speak: the fake gateway loses the second
`tool_use` block of an Anthropic Messages stream (`/v1/messages`) and the second `function_call`
item of a Responses stream (`/v1/responses`), and leaves a stream the official SDKs accept.

The law (hypothesis, no network): whatever tools are offered, the relayed stream holds every call
but the second, in order, with contiguous block indexes or output indexes and sequence numbers,
and calltap's comparator finds exactly one call dropped. Then the same through the real fake
gateway, read by the anthropic and openai SDKs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calltap.codes import Code
from calltap.compare import compare_captures
from calltap.dialects import transcribe
from calltap.fakes import (
    DEFECT_HEADER,
    FakeGateway,
    FakeProvider,
    anthropic_messages,
    openai_responses,
)
from calltap.fakes.defects import DropSecondCall
from calltap.fakes.gateway import serialize
from calltap.fakes.model import answer, sample_arguments
from calltap.sse import parse
from calltap.transcript import Capture

DIALECTS = {"anthropic.messages": anthropic_messages, "openai.responses": openai_responses}
PROPERTIES = {"city": {"type": "string"}, "zone": {"type": "string"}, "days": {"type": "integer"},
              "metric": {"type": "boolean"}}
THREE_TOOLS = [("weather", ["city"]), ("clock", ["zone"]), ("forecast", ["city", "days"])]
QUESTION = "What is the weather in Taipei, the time in UTC, and the forecast?"


def schema(properties: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": {name: PROPERTIES[name] for name in properties}}


def request_for(dialect: str, tools: list[tuple[str, list[str]]]) -> dict[str, Any]:
    """A streamed request offering `tools`, in the dialect's own shape."""
    if dialect == "anthropic.messages":
        return {"model": "claude-fake", "max_tokens": 256, "stream": True,
                "messages": [{"role": "user", "content": QUESTION}],
                "tools": [{"name": name, "input_schema": schema(props)} for name, props in tools]}
    return {"model": "gpt-fake", "stream": True, "input": QUESTION,
            "tools": [{"type": "function", "name": name, "parameters": schema(props)}
                      for name, props in tools]}


def provider_stream(dialect: str, request: dict[str, Any]) -> bytes:
    """The fake provider's stream for `request`, built without a server."""
    module = DIALECTS[dialect]
    view = module.chat_view(request)
    reply = answer(orjson.dumps(request), view, text_events=8)
    return b"".join(module.stream_events(reply, view))


def relayed(body: bytes) -> bytes:
    """The stream as the fake gateway relays it with `drop-second-call`."""
    events, incomplete = parse(body)
    assert incomplete is None
    relay = DropSecondCall()
    out = b"".join(serialize(event.type, payload) for event in events
                   for payload in relay.feed(orjson.loads(event.data)))
    return out + b"".join(serialize("message", payload) for payload in relay.end())


def payloads(body: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(event.data) for event in parse(body)[0]]


def assert_numbered_without_gaps(dialect: str, body: bytes) -> None:
    """Messages: blocks start at 0, 1, 2, … and every event names a started block; Responses:
    items likewise by output_index, and sequence numbers run 0, 1, 2, …"""
    events = payloads(body)
    if dialect == "anthropic.messages":
        starts = [e["index"] for e in events if e["type"] == "content_block_start"]
        named = {e["index"] for e in events if "index" in e}
    else:
        starts = [e["output_index"] for e in events if e["type"] == "response.output_item.added"]
        named = {e["output_index"] for e in events if "output_index" in e}
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert starts == list(range(len(starts)))
    assert named == set(starts)


tool_lists = st.lists(
    st.tuples(st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True),
              st.lists(st.sampled_from(sorted(PROPERTIES)), unique=True, max_size=3)),
    min_size=2, max_size=5, unique_by=lambda tool: tool[0])


@given(dialect=st.sampled_from(sorted(DIALECTS)), tools=tool_lists)
def test_the_second_call_and_only_it_is_lost_in_a_valid_stream(
    dialect: str, tools: list[tuple[str, list[str]]]
) -> None:
    path = DIALECTS[dialect].PATH
    upstream = provider_stream(dialect, request_for(dialect, tools))
    downstream = relayed(upstream)

    expected = [(name, sample_arguments(schema(props))) for name, props in tools]
    del expected[1]
    transcript = transcribe(Capture(downstream, path, status=200))
    assert transcript.dialect == dialect
    assert [(c.name, orjson.loads(c.arguments)) for c in transcript.choices[0].tool_calls] == (
        expected)
    assert transcript.findings == []
    assert transcript.choices[0].finish_reason == "tool_calls"
    assert_numbered_without_gaps(dialect, downstream)
    comparison = compare_captures(Capture(upstream, path, status=200),
                                  Capture(downstream, path, status=200))
    assert comparison.verdict == "diverged"
    (dropped,) = [f for f in comparison.findings if f.code == Code.TOOL_CALLS_DROPPED]
    assert dropped.count == 1


def test_a_responses_stream_loses_the_call_from_its_final_response_too() -> None:
    downstream = relayed(provider_stream("openai.responses",
                                         request_for("openai.responses", THREE_TOOLS)))
    (completed,) = [e for e in payloads(downstream) if e["type"] == "response.completed"]
    assert [item["name"] for item in completed["response"]["output"]] == ["weather", "forecast"]


def test_a_chat_completions_stream_is_untouched_by_the_event_rules() -> None:
    """A chunk has no `type`: the Chat Completions rule alone applies to it."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a", "function": {
            "name": "weather", "arguments": ""}}]}, "finish_reason": None}]}
    relay = DropSecondCall()
    assert relay.feed(orjson.loads(orjson.dumps(chunk))) == [chunk]
    assert relay.items.calls == 0


@pytest.fixture
async def gateway() -> AsyncIterator[FakeGateway]:
    async with FakeProvider() as provider, FakeGateway(provider.url) as fake:
        yield fake


LOSE = {DEFECT_HEADER: "drop-second-call"}


async def test_the_anthropic_sdk_reads_two_of_three_calls(gateway: FakeGateway) -> None:
    client = anthropic.AsyncAnthropic(base_url=gateway.url, api_key="sk-ant-fake", max_retries=0)
    async with client, client.messages.stream(
        model="claude-fake", max_tokens=256, extra_headers=LOSE,
        messages=[{"role": "user", "content": QUESTION}],
        tools=[{"name": name, "input_schema": schema(props)} for name, props in THREE_TOOLS],
    ) as stream:
        message = await stream.get_final_message()
    calls = [(block.name, block.input) for block in message.content if block.type == "tool_use"]
    assert calls == [("weather", {"city": "Taipei"}), ("forecast", {"city": "Taipei", "days": 3})]
    assert message.stop_reason == "tool_use"
    assert gateway.defects_injected == ["drop-second-call"]


async def test_the_openai_sdk_reads_two_of_three_calls(gateway: FakeGateway) -> None:
    client = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="sk-fake", max_retries=0)
    async with client, client.responses.stream(
        model="gpt-fake", input=QUESTION, extra_headers=LOSE,
        tools=[{"type": "function", "name": name, "parameters": schema(props)}
               for name, props in THREE_TOOLS],
    ) as stream:
        done = [event.item.name async for event in stream
                if event.type == "response.output_item.done"]
        response = await stream.get_final_response()
    calls = [(item.name, orjson.loads(item.arguments)) for item in response.output
             if item.type == "function_call"]
    assert calls == [("weather", {"city": "Taipei"}), ("forecast", {"city": "Taipei", "days": 3})]
    assert done == ["weather", "forecast"]
