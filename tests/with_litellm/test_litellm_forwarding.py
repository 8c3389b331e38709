"""calltap around LiteLLM with `forward_client_headers_to_llm_api: true`: the client's
X-Request-ID (set by calltap's front) reaches calltap's back, so every pair links by header.

LiteLLM re-serializes the stream it relays (drops `null` fields, adds `"type":"function"` to
every tool-call fragment, re-emits the `choices: []` usage chunk with a choice, rewrites
`created`): the bytes differ, the meaning does not, so each OpenAI pair must compare `equal` with
no finding at all. On the Anthropic route LiteLLM translates Messages into Chat Completions; the
pair is cross-dialect and still `equal`, with at most the cosmetic renumbering of tool calls.
"""

from __future__ import annotations

import orjson
import pytest
from litellm_stack import (
    ANTHROPIC_MODEL,
    CLOCK,
    INDEXES_RENUMBERED,
    MESSAGES_PATH,
    OPENAI_MODEL,
    PARALLEL_CALLS,
    STREAM,
    WEATHER,
    Stack,
    question,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def recorded(stack: Stack, request_id: str, name: str) -> bytes:
    (path,) = stack.tap.recordings.glob(f"*/{request_id}/{name}")
    return path.read_bytes()


async def test_models_call_at_start_is_relayed_never_orphaned(forwarding: Stack) -> None:
    models = [
        pair for pair in forwarding.pair_files()
        if pair["legs"].get("upstream", {}).get("path") == "/v1/models"
    ]
    assert models, "LiteLLM's start-up GET /v1/models did not pass through calltap's back"
    for pair in models:
        assert (pair["pairing"], pair["orphaned"], "comparison" in pair) == (None, False, False)
        assert set(pair["legs"]) == {"upstream"}
        assert (pair["legs"]["upstream"]["method"], pair["legs"]["upstream"]["status"]) == (
            "GET", 200)
        assert forwarding.log.lines("pair.orphaned", pair["request_id"]) == []
        assert forwarding.log.lines("leg.checked", pair["request_id"]) == []


async def test_streamed_parallel_tool_calls_pair_by_header(forwarding: Stack) -> None:
    sent = await forwarding.chat(
        "fwd-tools-stream", model=OPENAI_MODEL, messages=question(), tools=[WEATHER, CLOCK],
        **STREAM)

    assert sent.reply.calls() == PARALLEL_CALLS
    assert sent.reply.finish_reason == "tool_calls"
    forwarding.expect_faithful(sent, pairing="header")
    forwarded = sent.pair["legs"]["upstream"]["request_headers"]
    assert forwarded["x-request-id"] == "fwd-tools-stream"
    assert "traceparent" not in forwarded, "LiteLLM forwards traceparent only with OTEL set up"
    upstream = recorded(forwarding, "fwd-tools-stream", "upstream.sse")
    downstream = recorded(forwarding, "fwd-tools-stream", "downstream.sse")
    assert b'"choices":[]' in upstream and b"null" in upstream
    assert b'"choices":[]' not in downstream and b"null" not in downstream, (
        "LiteLLM no longer rewrites this stream: the test no longer proves those rewrites"
        " are cosmetic")


async def test_whole_body_tool_calls_pair_by_header(forwarding: Stack) -> None:
    sent = await forwarding.chat(
        "fwd-tools-json", model=OPENAI_MODEL, messages=question(), tools=[WEATHER, CLOCK])

    assert sent.reply.calls() == PARALLEL_CALLS
    forwarding.expect_faithful(sent, pairing="header")
    assert sent.pair["legs"]["downstream"]["file"] == "downstream.json"
    assert sent.pair["legs"]["upstream"]["file"] == "upstream.json"
    assert sent.pair["comparison"]["upstream"]["tool_calls"] == 2


async def test_streamed_text_pair_by_header(forwarding: Stack) -> None:
    sent = await forwarding.chat(
        "fwd-text-stream", model=OPENAI_MODEL, messages=question("Say something."), **STREAM)

    assert sent.reply.text and sent.reply.finish_reason == "stop"
    forwarding.expect_faithful(sent, pairing="header")
    upstream = orjson.loads(recorded(forwarding, "fwd-text-stream", "upstream.request"))
    assert upstream["messages"] == question("Say something.")


async def test_stream_without_usage_request_is_equal(forwarding: Stack) -> None:
    sent = await forwarding.chat(
        "fwd-text-no-usage", model=OPENAI_MODEL, messages=question("Say something else."),
        stream=True)

    assert sent.reply.text and sent.reply.finish_reason == "stop"
    upstream = orjson.loads(recorded(forwarding, "fwd-text-no-usage", "upstream.request"))
    assert upstream["stream_options"] == {"include_usage": True}, "LiteLLM asks for usage itself"
    forwarding.expect_faithful(sent, pairing="header")


@pytest.mark.parametrize(
    ("stream", "cosmetic"),
    [(True, INDEXES_RENUMBERED), (False, frozenset())],
    ids=["stream", "json"],
)
async def test_anthropic_parallel_tool_use_pairs_across_dialects(
    forwarding: Stack, stream: bool, cosmetic: frozenset[str]
) -> None:
    """A streamed answer's calls are renumbered from 0 (cosmetic); a whole body keeps the
    block positions as `index`, so nothing at all differs."""
    request_id = f"fwd-anthropic-{'stream' if stream else 'json'}"
    sent = await forwarding.chat(
        request_id, model=ANTHROPIC_MODEL, messages=question(), tools=[WEATHER, CLOCK],
        **(STREAM if stream else {}))

    assert sent.reply.calls() == PARALLEL_CALLS
    assert sent.reply.finish_reason == "tool_calls"
    forwarding.expect_faithful(
        sent, pairing="header", upstream_path=MESSAGES_PATH,
        upstream_dialect="anthropic.messages", cosmetic=cosmetic)
    upstream = orjson.loads(recorded(forwarding, request_id, "upstream.request"))
    assert [tool["name"] for tool in upstream["tools"]] == ["weather", "clock"]
