"""The routes coding agents take through a real LiteLLM: `/v1/messages` (Claude Code's) and
`/v1/responses` (Codex's), each client speaking its own dialect to calltap's front.

Three calltaps share one LiteLLM:

    faithful: client -> tap front -> LiteLLM -> tap back -> FakeProvider
    lossy:    client -> lossy front -> FakeGateway -> LiteLLM -> lossy back -> FakeProvider
    in_turn:  client -> tap front -> LiteLLM -> tap back -> ScriptedProvider

The fake provider streams the fragments of parallel Chat Completions calls interleaved; the
scripted provider (tests/support) streams `chat_stream()`: some text, then two calls one after
the other, the order OpenAI streams them. LiteLLM's `/v1/messages` route to a Chat Completions
provider relays the scripted order intact and mangles the interleaved one (see the tests and
README.md).

LiteLLM serves each route twice, under a plain model name whose `api_base` is the first
calltap's back and a `lossy-` name whose `api_base` is the second's (`vllm-in-turn` is the
third's). The fake gateway in front of LiteLLM relays faithfully unless a request asks for a
defect (`X-Fake-Gateway-Defect`), and then it injects it into the stream LiteLLM wrote in the
client's dialect: the only defect on the lossy path, since LiteLLM itself relays these routes
faithfully (all but one: see the tests on `hosted_vllm/`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
from litellm_stack import (
    CLOCK,
    MASTER_KEY,
    STARTS,
    WEATHER,
    LiteLLM,
    free_port,
    litellm_config,
    start_litellm,
    stop_litellm,
)
from tests.support.logs import LogLines
from tests.support.provider import ScriptedProvider

from calltap.config import Config
from calltap.fakes.gateway import FakeGateway
from calltap.fakes.provider import FakeProvider
from calltap.fakes.server import LoopbackServer
from calltap.proxy.app import Calltap

MESSAGES_PATH = "/v1/messages"
RESPONSES_PATH = "/v1/responses"
VLLM_MODEL = "vllm-fake"
"""An OpenAI-compatible server that LiteLLM reaches with Chat Completions (`hosted_vllm/`)."""
IN_TURN_MODEL = "vllm-in-turn"
"""The same route, served by the scripted provider behind the third calltap."""
LOSSY = "lossy-"
"""The prefix of the models served through the second calltap's back."""


QUESTION = "What is the weather in Taipei, and the time in UTC?"
MESSAGES_TOOLS = [{"name": tool["function"]["name"], "description": tool["function"]["description"],
                   "input_schema": tool["function"]["parameters"]} for tool in (WEATHER, CLOCK)]
"""The suite's two tools as Claude Code declares tools on `/v1/messages`."""
RESPONSES_TOOLS = [{"type": "function", **tool["function"], "strict": False}
                   for tool in (WEATHER, CLOCK)]
"""The same tools as Codex declares them on `/v1/responses`: Codex's `ResponsesApiTool`
(codex-rs) always writes `strict`, false for its function tools (a Responses tool without it is
strict)."""


@dataclass
class Received:
    """What the client's SDK handed it: the calls (name, decoded arguments) in order, how the turn
    ended, and calltap's pair.json for the request."""

    calls: list[tuple[str, Any]]
    stop: str | None
    pair: dict[str, Any]


@dataclass
class Tap:
    """One calltap, its log and a client of each SDK pointed at its front."""

    tap: Calltap
    log: LogLines
    messages: anthropic.AsyncAnthropic
    responses: openai.AsyncOpenAI

    async def claude(self, request_id: str, model: str, **headers: str) -> Received:
        """Claude Code's turn: the anthropic SDK's `messages.stream()`, its final message."""
        async with self.messages.messages.stream(
            model=model, max_tokens=1024, messages=[{"role": "user", "content": QUESTION}],
            tools=MESSAGES_TOOLS, extra_headers={"X-Request-ID": request_id, **headers},
        ) as stream:
            message = await stream.get_final_message()
        calls = [(block.name, block.input) for block in message.content
                 if block.type == "tool_use"]
        pair = await self.tap.wait_compared(request_id, timeout=30.0)
        return Received(calls, message.stop_reason, pair)

    async def codex(self, request_id: str, model: str, **headers: str) -> Received:
        """Codex's turn: the openai SDK's `responses.stream()`; the calls its final response
        holds, which must be those the stream's `response.output_item.done` events announced."""
        async with self.responses.responses.stream(
            model=model, input=QUESTION, tools=RESPONSES_TOOLS,
            extra_headers={"X-Request-ID": request_id, **headers},
        ) as stream:
            done = [event.item.name async for event in stream
                    if event.type == "response.output_item.done"
                    and event.item.type == "function_call"]
            response = await stream.get_final_response()
        calls = [(item.name, json.loads(item.arguments)) for item in response.output
                 if item.type == "function_call"]
        assert done == [name for name, _ in calls]
        pair = await self.tap.wait_compared(request_id, timeout=30.0)
        return Received(calls, response.status, pair)

    def request_body(self, request_id: str, side: str) -> dict[str, Any]:
        """The request body calltap recorded for one leg (`downstream` or `upstream`)."""
        (path,) = self.tap.recordings.glob(f"*/{request_id}/{side}.request")
        return orjson.loads(path.read_bytes())


@dataclass
class AgentStack:
    provider: FakeProvider
    faithful: Tap
    lossy: Tap
    gateway: FakeGateway
    scripted: ScriptedProvider
    in_turn: Tap
    litellm: LiteLLM


def agent_config(back_url: str, lossy_back_url: str, in_turn_back_url: str) -> dict[str, Any]:
    """LiteLLM's suite config (request headers forwarded, so calltap pairs by `X-Request-ID`)
    plus a `hosted_vllm/` model, every model also under a `lossy-` name served by the second
    back, `IN_TURN_MODEL` served by the third, and no cooldown: a request that fails (the SDK
    that gives up mid-stream on the mangled route) must not turn the next one into 429 "No
    deployments available"."""
    config = litellm_config(back_url, forward_headers=True)
    lossy = litellm_config(lossy_back_url, forward_headers=True)["model_list"]
    config["model_list"] += [
        vllm_model(back_url),
        {**vllm_model(in_turn_back_url), "model_name": IN_TURN_MODEL},
        *({**model, "model_name": LOSSY + model["model_name"]}
          for model in [*lossy, vllm_model(lossy_back_url)]),
    ]
    config["router_settings"] = {"disable_cooldowns": True}
    return config


def vllm_model(back_url: str) -> dict[str, Any]:
    return {"model_name": VLLM_MODEL,
            "litellm_params": {"model": "hosted_vllm/vllm-fake", "api_base": f"{back_url}/v1",
                               "api_key": "sk-vllm-fake"}}


async def open_tap(exits: AsyncExitStack, directory: Path, provider: LoopbackServer,
                   gateway_url: str) -> Tap:
    """A calltap in front of `gateway_url`, and the agents' SDKs pointed at its front (the
    anthropic SDK 2.x sends its API key as `Authorization: Bearer`, as the openai SDK does)."""
    log = LogLines()
    config = Config(front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0),
                    provider=provider.url, admin=("127.0.0.1", 0),
                    recordings=directory / "recordings", compare_workers=1, record_other=True)
    tap = await exits.enter_async_context(Calltap(config, log_stream=log))
    assert tap.front_url is not None and tap.back_url is not None
    messages = anthropic.AsyncAnthropic(base_url=tap.front_url, api_key=MASTER_KEY,
                                        max_retries=0, timeout=30.0)
    responses = openai.AsyncOpenAI(base_url=f"{tap.front_url}/v1", api_key=MASTER_KEY,
                                   max_retries=0, timeout=30.0)
    exits.push_async_callback(messages.close)
    exits.push_async_callback(responses.close)
    return Tap(tap, log, messages, responses)


@asynccontextmanager
async def open_agent_stack(directory: Path) -> AsyncIterator[AgentStack]:
    """Start the providers, the calltaps, the fake gateway and LiteLLM; stop them in reverse."""
    port = free_port()
    litellm_url = f"http://127.0.0.1:{port}"
    async with AsyncExitStack() as exits:
        provider = await exits.enter_async_context(FakeProvider())
        gateway = await exits.enter_async_context(FakeGateway(litellm_url))
        faithful = await open_tap(exits, directory / "faithful", provider, litellm_url)
        lossy = await open_tap(exits, directory / "lossy", provider, gateway.url)
        scripted = await exits.enter_async_context(ScriptedProvider())
        in_turn = await open_tap(exits, directory / "in_turn", scripted, litellm_url)
        backs = [tap.tap.back_url for tap in (faithful, lossy, in_turn)]
        assert None not in backs
        config = agent_config(*backs)
        litellm = await start_litellm(directory, port, config)
        exits.callback(stop_litellm, litellm)
        STARTS["agents"] = litellm.started_in
        yield AgentStack(provider, faithful, lossy, gateway, scripted, in_turn, litellm)



@dataclass(frozen=True)
class Route:
    """Where LiteLLM takes one client endpoint for one model, as calltap must name it."""

    model: str
    downstream_path: str
    upstream_path: str
    upstream_dialect: str
    upstream_framing: str

    @property
    def downstream_dialect(self) -> str:
        return "anthropic.messages" if self.downstream_path == MESSAGES_PATH else "openai.responses"


def offered_tools(request: dict[str, Any]) -> list[str]:
    """The tool names a request offers, in any dialect's shape (`name` at the top, or inside
    `function`)."""
    return [tool.get("name") or tool["function"]["name"] for tool in request["tools"]]


def expect_paired(tap: Tap, pair: dict[str, Any], route: Route) -> None:
    """One attempt, paired by the request id LiteLLM forwarded, each leg on the route's path and
    in its dialect, both complete."""
    assert (pair["pairing"], pair["orphaned"], pair["attempts"]) == ("header", False, 1)
    comparison = pair["comparison"]
    assert comparison["downstream"]["dialect"] == route.downstream_dialect
    assert comparison["upstream"]["dialect"] == route.upstream_dialect
    assert comparison["upstream"]["framing"] == route.upstream_framing
    downstream, upstream = pair["legs"]["downstream"], pair["legs"]["upstream"]
    assert (downstream["path"], upstream["path"]) == (route.downstream_path, route.upstream_path)
    for leg in (downstream, upstream):
        assert (leg["method"], leg["status"], leg["ended"]) == ("POST", 200, "complete")
    assert tap.log.lines("pair.orphaned") == []


def expect_faithful(stack: AgentStack, tap: Tap, received: Received, route: Route) -> None:
    """Both calls reached the client, the pair compares `equal` with no finding at all, the
    upstream leg is what the provider sent, and the log says `equal` with no divergence."""
    assert received.calls == [("weather", {"city": "Taipei"}), ("clock", {"zone": "UTC"})]
    sent = {exchange.sha256 for exchange in stack.provider.exchanges if exchange.complete}
    expect_equal(tap, received.pair, route, sent)


def expect_equal(tap: Tap, pair: dict[str, Any], route: Route, sent: set[str | None], *,
                 cosmetic: frozenset[str] = frozenset()) -> None:
    """Paired on the route, `equal` with only the `cosmetic` codes, two calls on each side, the
    upstream leg one of the answers the provider `sent` (their sha256), no divergence logged."""
    expect_paired(tap, pair, route)
    comparison = pair["comparison"]
    assert comparison["verdict"] == "equal", comparison
    assert {finding["code"] for finding in comparison["findings"]} == cosmetic, comparison
    assert comparison["upstream"]["tool_calls"] == comparison["downstream"]["tool_calls"] == 2
    assert pair["legs"]["upstream"]["sha256"] in sent, "the upstream leg is not what was sent"
    (compared,) = tap.log.lines("pair.compared", pair["request_id"])
    assert (compared["verdict"], compared["pairing"]) == ("equal", "header")
    assert set(compared["codes"]) == cosmetic
    assert tap.log.lines("divergence", pair["request_id"]) == []
