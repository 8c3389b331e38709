"""Loopback servers for the proxy tests: a scripted streaming provider and a plain aiohttp
"gateway" that forwards to calltap's back listener, each a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from tests.support.logs import LogLines

from calltap.config import Config
from calltap.proxy.app import Calltap
from calltap.proxy.logs import make_logger

HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "host",
    "te",
    "upgrade",
    "trailer",
    "proxy-connection",
}


def chat_stream(text: str = "Hello there", tool_calls: int = 2, marker: str = "a") -> bytes:
    """A deterministic OpenAI chat stream: some text, `tool_calls` parallel calls in fragments,
    finish reason, usage, [DONE]."""
    base = {
        "id": f"chatcmpl-{marker}",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
    }

    def event(choices: list[Any], **extra: Any) -> bytes:
        return b"data: " + orjson.dumps({**base, "choices": choices, **extra}) + b"\n\n"

    out = [event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    for word in text.split(" "):
        out.append(event([{"index": 0, "delta": {"content": word + " "}}]))
    for index in range(tool_calls):
        out.append(
            event(
                [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": f"call_{marker}{index}",
                                    "type": "function",
                                    "function": {"name": f"tool_{index}", "arguments": ""},
                                }
                            ]
                        },
                    }
                ]
            )
        )
        for fragment in ('{"city": ', f'"Paris{index}"', "}"):
            out.append(
                event(
                    [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": index, "function": {"arguments": fragment}}
                                ]
                            },
                        }
                    ]
                )
            )
    reason = "tool_calls" if tool_calls else "stop"
    out.append(event([{"index": 0, "delta": {}, "finish_reason": reason}]))
    out.append(event([], usage={"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def chat_request(content: str = "What is the weather?", stream: bool = True) -> bytes:
    return orjson.dumps(
        {
            "model": "gpt-test",
            "stream": stream,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": content},
            ],
            "tools": [
                {"type": "function", "function": {"name": f"tool_{i}", "parameters": {}}}
                for i in range(2)
            ],
        }
    )


@dataclass
class ProviderScript:
    """What the provider answers; tests change it between requests."""

    body: bytes = field(default_factory=chat_stream)
    content_type: str = "text/event-stream"
    chunk_size: int = 97
    chunk_sizes: list[int] = field(default_factory=list)
    """Explicit sizes of the first chunks (then `chunk_size`), each flushed on its own."""
    delay: float = 0.0
    reset_after: int | None = None
    """Close the connection abruptly after this many body bytes."""
    hold_after: int | None = None
    """Stop sending after this many bytes and wait (until cancelled) instead of finishing;
    a request's `?hold=N` query does the same for that request alone."""
    status: int = 200
    content_length: bool = False
    seen: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    reply_with_request: bool = False
    """Answer with the request content's own text (so concurrent requests differ)."""


async def provider_handler(script: ProviderScript, request: web.Request) -> web.StreamResponse:
    raw = await request.read()
    entry = {
        "method": request.method,
        "path": request.path_qs,
        "headers": dict(request.headers),
        "body": raw,
    }
    script.seen.append(entry)
    if request.path == "/v1/models":
        return web.json_response({"object": "list", "data": [{"id": "gpt-test"}]})
    body = script.body
    if script.reply_with_request:
        content = orjson.loads(raw)["messages"][-1]["content"]
        body = chat_stream(content, marker=content.replace(" ", "-"))
    headers = {"Content-Type": script.content_type, "X-Provider": "fake"}
    if script.content_length:
        headers["Content-Length"] = str(len(body))
    response = web.StreamResponse(status=script.status, headers=headers)
    await response.prepare(request)
    sent = writes = 0
    hold_after = int(request.query.get("hold", -1)) if "hold" in request.query else None
    hold_after = script.hold_after if hold_after is None else hold_after
    try:
        while sent < len(body):
            if script.reset_after is not None and sent >= script.reset_after:
                assert request.transport is not None
                request.transport.abort()
                return response
            if hold_after is not None and sent >= hold_after:
                await asyncio.sleep(3600)
            size = script.chunk_sizes[writes] if writes < len(script.chunk_sizes) else None
            chunk = body[sent : sent + (size or script.chunk_size)]
            writes += 1
            await response.write(chunk)
            sent += len(chunk)
            if script.delay:
                await asyncio.sleep(script.delay)
        await response.write_eof()
    except (asyncio.CancelledError, ConnectionError):
        script.cancelled.append(request.path)
        raise
    return response


@dataclass
class GatewayScript:
    """How the in-test gateway forwards: `header` (everything), `traceparent` (only that),
    `strip` (no identifying header), plus an optional retry of the first attempt."""

    target: str = ""
    mode: str = "header"
    retry_first: bool = False
    cut_after: int | None = None
    """End the client's response cleanly after this many bytes (a truncating gateway)."""
    replace: tuple[bytes, bytes] | None = None
    """Replace these bytes in each chunk it relays (a gateway that rewrites what it forwards)."""
    calls: int = 0


async def gateway_handler(
    script: GatewayScript, session: aiohttp.ClientSession, request: web.Request
) -> web.StreamResponse:
    body = await request.read()
    if script.mode == "header":
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
    else:
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        if script.mode == "traceparent" and "traceparent" in request.headers:
            headers["traceparent"] = request.headers["traceparent"]
    url = script.target + request.path_qs
    script.calls += 1
    if script.retry_first and script.calls == 1:
        first = await session.request(request.method, url, headers=headers, data=body)
        await first.content.readany()
        first.close()
    upstream = await session.request(request.method, url, headers=headers, data=body)
    async with upstream:
        out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP}
        response = web.StreamResponse(status=upstream.status, headers=out_headers)
        await response.prepare(request)
        sent = 0
        try:
            async for chunk in upstream.content.iter_any():
                if script.replace is not None:
                    chunk = chunk.replace(*script.replace)
                if script.cut_after is not None and sent + len(chunk) > script.cut_after:
                    await response.write(chunk[: script.cut_after - sent])
                    break
                await response.write(chunk)
                sent += len(chunk)
        except aiohttp.ClientPayloadError:
            assert request.transport is not None
            request.transport.abort()
            return response
        await response.write_eof()
    return response


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


@pytest.fixture
async def provider() -> AsyncIterator[tuple[ProviderScript, str]]:
    script = ProviderScript()
    app = web.Application()

    async def handler(request: web.Request) -> web.StreamResponse:
        return await provider_handler(script, request)

    app.router.add_route("*", "/{tail:.*}", handler)
    runner, url = await serve(app)
    yield script, url
    await runner.cleanup()


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[GatewayScript, str]]:
    script = GatewayScript()
    session = aiohttp.ClientSession(auto_decompress=False)
    app = web.Application()

    async def handler(request: web.Request) -> web.StreamResponse:
        return await gateway_handler(script, session, request)

    app.router.add_route("*", "/{tail:.*}", handler)
    runner, url = await serve(app)
    yield script, url
    await runner.cleanup()
    await session.close()


@pytest.fixture
def log() -> LogLines:
    return LogLines()


TapFactory = Callable[..., Awaitable[Calltap]]


@pytest.fixture
async def make_tap(tmp_path: Path, log: LogLines) -> AsyncIterator[TapFactory]:
    """Start a Calltap on loopback with ephemeral ports; stopped at teardown."""
    started: list[Calltap] = []

    async def factory(**overrides: Any) -> Calltap:
        values: dict[str, Any] = {
            "admin": ("127.0.0.1", 0),
            "recordings": tmp_path / "rec",
            "compare_workers": 1,
            **overrides,
        }
        opener = values.pop("opener", None)
        addons = values.pop("addons", None)
        tap = Calltap(Config(**values), logger=make_logger(log, "debug"), opener=opener,
                      addons=addons)
        await tap.start()
        started.append(tap)
        return tap

    yield factory
    for tap in started:
        await tap.stop(grace=1.0)


@pytest.fixture
async def topology(
    provider: tuple[ProviderScript, str], gateway: tuple[GatewayScript, str], make_tap: TapFactory
) -> dict[str, Any]:
    """client -> calltap front -> gateway -> calltap back -> provider."""
    provider_script, provider_url = provider
    gateway_script, gateway_url = gateway
    tap = await make_tap(
        front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0), provider=provider_url
    )
    assert tap.back_url is not None
    gateway_script.target = tap.back_url
    return {"tap": tap, "provider": provider_script, "gateway": gateway_script}




async def post_chat(
    client: aiohttp.ClientSession,
    base: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    async with client.post(
        base + "/v1/chat/completions",
        data=body or chat_request(),
        headers={"Content-Type": "application/json", **(headers or {})},
    ) as r:
        return r.status, dict(r.headers), await r.read()
