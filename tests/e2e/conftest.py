"""The whole topology on loopback: client -> calltap front -> fake gateway -> calltap back ->
fake provider, with calltap's JSON log captured in memory and its recordings in a tmp dir."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from tests.support.logs import LogLines

from calltap.demo import loopback
from calltap.fakes import DEFECT_HEADER, FAITHFUL, Defect, FakeGateway, FakeProvider
from calltap.fakes.provider import CHAT_PATH
from calltap.proxy.app import Calltap

PLANTED_SECRET = "sk-e2e-planted-secret-4f1c"


@dataclass
class Sent:
    """One request through the topology: what the client got and what calltap wrote."""

    request_id: str
    status: int
    headers: dict[str, str]
    body: bytes
    pair: dict[str, Any]
    directory: Path

    def file(self, name: str) -> bytes:
        return (self.directory / name).read_bytes()


@dataclass
class Topology:
    provider: FakeProvider
    gateway: FakeGateway
    calltap: Calltap
    client: aiohttp.ClientSession
    log: LogLines
    secret: str = PLANTED_SECRET
    """Sent as the client's Authorization on every request: it must never reach a file."""

    async def send(
        self, request: dict[str, Any], defect: Defect = FAITHFUL, request_id: str | None = None,
        query: str = "",
    ) -> Sent:
        """POST a chat request (with `query` after the path) through calltap's front and wait
        for its pair.json."""
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {PLANTED_SECRET}"}
        if defect is not FAITHFUL:
            headers[DEFECT_HEADER] = defect.name
        if request_id is not None:
            headers["X-Request-ID"] = request_id
        url = f"{self.calltap.front_url}{CHAT_PATH}" + (f"?{query}" if query else "")
        async with self.client.post(url, data=orjson.dumps(request), headers=headers) as reply:
            body = await reply.read()
            key = reply.headers["X-Request-ID"]
            status, reply_headers = reply.status, dict(reply.headers)
        pair = await self.calltap.wait_compared(key)
        (directory,) = self.calltap.recordings.glob(f"*/{key}")
        return Sent(key, status, reply_headers, body, pair, directory)


@asynccontextmanager
async def open_topology(recordings: Path, **provider_options: Any) -> AsyncIterator[Topology]:
    """Start the fake provider (with `provider_options`), the fake gateway and calltap."""
    log = LogLines()
    provider = FakeProvider(**provider_options)
    async with (
        loopback(provider, recordings, log, compare_workers=1) as (gateway, calltap),
        aiohttp.ClientSession(auto_decompress=False) as client,
    ):
        yield Topology(provider, gateway, calltap, client, log)


@pytest.fixture
async def topology(tmp_path: Path) -> AsyncIterator[Topology]:
    async with open_topology(tmp_path / "recordings") as opened:
        yield opened


@pytest.fixture
def make_topology(tmp_path: Path) -> Callable[..., AbstractAsyncContextManager[Topology]]:
    """`async with make_topology(events_delay=0.02) as topology:` for a differently paced
    provider."""
    return lambda **provider_options: open_topology(tmp_path / "recordings", **provider_options)
