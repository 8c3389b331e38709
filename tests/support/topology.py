"""The one scripted topology of the proxy and reliability suites, in process on loopback:

    client -> calltap front -> scripted gateway -> calltap back -> scripted provider

The gateway is a plain aiohttp forwarder whose forwarding a test scripts (which headers go on, a
retry of the first attempt, a cut, a byte rewrite, a pause before each request). The demo and the
end-to-end suite build the same topology with the fake provider and the defect-injecting gateway
(`calltap.demo.loopback`); the reliability suite's load tests run `calltap serve` as a
subprocess instead (`tests/reliability/harness.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from tests.support.logs import LogLines
from tests.support.provider import ScriptedProvider

from calltap.config import Config
from calltap.fakes.server import LoopbackServer
from calltap.proxy.app import Calltap
from calltap.proxy.capture import Opener
from calltap.proxy.logs import make_logger
from calltap.proxy.relay import HOP_BY_HOP

LOOPBACK = ("127.0.0.1", 0)


@dataclass
class GatewayScript:
    """How the gateway forwards: `header` (everything), `traceparent` (only that), `strip` (no
    identifying header), plus an optional retry of the first attempt."""

    target: str = ""
    mode: str = "header"
    retry_first: bool = False
    cut_after: int | None = None
    """End the client's response cleanly after this many bytes (a truncating gateway)."""
    replace: tuple[bytes, bytes] | None = None
    """Replace these bytes in each chunk it relays (a gateway that rewrites what it forwards)."""
    hold: asyncio.Event | None = None
    """Wait for this event before forwarding each request."""
    calls: int = 0
    arrived: list[str] = field(default_factory=list)
    """Request ids in the order they reached the gateway."""


class ScriptedGateway(LoopbackServer):
    """Forwards every request to `script.target` as scripted."""

    handler_cancellation = True

    def __init__(self, script: GatewayScript | None = None) -> None:
        super().__init__()
        self.script = script if script is not None else GatewayScript()
        self.session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.forward)
        return app

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(auto_decompress=False)
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self.session is not None:
            await self.session.close()

    async def forward(self, request: web.Request) -> web.StreamResponse:
        script, session = self.script, self.session
        assert session is not None
        script.arrived.append(request.headers.get("X-Request-ID", ""))
        if script.hold is not None:
            await script.hold.wait()
        body = await request.read()
        url = script.target + request.path_qs
        script.calls += 1
        headers = self._headers(request)
        if script.retry_first and script.calls == 1:
            first = await session.request(request.method, url, headers=headers, data=body)
            await first.content.readany()
            first.close()
        upstream = await session.request(request.method, url, headers=headers, data=body)
        async with upstream:
            return await self._relay(request, upstream)

    def _headers(self, request: web.Request) -> dict[str, str]:
        if self.script.mode == "header":
            return {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        if self.script.mode == "traceparent" and "traceparent" in request.headers:
            headers["traceparent"] = request.headers["traceparent"]
        return headers

    async def _relay(self, request: web.Request,
                     upstream: aiohttp.ClientResponse) -> web.StreamResponse:
        script = self.script
        out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
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


@dataclass
class Topology:
    tap: Calltap
    provider: ScriptedProvider
    gateway: ScriptedGateway
    log: LogLines


def tap_config(recordings: Path, **settings: Any) -> Config:
    """calltap on loopback ports the system picks, one comparison worker; `settings` override."""
    values: dict[str, Any] = {"admin": LOOPBACK, "recordings": recordings,
                              "compare_workers": 1, **settings}
    return Config(**values)


@asynccontextmanager
async def scripted_topology(recordings: Path, log: LogLines | None = None, *,
                            opener: Opener | None = None, stop_grace: float | None = 1.0,
                            **settings: Any) -> AsyncIterator[Topology]:
    """Start the scripted provider, the scripted gateway and calltap between them; calltap
    stops with `stop_grace` seconds for streams still in flight (None: the config's)."""
    log = log if log is not None else LogLines()
    async with AsyncExitStack() as stack:
        provider = await stack.enter_async_context(ScriptedProvider())
        gateway = await stack.enter_async_context(ScriptedGateway())
        config = tap_config(recordings, front=LOOPBACK, gateway=gateway.url, back=LOOPBACK,
                            provider=provider.url, **settings)
        tap = Calltap(config, logger=make_logger(log, "debug"), opener=opener)
        await tap.start()
        stack.push_async_callback(tap.stop, stop_grace)
        assert tap.back_url is not None
        gateway.script.target = tap.back_url
        yield Topology(tap, provider, gateway, log)
