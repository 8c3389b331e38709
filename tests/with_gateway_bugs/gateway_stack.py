"""One real LiteLLM release between the two listeners of a real `calltap serve`.

client (openai SDK) -> calltap front -> LiteLLM <release> -> calltap back -> FakeProvider

Everything but the client and the fake provider is a subprocess started as an operator would:
calltap from this repository's venv (`tests.reliability.harness.launch`), LiteLLM from the venv
of its release (`.venv-gw-<release>`, built by `make gateway-bugs` from
`releases/<release>/requirements.txt`).
LiteLLM's port is chosen first, since calltap's front needs the gateway's URL, and LiteLLM starts
last, since it calls calltap's back while it starts. What calltap concluded is read from its JSON
log on stdout, as an operator's log pipeline would read it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import orjson
from tests.reliability.harness import Served, launch
from tests.support.gateways import sdk_accumulator_error
from tests.support.logs import LogLines
from tests.with_litellm.litellm_stack import (
    MASTER_KEY,
    LiteLLM,
    Reply,
    _add_delta,
    free_port,
    start_litellm,
    stop_litellm,
)

from calltap.fakes.resetting import ResettingProvider

ROOT = Path(__file__).resolve().parents[2]
RELEASES = Path(__file__).parent / "releases"
ALARMS = ("divergence", "leg.defect")
"""The log events that tell an operator a client got something the provider never sent."""
SETTLED = ("pair.compared", "pair.orphaned", "leg.checked")
COMPARED_TIMEOUT = 30.0
STARTS: dict[str, float] = {}
"""Seconds each release took from launch to a ready answer, for the summary."""


def venv(release: str) -> Path:
    return ROOT / f".venv-gw-{release}"


def stamp(release: str) -> Path:
    """Written by the make target once the release's venv is complete."""
    return venv(release) / ".installed"


def litellm_config(back_url: str, models: dict[str, str | dict[str, Any]]) -> dict[str, Any]:
    """Every model name in `models` served by calltap's back: a LiteLLM model string is an
    OpenAI-compatible route (`api_base` the back's `/v1`); a dict is the route's own
    `litellm_params`, its `api_base` a path on the back (LiteLLM appends the provider's path)."""
    return {
        "model_list": [
            {"model_name": name, "litellm_params": _params(back_url, model)}
            for name, model in models.items()
        ],
        "general_settings": {"master_key": MASTER_KEY,
                             "forward_client_headers_to_llm_api": True},
    }


def _params(back_url: str, model: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(model, str):
        return {"model": model, "api_base": f"{back_url}/v1", "api_key": "sk-provider-fake"}
    return {**model, "api_base": back_url + model.get("api_base", "")}


@dataclass
class Streamed:
    """What the client got from one streamed chat completion."""

    request_id: str
    reply: Reply
    chunks: list[Any]
    tool_call_indexes: list[int] = field(default_factory=list)
    """The `index` of every tool-call delta, in order."""

    def sdk_accumulator_error(self) -> BaseException | None:
        """What the openai SDK's own stream accumulator raises on these chunks, if anything."""
        return sdk_accumulator_error(self.chunks)


@dataclass
class GatewayStack:
    """A running topology and the client that talks to calltap's front."""

    release: str
    provider: ResettingProvider
    calltap: Served
    litellm: LiteLLM
    client: openai.AsyncOpenAI

    def log(self) -> LogLines:
        return LogLines(self.calltap.log_path.read_text())

    async def stream_chat(self, request_id: str, *, headers: dict[str, str] | None = None,
                          **request: Any) -> Streamed:
        """One streamed chat completion through calltap's front, read to its end."""
        streamed = Streamed(request_id, Reply(), [])
        stream = await self.client.chat.completions.create(
            **request, stream=True, extra_headers={"X-Request-ID": request_id, **(headers or {})})
        async for chunk in stream:
            streamed.chunks.append(chunk)
            for choice in chunk.choices:
                _add_delta(streamed.reply, choice.delta)
                streamed.reply.finish_reason = choice.finish_reason or streamed.reply.finish_reason
                streamed.tool_call_indexes += [call.index for call in choice.delta.tool_calls or []]
        return streamed

    async def settled(self, request_id: str) -> dict[str, Any]:
        """calltap's line that closes this request (compared, orphaned or checked alone)."""
        async with asyncio.timeout(COMPARED_TIMEOUT):
            while True:
                log = self.log()
                for event in SETTLED:
                    if lines := log.lines(event, request_id):
                        return lines[0]
                await asyncio.sleep(0.1)

    def alarms(self, request_id: str) -> list[dict[str, Any]]:
        """Every `divergence` and `leg.defect` line calltap logged for this request."""
        log = self.log()
        return [line for event in ALARMS for line in log.lines(event, request_id)]

    async def expect_caught(self, request_id: str, codes: set[str]) -> None:
        """calltap compared the pair, found it diverged and logged exactly these codes, at least
        one of them fatal."""
        settled = await self.settled(request_id)
        assert (settled["event"], settled["verdict"]) == ("pair.compared", "diverged"), settled
        alarms = self.alarms(request_id)
        assert {line["code"] for line in alarms} == codes, alarms
        assert "fatal" in {line["severity"] for line in alarms}, alarms

    async def expect_clean(self, request_id: str, cosmetic: frozenset[str] = frozenset()) -> None:
        """calltap compared the pair, found it equal (with only the `cosmetic` findings) and
        logged no alarm about it."""
        settled = await self.settled(request_id)
        assert (settled["event"], settled["verdict"]) == ("pair.compared", "equal"), settled
        assert set(settled["codes"]) == cosmetic, settled
        assert self.alarms(request_id) == []

    def pair(self, request_id: str) -> dict[str, Any]:
        """The pair.json calltap wrote for this request."""
        (path,) = self.calltap.recordings.glob(f"*/{request_id}/pair.json")
        return orjson.loads(path.read_bytes())

    def recorded_request(self, request_id: str, side: str) -> dict[str, Any]:
        """The request body calltap recorded on one leg (`downstream`: the client's; `upstream`:
        the provider's)."""
        (path,) = self.calltap.recordings.glob(f"*/{request_id}/{side}.request")
        return orjson.loads(path.read_bytes())

    async def expect_request_caught(self, request_id: str, codes: set[str], *,
                                    answers: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        """calltap found the provider asked something else than the client asked: pair.json's
        request findings (`side: "request"`) are exactly these codes, the pair is `diverged`, and
        each breaking one is a `divergence` line with `side: "request"`; the answers' own
        findings are only the `answers` codes, none of them logged. The request findings, for
        closer checks."""
        settled = await self.settled(request_id)
        assert (settled["event"], settled["verdict"]) == ("pair.compared", "diverged"), settled
        comparison = self.pair(request_id)["comparison"]
        findings = comparison["requests"]["findings"]
        assert {f["code"] for f in findings} == codes, findings
        assert [f for f in comparison["findings"] if f["side"] == "request"] == findings
        assert {f["code"] for f in comparison["findings"] if f["side"] != "request"} == answers
        breaking = sorted(f["code"] for f in findings if f["severity"] in ("fatal", "negotiable"))
        alarms = self.alarms(request_id)
        assert breaking and {line["side"] for line in alarms} == {"request"}, alarms
        assert sorted(line["code"] for line in alarms) == breaking, alarms
        return findings

    def provider_answer(self, request_id: str) -> tuple[dict[str, Any], bytes]:
        """The request the fake provider got for this client request, and what it answered."""
        exchange = self.provider.exchange_for(request_id)
        return orjson.loads(exchange.request_body), bytes(exchange.response_body)


@asynccontextmanager
async def open_stack(release: str, directory: Path,
                     models: dict[str, str | dict[str, Any]]) -> AsyncIterator[GatewayStack]:
    """Start the fake provider, `calltap serve` and the release's LiteLLM; stop them in reverse
    order."""
    port = free_port()
    async with ResettingProvider() as provider:
        calltap = await launch(directory, directory / "recordings",
                               gateway=f"http://127.0.0.1:{port}", provider=provider.url)
        try:
            litellm = await start_litellm(
                directory, port, litellm_config(calltap.urls["back"], models),
                executable=venv(release) / "bin" / "litellm")
            STARTS[release] = litellm.started_in
            client = openai.AsyncOpenAI(base_url=f"{calltap.urls['front']}/v1",
                                        api_key=MASTER_KEY, max_retries=0, timeout=30.0)
            try:
                yield GatewayStack(release, provider, calltap, litellm, client)
            finally:
                await client.close()
                stop_litellm(litellm)
        finally:
            calltap.end()
