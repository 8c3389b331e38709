"""A real Arize Phoenix (`phoenix serve` from .venv-phoenix) as calltap's OTLP/HTTP receiver, and
calltap between the openai SDK and the fake gateway, for the Phoenix suite.

client (openai SDK, sending a traceparent) -> calltap front -> FakeGateway -> calltap back ->
FakeProvider, with calltap exporting each pair's span to Phoenix, read back through Phoenix's
REST API. Phoenix keeps its database in a directory of the test's, listens on loopback ports
picked for it, and sends nothing anywhere (its telemetry off).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import openai
from tests.support.gateways import GatewayProcess, start_gateway, stop_gateway
from tests.support.logs import LogLines

from calltap.demo import loopback
from calltap.fakes import DEFECT_HEADER, FakeProvider
from calltap.otel.settings import read_otel
from calltap.proxy.app import Calltap

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-phoenix"
STAMP = VENV / ".installed"
"""Written by `make phoenix` once the venv is complete; the suite runs only when it exists."""
PHOENIX = VENV / "bin" / "phoenix"
READY_TIMEOUT = 120.0
"""Phoenix migrates its SQLite database and builds its app on start: about 20 s on 2 cores."""
PROJECT = "default"
"""Where Phoenix files spans whose resource names no project."""
MODEL = "gpt-4o-mini"
QUESTION = [{"role": "user", "content": "What is the weather in Taipei, and the time in UTC?"}]
TOOLS = [
    {"type": "function", "function": {
        "name": name, "description": f"{name} lookup",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}
    for name in ("weather", "clock")
]
STARTS: dict[str, float] = {}
"""Seconds each Phoenix took to answer ready, for the terminal summary."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def start_phoenix(directory: Path) -> GatewayProcess:
    """`phoenix serve` on free loopback ports, its working directory under `directory`."""
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(directory / "phoenix"),
           "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_TELEMETRY_ENABLED": "false",
           "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false"}
    for name in [name for name in env if name.startswith("OTEL_")]:
        del env[name]
    phoenix = await start_gateway("phoenix", [str(PHOENIX), "serve"], port=port,
                                  log=directory / "phoenix.log", env=env, cwd=directory,
                                  ready_path="/healthz", timeout=READY_TIMEOUT)
    STARTS[f"phoenix {len(STARTS) + 1}"] = phoenix.started_in
    return phoenix


@dataclass
class Stack:
    phoenix: GatewayProcess
    calltap: Calltap
    sdk: openai.AsyncOpenAI
    log: LogLines


@asynccontextmanager
async def open_stack(phoenix: GatewayProcess, recordings: Path,
                     **otel: Any) -> AsyncIterator[Stack]:
    """calltap exporting to `phoenix`, on the loopback topology, and an openai SDK client."""
    log = LogLines()
    settings = read_otel({"endpoint": phoenix.url, **otel}, {})
    async with (loopback(FakeProvider(), recordings, log, compare_workers=1,
                         otel=settings) as (_gateway, calltap),
                openai.AsyncOpenAI(base_url=f"{calltap.front_url}/v1", api_key="sk-phoenix-test",
                                   max_retries=0) as sdk):
        yield Stack(phoenix, calltap, sdk, log)


async def chat(stack: Stack, traceparent: str, defect: str | None = None) -> tuple[str, Any]:
    """One streamed chat through calltap with the openai SDK, sending `traceparent` (and the
    fake gateway's defect header); the request id and the SDK's accumulated completion."""
    headers = {"traceparent": traceparent}
    if defect is not None:
        headers[DEFECT_HEADER] = defect
    raw = await stack.sdk.chat.completions.with_raw_response.create(
        model=MODEL, messages=QUESTION, tools=TOOLS, stream=True,
        stream_options={"include_usage": True}, extra_headers=headers)
    chunks = [chunk async for chunk in raw.parse()]
    request_id = raw.headers["x-request-id"]
    await stack.calltap.wait_compared(request_id)
    return request_id, chunks


async def spans_of(phoenix_url: str, trace_id: str, count: int = 1,
                   timeout: float = 30.0) -> list[dict[str, Any]]:
    """The spans Phoenix holds for `trace_id`, once it holds `count` of them (Phoenix inserts
    what it receives in batches)."""
    deadline = time.monotonic() + timeout
    url = f"{phoenix_url}/v1/projects/{PROJECT}/spans"
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(url, params={"limit": "1000"}) as response:
                found = [span for span in (await response.json()).get("data", [])
                         if span["context"]["trace_id"] == trace_id]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.5)


__all__ = ["STAMP", "Stack", "chat", "open_stack", "spans_of", "start_phoenix", "stop_gateway"]
