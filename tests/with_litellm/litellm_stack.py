"""A real LiteLLM proxy between two calltap listeners, for the LiteLLM suite.

client (openai SDK) -> calltap front -> LiteLLM (subprocess) -> calltap back -> FakeProvider

calltap and the fake provider run in the test's own event loop, so each request can wait for its
pair.json with `Calltap.wait_compared` and read calltap's log from memory; LiteLLM runs from
`.venv-litellm` exactly as an operator would start it. Its port is chosen before calltap starts
(the front needs the gateway's URL) and its config points every model at calltap's back, which
must already be listening: LiteLLM calls `GET /v1/models` there while it starts.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import orjson
from tests.support.gateways import GatewayProcess, start_gateway, stop_gateway
from tests.support.logs import LogLines

from calltap.config import Config
from calltap.fakes.provider import FakeProvider
from calltap.proxy.app import Calltap

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-litellm"
STAMP = VENV / ".installed"
"""Written by `make litellm` once the venv is complete; the suite runs only when it exists."""
LITELLM = VENV / "bin" / "litellm"
MASTER_KEY = "sk-calltap-litellm-master"
"""LiteLLM refuses to serve without a master key; the client sends it as its bearer token."""
OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-fake"
GEMINI_MODEL = "gemini-fake"
OLLAMA_MODEL = "ollama-fake"
CONVERSE_MODEL = "bedrock-converse-fake"
INVOKE_MODEL = "bedrock-invoke-fake"
GEMINI_CURRENT_MODEL = "gemini-current-fake"
"""`gemini/gemini-2.5-flash`: a model LiteLLM 1.108.7's model map still lists. `gemini-2.0-flash`
(GEMINI_MODEL) is gone from it, and for a model it does not know LiteLLM writes the system
message into the first user turn (`get_supports_system_message`)."""
RESPONSES_MODEL = "responses-fake"
"""`openai/responses/gpt-5-mini`: LiteLLM's Chat Completions -> Responses bridge."""
BEDROCK_MODEL_ID = "anthropic.claude-3-5-sonnet-20241022-v2:0"
FAKE_AWS = {
    "aws_access_key_id": "AKIDCALLTAPFAKE00000",
    "aws_secret_access_key": "calltap-fake-secret-access-key-0000000000",
    "aws_region_name": "us-east-1",
}
"""Credentials LiteLLM signs its Bedrock requests with: any well-formed pair will do, since the
fake provider behind calltap checks no signature."""
READY_PATH = "/health/readiness"
READY_TIMEOUT = 90.0
CHAT_PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"
WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}
CLOCK = {
    "type": "function",
    "function": {
        "name": "clock",
        "description": "Current time in a time zone",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
    },
}
INDEXES_RENUMBERED = frozenset({"TOOL_CALL_IDS_REMAPPED"})
"""LiteLLM numbers the tool calls it translates from Anthropic blocks from 0, past the text
block that held index 0 upstream: cosmetic."""
STREAM = {"stream": True, "stream_options": {"include_usage": True}}
"""A streamed request that asks for usage, as most clients that count tokens do."""
PARALLEL_CALLS = [("weather", {"city": "Taipei"}), ("clock", {"zone": "UTC"})]
"""What the fake provider answers when offered WEATHER and CLOCK: both, as parallel calls."""


def question(text: str = "What is the weather in Taipei, and the time in UTC?") -> list[Any]:
    return [{"role": "user", "content": text}]


PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5E"
       "rkJggg==")
"""A 1x1 PNG, sent inline as a data URL."""
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Answer in one sentence."},
    {"role": "user", "content": [
        {"type": "text", "text": "What is the weather where this photo was taken, and the time?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]},
    {"role": "assistant", "content": "Let me look both up.", "tool_calls": [
        {"id": "call_weather", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Taipei"}'}},
        {"id": "call_clock", "type": "function",
         "function": {"name": "clock", "arguments": '{"zone": "UTC"}'}},
    ]},
    {"role": "tool", "tool_call_id": "call_weather", "content": "Sunny, 31 C"},
    {"role": "tool", "tool_call_id": "call_clock", "content": "12:00"},
    {"role": "assistant", "content": "It is sunny and 31 C in Taipei, and noon in UTC."},
    {"role": "user", "content": "And tomorrow?"},
]
"""A conversation an agent sends on its second round: instructions, an image, two parallel calls
and their results, the answer, and a new question."""
REPORT_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
ASKED: dict[str, dict[str, Any]] = {
    "forced": {"messages": question(), "tools": [WEATHER, CLOCK],
               "tool_choice": {"type": "function", "function": {"name": "weather"}}},
    "conversation": {"messages": CONVERSATION, "tools": [WEATHER, CLOCK]},
    "structured": {"messages": question("Report the weather in Taipei."),
                   "response_format": {"type": "json_schema", "json_schema": {
                       "name": "report", "schema": REPORT_SCHEMA, "strict": True}}},
}
"""What a client asks besides plain tools (which every route test offers): the requests the
suites' `test_what_the_client_asked_reaches_the_provider` send on each translating route."""
TURNS = {"forced": 1, "conversation": 5, "structured": 1}
"""The client's turns as calltap counts them: the system message is instructions, and the two
tool results are one user turn."""

STARTS: dict[str, float] = {}
"""Seconds each LiteLLM took from launch to a ready answer, by stack name, for the summary."""


@dataclass
class Reply:
    """What the openai SDK handed the client, assembled from chunks when streamed."""

    text: str = ""
    tool_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish_reason: str | None = None

    def calls(self) -> list[tuple[str, Any]]:
        """(name, decoded arguments) in index order."""
        return [
            (call["name"], json.loads(call["arguments"]))
            for _, call in sorted(self.tool_calls.items())
        ]


@dataclass
class Sent:
    request_id: str
    reply: Reply
    pair: dict[str, Any]


LiteLLM = GatewayProcess
"""The LiteLLM process, its log file and how long it took to answer its readiness check."""


def free_port() -> int:
    """A port nothing listens on right now, for LiteLLM (which cannot report an ephemeral one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def litellm_config(back_url: str, forward_headers: bool) -> dict[str, Any]:
    """One model per route, every one served by calltap's back: OpenAI, Anthropic, Gemini,
    Ollama, Bedrock Converse and Anthropic on Bedrock's InvokeModel."""
    return {
        "model_list": [
            {
                "model_name": OPENAI_MODEL,
                "litellm_params": {
                    "model": f"openai/{OPENAI_MODEL}",
                    "api_base": f"{back_url}/v1",
                    "api_key": "sk-provider-fake",
                },
            },
            {
                "model_name": ANTHROPIC_MODEL,
                "litellm_params": {
                    "model": "anthropic/claude-3-5-sonnet-20241022",
                    "api_base": back_url,
                    "api_key": "sk-ant-provider-fake",
                },
            },
            *translated_routes(back_url),
        ],
        "general_settings": {
            "master_key": MASTER_KEY,
            "forward_client_headers_to_llm_api": forward_headers,
        },
    }


def translated_routes(back_url: str) -> list[dict[str, Any]]:
    """LiteLLM's `gemini/` (two models), `ollama_chat/`, `bedrock/` (Converse),
    `bedrock/invoke/` and `openai/responses/` routes, each pointed at calltap's back by
    `api_base` (LiteLLM appends each provider's own path)."""
    routes = [
        (GEMINI_MODEL, {"model": "gemini/gemini-2.0-flash", "api_base": f"{back_url}/v1beta",
                        "api_key": "fake-gemini-key"}),
        (GEMINI_CURRENT_MODEL, {"model": "gemini/gemini-2.5-flash",
                                "api_base": f"{back_url}/v1beta", "api_key": "fake-gemini-key"}),
        (RESPONSES_MODEL, {"model": "openai/responses/gpt-5-mini", "api_base": f"{back_url}/v1",
                           "api_key": "sk-provider-fake"}),
        (OLLAMA_MODEL, {"model": "ollama_chat/llama3.1", "api_base": back_url}),
        (CONVERSE_MODEL, {"model": f"bedrock/{BEDROCK_MODEL_ID}", "api_base": back_url,
                          **FAKE_AWS}),
        (INVOKE_MODEL, {"model": f"bedrock/invoke/{BEDROCK_MODEL_ID}", "api_base": back_url,
                        **FAKE_AWS}),
    ]
    return [{"model_name": name, "litellm_params": params} for name, params in routes]


async def start_litellm(directory: Path, port: int, config: dict[str, Any], *,
                        executable: Path = LITELLM) -> LiteLLM:
    """Start LiteLLM (`executable`, the `litellm` script of a venv) and wait until its readiness
    check answers 200; fail with its log if it exits or is not ready within READY_TIMEOUT. The
    config is JSON, which is valid YAML."""
    config_file = directory / "litellm.yaml"
    config_file.write_bytes(orjson.dumps(config, option=orjson.OPT_INDENT_2))
    log = directory / "litellm.log"
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY_DISABLED": "true",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    command = [str(executable), "--config", str(config_file), "--port", str(port),
               "--host", "127.0.0.1"]
    return await start_gateway("LiteLLM", command, port=port, log=log, env=env, cwd=directory,
                               ready_path=READY_PATH, timeout=READY_TIMEOUT)


stop_litellm = stop_gateway


@dataclass
class Stack:
    """The running topology and the client that talks to its front."""

    provider: FakeProvider
    tap: Calltap
    litellm: LiteLLM
    log: LogLines
    client: openai.AsyncOpenAI

    async def chat(self, request_id: str, **request: Any) -> Sent:
        """Send one chat completion through calltap's front and wait for its pair.json."""
        headers = {"X-Request-ID": request_id}
        reply = Reply()
        if request.get("stream"):
            stream = await self.client.chat.completions.create(**request, extra_headers=headers)
            async for chunk in stream:
                for choice in chunk.choices:
                    _add_delta(reply, choice.delta)
                    reply.finish_reason = choice.finish_reason or reply.finish_reason
        else:
            completion = await self.client.chat.completions.create(
                **request, extra_headers=headers)
            read_completion(reply, completion)
        pair = await self.tap.wait_compared(request_id, timeout=30.0)
        return Sent(request_id, reply, pair)

    def pair_files(self) -> list[dict[str, Any]]:
        """Every pair.json calltap has written so far."""
        return [orjson.loads(path.read_bytes())
                for path in self.tap.recordings.glob("*/*/pair.json")]

    def request_body(self, sent: Sent, side: str) -> dict[str, Any]:
        """The request body calltap recorded for one leg (`downstream` or `upstream`)."""
        (path,) = self.tap.recordings.glob(f"*/{sent.request_id}/{side}.request")
        return orjson.loads(path.read_bytes())

    def expect_faithful(self, sent: Sent, *, pairing: str, upstream_path: str = CHAT_PATH,
                        upstream_dialect: str = "openai.chat",
                        cosmetic: frozenset[str] = frozenset()) -> None:
        """The pair was linked by `pairing`, compares `equal` with only the `cosmetic` codes
        expected, and calltap's log says exactly that: no divergence, no orphan."""
        pair = sent.pair
        assert pair["request_id"] == sent.request_id
        assert pair["pairing"] == pairing
        assert pair["orphaned"] is False
        assert pair["attempts"] == 1
        comparison = pair["comparison"]
        assert comparison["verdict"] == "equal", comparison
        assert {f["code"] for f in comparison["findings"]} == cosmetic, comparison
        assert comparison["upstream"]["dialect"] == upstream_dialect
        assert comparison["downstream"]["dialect"] == "openai.chat"
        downstream, upstream = pair["legs"]["downstream"], pair["legs"]["upstream"]
        assert (downstream["path"], upstream["path"]) == (CHAT_PATH, upstream_path)
        for leg in (downstream, upstream):
            assert (leg["method"], leg["status"], leg["ended"]) == ("POST", 200, "complete")
        assert downstream["request_headers"]["authorization"] == "[redacted]"
        sent_by_provider = {exchange.sha256 for exchange in self.provider.exchanges
                            if exchange.complete}
        assert upstream["sha256"] in sent_by_provider, "the upstream leg is not what was sent"
        (compared,) = self.log.lines("pair.compared", sent.request_id)
        assert (compared["verdict"], compared["pairing"], compared["attempts"]) == (
            "equal", pairing, 1)
        assert set(compared["codes"]) == cosmetic
        assert self.log.lines("divergence", sent.request_id) == []
        assert self.log.lines("pair.orphaned") == []


def read_completion(reply: Reply, completion: Any) -> None:
    """What the client reads of a whole (not streamed) chat completion: text, calls, finish."""
    message = completion.choices[0].message
    reply.text = message.content or ""
    for index, call in enumerate(message.tool_calls or []):
        reply.tool_calls[index] = {"name": call.function.name,
                                   "arguments": call.function.arguments}
    reply.finish_reason = completion.choices[0].finish_reason


def _add_delta(reply: Reply, delta: Any) -> None:
    reply.text += delta.content or ""
    for fragment in delta.tool_calls or []:
        call = reply.tool_calls.setdefault(fragment.index, {"name": "", "arguments": ""})
        if fragment.function is not None:
            call["name"] += fragment.function.name or ""
            call["arguments"] += fragment.function.arguments or ""


@asynccontextmanager
async def open_stack(name: str, directory: Path, *, forward_headers: bool,
                     bucket: str | None = None) -> AsyncIterator[Stack]:
    """Start the fake provider, calltap (recording `/v1/models` too; uploading to `bucket` from
    a spool when given) and LiteLLM; stop them in reverse order."""
    port = free_port()
    log = LogLines()
    async with FakeProvider() as provider:
        config = Config(front=("127.0.0.1", 0), gateway=f"http://127.0.0.1:{port}",
                        back=("127.0.0.1", 0), provider=provider.url, admin=("127.0.0.1", 0),
                        recordings=directory / "recordings", compare_workers=1,
                        record_other=True, bucket=bucket)
        async with Calltap(config, log_stream=log) as tap:
            assert tap.back_url is not None and tap.front_url is not None
            litellm = await start_litellm(directory, port,
                                          litellm_config(tap.back_url, forward_headers))
            STARTS[name] = litellm.started_in
            client = openai.AsyncOpenAI(base_url=f"{tap.front_url}/v1", api_key=MASTER_KEY,
                                        max_retries=0, timeout=30.0)
            try:
                yield Stack(provider, tap, litellm, log, client)
            finally:
                await client.close()
                stop_litellm(litellm)
