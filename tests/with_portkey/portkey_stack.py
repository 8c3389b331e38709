"""A real Portkey gateway between two calltap listeners, for the Portkey suite.

client (openai SDK) -> calltap front -> Portkey gateway (node subprocess) -> calltap back
    -> calltap.fakes.variants.VariantProvider (the fake provider, varied per request by header)

calltap and the fake provider run in the test's own event loop (as in `tests/with_litellm`), so
each request can wait for its pair.json and read calltap's log from memory; Portkey runs from
`tests/with_portkey/gateway/node_modules` (built by `make portkey`) exactly as its README starts
it. Portkey has no config file here: every request names its route in headers
(`x-portkey-provider`, `x-portkey-custom-host` pointing at calltap's back), and a stack that
pairs by header also lists `x-request-id,traceparent` in `x-portkey-forward-headers`, without
which Portkey forwards no client header upstream.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import orjson
from tests.support.gateways import (
    GatewayProcess,
    sdk_accumulator_error,
    start_gateway,
    stop_gateway,
)
from tests.support.logs import LogLines
from tests.with_litellm.litellm_stack import (
    BEDROCK_MODEL_ID,
    CHAT_PATH,
    Reply,
    _add_delta,
    free_port,
    read_completion,
)

from calltap.config import Config
from calltap.fakes.variants import VariantProvider
from calltap.proxy.app import Calltap

HERE = Path(__file__).resolve().parent
GATEWAY_DIR = HERE / "gateway"
STAMP = GATEWAY_DIR / "node_modules" / ".installed"
"""Written by `make portkey` once `npm ci` has finished; the suite runs only when it exists."""
RELEASE = "1.15.2"
OLD_RELEASE = "1.9.8"
START_SERVERS = {
    RELEASE: GATEWAY_DIR / "node_modules/@portkey-ai/gateway/build/start-server.js",
    OLD_RELEASE: GATEWAY_DIR / "node_modules/portkey-gateway-1.9.8/build/start-server.js",
}
"""The suite's release, and 1.9.8 (installed beside it under an npm alias), the release before
the request bugs `test_portkey_request_bugs.py` shows fixed in 1.15.2."""
API_KEY = "sk-calltap-portkey-provider-fake"
"""The provider key Portkey passes on (as `Authorization`, `x-api-key`, `?key=` by route)."""
READY_TIMEOUT = 60.0
FORWARD = "x-request-id,traceparent"


@dataclass(frozen=True)
class Route:
    """One Portkey provider route: its headers (the custom host is a path on calltap's back),
    the model the client names, and the provider path Portkey calls for a stream and a body."""

    provider: str
    model: str
    host_path: str
    stream_path: str
    whole_path: str
    dialect: str
    extra: tuple[tuple[str, str], ...] = ()
    max_tokens: int | None = None
    """Sent when the client names none: Portkey's Anthropic route adds no default, and Anthropic
    (like the fake provider) answers a request without `max_tokens` with a 400."""

    def headers(self, back_url: str, forward: bool) -> dict[str, str]:
        headers = {"x-portkey-provider": self.provider,
                   "x-portkey-custom-host": back_url + self.host_path, **dict(self.extra)}
        if forward:
            headers["x-portkey-forward-headers"] = FORWARD
        return headers

    def path(self, stream: bool) -> str:
        return self.stream_path if stream else self.whole_path


GEMINI_MODEL = "gemini-2.0-flash"
ROUTES = {
    route.provider: route
    for route in (
        Route("openai", "gpt-4o-mini", "/v1", CHAT_PATH, CHAT_PATH, "openai.chat"),
        Route("anthropic", "claude-3-5-sonnet-20241022", "/v1", "/v1/messages", "/v1/messages",
              "anthropic.messages", max_tokens=1024),
        Route("google", GEMINI_MODEL, "", f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent",
              f"/v1beta/models/{GEMINI_MODEL}:generateContent", "google.gemini"),
        Route("bedrock", BEDROCK_MODEL_ID, "", f"/model/{BEDROCK_MODEL_ID}/converse-stream",
              f"/model/{BEDROCK_MODEL_ID}/converse", "bedrock.converse",
              (("x-portkey-aws-auth-type", "apiKey"), ("x-portkey-aws-region", "us-east-1"))),
    )
}
"""The four routes of the suite. The custom host replaces the provider's whole base URL, so the
OpenAI and Anthropic routes include `/v1`; Gemini and Bedrock add their own paths after it.
`x-portkey-aws-auth-type: apiKey` makes Portkey send `Authorization: Bearer <key>` instead of a
SigV4 signature (`BedrockAPIConfig.headers` in src/providers/bedrock/api.ts)."""
FAKE_AWS_KEYS = (("x-portkey-aws-access-key-id", "AKIDCALLTAPFAKE00000"),
                 ("x-portkey-aws-secret-access-key", "calltap-fake-secret-access-key-0000000000"),
                 ("x-portkey-aws-region", "us-east-1"))
ROUTES["bedrock-signed"] = Route(
    "bedrock", BEDROCK_MODEL_ID, "", f"/model/{BEDROCK_MODEL_ID}/converse-stream",
    f"/model/{BEDROCK_MODEL_ID}/converse", "bedrock.converse", FAKE_AWS_KEYS)
"""The Bedrock route signed with SigV4 (fake keys: the fake provider checks no signature), for a
release older than the `apiKey` auth type (1.9.8 signs every Bedrock request)."""

STARTS: dict[str, float] = {}
"""Seconds each Portkey took from launch to its first answer, by stack name and release, for
the summary."""


@dataclass
class Received(Reply):
    """What the openai SDK handed the client: the assembled reply, the usage, and every chunk
    as the SDK parsed it (a stream)."""

    usage: dict[str, Any] | None = None
    chunks: list[Any] = field(default_factory=list)

    def sdk_accumulator_error(self) -> BaseException | None:
        """What the openai SDK's own stream accumulator raises on these chunks, if anything."""
        return sdk_accumulator_error(self.chunks)


@dataclass
class Sent:
    request_id: str
    reply: Received
    pair: dict[str, Any]


Portkey = GatewayProcess
"""The gateway process and its log file."""


async def start_portkey(directory: Path, port: int, release: str = RELEASE) -> Portkey:
    """Start the gateway `release` as its README does (`--port`, since it ignores PORT;
    `--headless`: no console UI) and wait until `GET /` answers 200; fail with its log
    otherwise."""
    log = directory / "portkey.log"
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost"}
    command = ["node", str(START_SERVERS[release]), f"--port={port}", "--headless"]
    return await start_gateway("Portkey", command, port=port, log=log, env=env,
                               cwd=GATEWAY_DIR, ready_path="/", timeout=READY_TIMEOUT)


stop_portkey = stop_gateway


@dataclass
class Stack:
    """The running topology; `forward` says whether requests list the pairing headers in
    `x-portkey-forward-headers`."""

    provider: VariantProvider
    tap: Calltap
    portkey: Portkey
    log: LogLines
    client: openai.AsyncOpenAI
    forward: bool

    def headers(self, route: str, request_id: str, extra: dict[str, str] | None = None
                ) -> dict[str, str]:
        assert self.tap.back_url is not None
        return {"X-Request-ID": request_id,
                **ROUTES[route].headers(self.tap.back_url, self.forward), **(extra or {})}

    async def chat(self, route: str, request_id: str, *, extra: dict[str, str] | None = None,
                   **request: Any) -> Sent:
        """Send one chat completion on `route` through calltap's front and wait for its
        pair.json. `extra` adds request headers (and to the forwarded list when forwarding)."""
        headers = self.headers(route, request_id, extra)
        if extra and self.forward:
            headers["x-portkey-forward-headers"] = ",".join([FORWARD, *extra])
        request.setdefault("model", ROUTES[route].model)
        if ROUTES[route].max_tokens is not None:
            request.setdefault("max_tokens", ROUTES[route].max_tokens)
        reply = Received()
        if request.get("stream"):
            stream = await self.client.chat.completions.create(**request, extra_headers=headers)
            async for chunk in stream:
                reply.chunks.append(chunk)
                reply.usage = chunk.usage.model_dump() if chunk.usage else reply.usage
                for choice in chunk.choices:
                    _add_delta(reply, choice.delta)
                    reply.finish_reason = choice.finish_reason or reply.finish_reason
        else:
            completion = await self.client.chat.completions.create(
                **request, extra_headers=headers)
            read_completion(reply, completion)
            reply.usage = completion.usage.model_dump() if completion.usage else None
        pair = await self.tap.wait_compared(request_id, timeout=30.0)
        return Sent(request_id, reply, pair)

    def recorded(self, request_id: str, name: str) -> bytes:
        """One file of the pair's recording directory (`downstream.sse`, `upstream.request`…)."""
        (path,) = self.tap.recordings.glob(f"*/{request_id}/{name}")
        return path.read_bytes()

    def request_body(self, sent: Sent, side: str) -> dict[str, Any]:
        """The request body calltap recorded for one leg (`downstream` or `upstream`)."""
        return orjson.loads(self.recorded(sent.request_id, f"{side}.request"))

    def leg_file(self, sent: Sent, side: str) -> bytes:
        return self.recorded(sent.request_id, sent.pair["legs"][side]["file"])

    def codes(self, sent: Sent) -> set[str]:
        return {finding["code"] for finding in sent.pair["comparison"]["findings"]}

    def expect_equal(self, sent: Sent, route: str, *, stream: bool, pairing: str,
                     cosmetic: frozenset[str] = frozenset()) -> None:
        """The pair was linked by `pairing`, crossed Portkey on `route`'s provider path,
        compares `equal` with no finding but the `cosmetic` ones, and calltap's log says
        exactly that."""
        pair, spec = sent.pair, ROUTES[route]
        assert (pair["request_id"], pair["pairing"], pair["attempts"]) == (
            sent.request_id, pairing, 1)
        comparison = pair["comparison"]
        assert comparison["verdict"] == "equal", comparison
        assert self.codes(sent) == cosmetic, comparison
        assert comparison["upstream"]["dialect"] == spec.dialect
        assert comparison["downstream"]["dialect"] == "openai.chat"
        downstream, upstream = pair["legs"]["downstream"], pair["legs"]["upstream"]
        assert (downstream["path"], upstream["path"]) == (CHAT_PATH, spec.path(stream))
        for leg in (downstream, upstream):
            assert (leg["method"], leg["status"], leg["ended"]) == ("POST", 200, "complete")
        sent_by_provider = {exchange.sha256 for exchange in self.provider.exchanges
                            if exchange.complete}
        assert upstream["sha256"] in sent_by_provider, "the upstream leg is not what was sent"
        (compared,) = self.log.lines("pair.compared", sent.request_id)
        assert (compared["verdict"], set(compared["codes"]), compared["pairing"]) == (
            "equal", cosmetic, pairing)
        assert self.log.lines("divergence", sent.request_id) == []

    def expect_diverged(self, sent: Sent, codes: set[str]) -> list[dict[str, Any]]:
        """The pair compares `diverged` with exactly these finding codes, each fatal or
        negotiable one logged as a `divergence` line; the findings, for closer checks."""
        comparison = sent.pair["comparison"]
        assert comparison["verdict"] == "diverged", comparison
        assert self.codes(sent) == codes, comparison
        (compared,) = self.log.lines("pair.compared", sent.request_id)
        assert (compared["verdict"], set(compared["codes"])) == ("diverged", codes)
        alarms = {line["code"] for line in self.log.lines("divergence", sent.request_id)}
        logged = {finding["code"] for finding in comparison["findings"]
                  if finding["severity"] in ("fatal", "negotiable")}
        assert alarms == logged, (alarms, comparison)
        return comparison["findings"]

    def request_findings(self, sent: Sent) -> list[dict[str, Any]]:
        """The findings of the requests' comparison (`side: "request"`), as in pair.json."""
        requests = sent.pair["comparison"]["requests"]
        assert [f for f in sent.pair["comparison"]["findings"] if f["side"] == "request"] == (
            requests["findings"])
        return requests["findings"]

    def expect_request_diverged(self, sent: Sent, codes: set[str]) -> list[dict[str, Any]]:
        """The request the provider got differs from the client's by exactly these codes, each
        fatal or negotiable one logged as a `divergence` line with `side: "request"`, and the
        pair is `diverged` for it; the request findings, for closer checks."""
        findings = self.request_findings(sent)
        assert {f["code"] for f in findings} == codes, findings
        assert sent.pair["comparison"]["requests"]["verdict"] == "diverged"
        assert sent.pair["comparison"]["verdict"] == "diverged"
        logged = [line for line in self.log.lines("divergence", sent.request_id)
                  if line["side"] == "request"]
        breaking = [f for f in findings if f["severity"] in ("fatal", "negotiable")]
        assert breaking, findings
        assert sorted(line["code"] for line in logged) == sorted(f["code"] for f in breaking)
        return findings


@asynccontextmanager
async def open_stack(name: str, directory: Path, *, forward: bool,
                     release: str = RELEASE) -> AsyncIterator[Stack]:
    """Start the fake provider, calltap and Portkey `release`; stop them in reverse order."""
    port = free_port()
    log = LogLines()
    async with VariantProvider() as provider:
        config = Config(front=("127.0.0.1", 0), gateway=f"http://127.0.0.1:{port}",
                        back=("127.0.0.1", 0), provider=provider.url, admin=("127.0.0.1", 0),
                        recordings=directory / "recordings", compare_workers=1)
        async with Calltap(config, log_stream=log) as tap:
            portkey = await start_portkey(directory, port, release)
            STARTS[f"{name} ({release})"] = portkey.started_in
            client = openai.AsyncOpenAI(base_url=f"{tap.front_url}/v1", api_key=API_KEY,
                                        max_retries=0, timeout=30.0)
            try:
                yield Stack(provider, tap, portkey, log, client, forward)
            finally:
                await client.close()
                stop_portkey(portkey)


def parsed(body: bytes) -> list[Any]:
    """The JSON payloads of an SSE body's `data:` lines (`[DONE]` as the string)."""
    payloads: list[Any] = []
    for line in body.splitlines():
        if line.startswith(b"data: "):
            data = line[len(b"data: "):]
            payloads.append(data.decode() if data == b"[DONE]" else orjson.loads(data))
    return payloads
