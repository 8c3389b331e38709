"""calltap around the routes coding agents take through a real LiteLLM 1.108.7.

Claude Code streams `/v1/messages` with the anthropic SDK; Codex streams `/v1/responses` with the
openai SDK. LiteLLM serves both in the client's dialect whatever the provider speaks: a
`/v1/messages` request for an `openai/` model goes to the provider's Responses API, for
`anthropic/` it passes through, for `ollama_chat/` it goes to Ollama's `/api/chat` (NDJSON), for
`hosted_vllm/` to Chat Completions; a `/v1/responses` request for `anthropic/` or `ollama_chat/`
goes through LiteLLM's Responses-to-Chat bridge. Each test checks the route LiteLLM really took
(the provider's path and the request's shape), that the client's SDK got both parallel calls, and
that calltap pairs the two legs, names both dialects and says `equal`.

A gateway that loses a call on these routes must be caught. LiteLLM relays them faithfully, so
the loss comes from calltap's fake gateway put in front of it (`drop-second-call` on the stream
LiteLLM wrote in the client's dialect): calltap must log `TOOL_CALLS_DROPPED` as a `divergence`.

One route is not faithful in LiteLLM itself: `/v1/messages` to a Chat Completions provider
mangles parallel calls whose argument fragments interleave (the fake provider's order), and
relays them intact when they come one after the other (the scripted provider's). The tests pin
both: what the client got and what calltap says; README.md in this folder names LiteLLM's code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import pytest_asyncio
from agent_stack import (
    IN_TURN_MODEL,
    LOSSY,
    MESSAGES_PATH,
    MESSAGES_TOOLS,
    QUESTION,
    RESPONSES_PATH,
    VLLM_MODEL,
    AgentStack,
    Route,
    Tap,
    expect_equal,
    expect_faithful,
    expect_paired,
    offered_tools,
    open_agent_stack,
)
from litellm_stack import (
    ANTHROPIC_MODEL,
    CHAT_PATH,
    INDEXES_RENUMBERED,
    OLLAMA_MODEL,
    OPENAI_MODEL,
)

from calltap.fakes import DEFECT_HEADER

pytestmark = pytest.mark.asyncio(loop_scope="module")

BOTH_CALLS = [("weather", {"city": "Taipei"}), ("clock", {"zone": "UTC"})]
MESSAGES_ROUTES = {
    "openai": Route(OPENAI_MODEL, MESSAGES_PATH, RESPONSES_PATH, "openai.responses", "sse"),
    "anthropic": Route(ANTHROPIC_MODEL, MESSAGES_PATH, MESSAGES_PATH, "anthropic.messages", "sse"),
    "ollama": Route(OLLAMA_MODEL, MESSAGES_PATH, "/api/chat", "ollama.chat", "ndjson"),
}
RESPONSES_ROUTES = {
    "anthropic": Route(ANTHROPIC_MODEL, RESPONSES_PATH, MESSAGES_PATH, "anthropic.messages",
                       "sse"),
    "ollama": Route(OLLAMA_MODEL, RESPONSES_PATH, "/api/chat", "ollama.chat", "ndjson"),
}
UPSTREAM_MODELS = {OPENAI_MODEL: OPENAI_MODEL, ANTHROPIC_MODEL: "claude-3-5-sonnet-20241022",
                   OLLAMA_MODEL: "llama3.1"}
"""The model name LiteLLM sends the provider for each of the suite's model names."""
LOSE_A_CALL = {DEFECT_HEADER: "drop-second-call"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agents(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[AgentStack]:
    async with open_agent_stack(tmp_path_factory.mktemp("agents")) as stack:
        yield stack


def expect_route_taken(tap: Tap, request_id: str, route: Route) -> None:
    """LiteLLM asked the provider for the route's model with both tools, in the upstream
    dialect's shape: Responses' `input`, Messages' `max_tokens`, Ollama's plain `model`."""
    upstream = tap.request_body(request_id, "upstream")
    assert upstream["model"] == UPSTREAM_MODELS[route.model]
    assert offered_tools(upstream) == ["weather", "clock"]
    shape = {"openai.responses": "input", "anthropic.messages": "max_tokens",
             "ollama.chat": "messages"}[route.upstream_dialect]
    assert shape in upstream
    assert upstream["stream"] is True


@pytest.mark.parametrize("route", MESSAGES_ROUTES.values(), ids=MESSAGES_ROUTES.keys())
async def test_claude_code_route_is_equal(agents: AgentStack, route: Route) -> None:
    request_id = f"agent-messages-{route.upstream_dialect}"
    received = await agents.faithful.claude(request_id, route.model)

    assert received.stop == "tool_use"
    expect_faithful(agents, agents.faithful, received, route)
    expect_route_taken(agents.faithful, request_id, route)
    headers = received.pair["legs"]["downstream"]["request_headers"]
    assert headers["authorization"] == "[redacted]", "the client's key never reaches disk"
    assert headers["anthropic-version"]


@pytest.mark.parametrize("route", RESPONSES_ROUTES.values(), ids=RESPONSES_ROUTES.keys())
async def test_codex_route_is_equal(agents: AgentStack, route: Route) -> None:
    request_id = f"agent-responses-{route.upstream_dialect}"
    received = await agents.faithful.codex(request_id, route.model)

    assert received.stop == "completed"
    expect_faithful(agents, agents.faithful, received, route)
    expect_route_taken(agents.faithful, request_id, route)
    downstream = agents.faithful.request_body(request_id, "downstream")
    assert offered_tools(downstream) == ["weather", "clock"]


LOSSY_ROUTES = [
    *((f"messages-{name}", route) for name, route in MESSAGES_ROUTES.items()),
    *((f"responses-{name}", route) for name, route in RESPONSES_ROUTES.items()),
]


async def agent_turn(tap: Tap, route: Route, request_id: str, **headers: str) -> Any:
    """The turn of the agent whose endpoint the route serves, on the route's `lossy-` model."""
    turn = tap.claude if route.downstream_path == MESSAGES_PATH else tap.codex
    return await turn(request_id, LOSSY + route.model, **headers)


@pytest.mark.parametrize("route", [route for _, route in LOSSY_ROUTES],
                         ids=[name for name, _ in LOSSY_ROUTES])
async def test_a_call_lost_in_the_agents_stream_is_a_divergence(agents: AgentStack,
                                                                route: Route) -> None:
    """The fake gateway in front of LiteLLM drops the second call from the stream LiteLLM wrote
    in the client's dialect: the SDK reads a valid turn with one call, calltap says which leg
    lost what and logs it live."""
    request_id = f"agent-lossy-{route.downstream_dialect}-{route.upstream_dialect}"
    received = await agent_turn(agents.lossy, route, request_id, **LOSE_A_CALL)

    assert received.calls == BOTH_CALLS[:1], "the client's SDK read one call of two"
    pair = received.pair
    expect_paired(agents.lossy, pair, route)
    comparison = pair["comparison"]
    assert comparison["verdict"] == "diverged"
    assert (comparison["upstream"]["tool_calls"], comparison["downstream"]["tool_calls"]) == (2, 1)
    codes = {finding["code"] for finding in comparison["findings"] if finding["side"] != "request"}
    assert codes == {"TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED"}, comparison
    assert comparison["downstream"]["findings"] == [], "the stream itself was valid"
    (dropped,) = [line for line in agents.lossy.log.lines("divergence", request_id)
                  if line["code"] == "TOOL_CALLS_DROPPED"]
    assert (dropped["severity"], dropped["count"], dropped["choice"]) == ("fatal", 1, 0)
    assert dropped["capture"].endswith(request_id)


async def test_the_fake_gateway_alone_loses_nothing(agents: AgentStack) -> None:
    """The control: the lossy path without the defect is as faithful as LiteLLM alone."""
    route = MESSAGES_ROUTES["anthropic"]
    received = await agent_turn(agents.lossy, route, "agent-lossy-control")

    expect_faithful(agents, agents.lossy, received, route)
    assert agents.gateway.defects_injected[-1] == "none"


async def raw_blocks(tap: Tap, request_id: str) -> list[tuple[str, str]]:
    """Each `tool_use` block the client got, (name, its `partial_json` joined), read from the
    raw events: the SDK's own accumulator raises on this stream."""
    stream = await tap.messages.messages.create(
        model=VLLM_MODEL, max_tokens=1024, messages=[{"role": "user", "content": QUESTION}],
        tools=MESSAGES_TOOLS, stream=True, extra_headers={"X-Request-ID": request_id})
    blocks: dict[int, list[str]] = {}
    async for event in stream:
        if event.type == "content_block_start" and event.content_block.type == "tool_use":
            blocks[event.index] = [event.content_block.name, ""]
        elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            blocks[event.index][1] += event.delta.partial_json
    return [(name, text) for name, text in blocks.values()]


async def test_claude_code_to_chat_completions_mangles_interleaved_calls(
    agents: AgentStack,
) -> None:
    """LiteLLM 1.108.7's Chat-to-Messages adapter writes every argument fragment into the block
    opened last: when the provider interleaves the fragments of two parallel calls (as the fake
    provider does, and Chat Completions allows), `weather` reaches the client with no input and
    `clock` with both calls' fragments run together. calltap names the loss."""
    tap = agents.faithful
    with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):
        await tap.claude("agent-vllm-sdk", VLLM_MODEL)

    request_id = "agent-vllm-raw"
    blocks = await raw_blocks(tap, request_id)

    assert blocks == [("weather", ""), ("clock", '{"{"cityzone":"":"TaipeiUTC"}"}')]
    pair = await tap.tap.wait_compared(request_id, timeout=30.0)
    route = Route(VLLM_MODEL, MESSAGES_PATH, CHAT_PATH, "openai.chat", "sse")
    expect_paired(tap, pair, route)
    comparison = pair["comparison"]
    assert comparison["verdict"] == "diverged"
    codes = {finding["code"] for finding in comparison["findings"]}
    assert codes == {"TOOL_CALL_ARGUMENTS_CHANGED", "TOOL_CALL_SET_CHANGED",
                     "TOOL_ARGUMENTS_INVALID"}, comparison
    assert comparison["upstream"]["findings"] == [], "the provider's stream was sound"
    logged = {line["code"] for line in tap.log.lines("divergence", request_id)}
    assert logged == codes
    upstream = tap.request_body(request_id, "upstream")
    assert (upstream["model"], offered_tools(upstream)) == ("vllm-fake", ["weather", "clock"])


async def test_claude_code_to_chat_completions_is_equal_when_calls_come_in_turn(
    agents: AgentStack,
) -> None:
    """The same route with the calls one after the other (text, then each call's header and all
    its fragments before the next): LiteLLM's adapter relays both intact, the calls moved one
    block on behind the text block (cosmetic)."""
    request_id = "agent-vllm-in-turn"
    received = await agents.in_turn.claude(request_id, IN_TURN_MODEL)

    assert received.calls == [("tool_0", {"city": "Paris0"}), ("tool_1", {"city": "Paris1"})]
    assert received.stop == "tool_use"
    route = Route(IN_TURN_MODEL, MESSAGES_PATH, CHAT_PATH, "openai.chat", "sse")
    sent = {agents.scripted.sent[request_id].sha256}
    expect_equal(agents.in_turn, received.pair, route, sent, cosmetic=INDEXES_RENUMBERED)
    (upstream,) = [seen for seen in agents.scripted.script.seen
                   if seen["headers"].get("X-Request-ID") == request_id]
    assert upstream["path"] == CHAT_PATH
    assert offered_tools(orjson.loads(upstream["body"])) == ["weather", "clock"]
