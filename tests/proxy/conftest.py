"""The proxy tests' fixtures over `tests/support`: the scripted provider and gateway, each a
real server on 127.0.0.1, and calltap between them (`make_tap` for a calltap of a test's own
settings, `topology` for the whole chain)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.support.logs import LogLines
from tests.support.provider import ProviderScript, ScriptedProvider
from tests.support.streams import chat_request
from tests.support.streams import chat_stream as chat_stream
from tests.support.topology import GatewayScript, ScriptedGateway, scripted_topology, tap_config

from calltap.proxy.app import Calltap
from calltap.proxy.logs import make_logger


@pytest.fixture
async def provider() -> AsyncIterator[tuple[ProviderScript, str]]:
    async with ScriptedProvider() as server:
        yield server.script, server.url


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[GatewayScript, str]]:
    async with ScriptedGateway() as server:
        yield server.script, server.url


@pytest.fixture
def log() -> LogLines:
    return LogLines()


TapFactory = Callable[..., Awaitable[Calltap]]


@pytest.fixture
async def make_tap(tmp_path: Path, log: LogLines) -> AsyncIterator[TapFactory]:
    """Start a Calltap on loopback with ephemeral ports; stopped at teardown."""
    started: list[Calltap] = []

    async def factory(**overrides: Any) -> Calltap:
        opener = overrides.pop("opener", None)
        addons = overrides.pop("addons", None)
        tap = Calltap(tap_config(tmp_path / "rec", **overrides), logger=make_logger(log, "debug"),
                      opener=opener, addons=addons)
        await tap.start()
        started.append(tap)
        return tap

    yield factory
    for tap in started:
        await tap.stop(grace=1.0)


@pytest.fixture
async def topology(tmp_path: Path, log: LogLines) -> AsyncIterator[dict[str, Any]]:
    """client -> calltap front -> gateway -> calltap back -> provider."""
    async with scripted_topology(tmp_path / "rec", log) as opened:
        yield {"tap": opened.tap, "provider": opened.provider.script,
               "gateway": opened.gateway.script}


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
