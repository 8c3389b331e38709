"""A store that misbehaves on cue: an aiohttp relay in front of the moto server whose `mode`
says what each request gets. `pass` relays it; `forbidden` answers 403 AccessDenied to writes;
`slow` relays after `delay` seconds; `stop()` closes the listener (connection refused, as a store
that went away) and `start()` opens it again on the same port, with the objects kept (they live
in moto behind it).
"""

from __future__ import annotations

import asyncio
from typing import Literal

import aiohttp
from aiohttp import web
from tests.support.s3 import free_port

Mode = Literal["pass", "forbidden", "slow"]
FORBIDDEN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
             b"<Message>Access Denied</Message></Error>")
HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection"}


class FaultyStore:
    """`url` is the endpoint calltap is given; `target` the real server behind."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.mode: Mode = "pass"
        self.delay = 0.0
        self.requests = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FaultyStore:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        if self._session is not None:
            await self._session.close()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._relay)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        if self.mode == "forbidden" and request.method in ("PUT", "POST", "DELETE"):
            return web.Response(status=403, body=FORBIDDEN, content_type="application/xml")
        if self.mode == "slow":
            await asyncio.sleep(self.delay)
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with self._session.request(request.method, self.target + request.path_qs,
                                         headers=headers, data=await request.read()) as reply:
            body = await reply.read()
            out = {k: v for k, v in reply.headers.items() if k.lower() not in HOP_BY_HOP}
            return web.Response(status=reply.status, body=body, headers=out)
