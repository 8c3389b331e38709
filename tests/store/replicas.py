"""What the object-store tests run: replicas of `client -> calltap front -> fake gateway ->
calltap back -> provider`, every calltap uploading to one bucket, and the bucket read back with
boto3 as pairs."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from tests.reliability.harness import Served, chat_body, launch
from tests.support.provider import ScriptedProvider
from tests.support.s3 import S3Server

from calltap.fakes import FakeGateway
from calltap.index import layout

CHAT = "/v1/chat/completions"


@dataclass
class Replica:
    gateway: FakeGateway
    calltap: Served
    spool: Path

    async def send(self, client: aiohttp.ClientSession, key: str, events: int = 20) -> bytes:
        async with client.post(self.calltap.urls["front"] + CHAT,
                               data=chat_body(f"question {key}", events),
                               headers={"X-Request-ID": key,
                                        "Content-Type": "application/json"}) as reply:
            assert reply.status == 200
            return await reply.read()

    async def health(self, client: aiohttp.ClientSession) -> dict[str, Any]:
        return await self.calltap.health(client)

    async def settled(self, client: aiohttp.ClientSession, compared: int,
                      timeout: float = 120.0) -> dict[str, Any]:
        """Wait until `compared` pairs are compared and the store's backlog is empty."""
        await self.calltap.wait_compared(client, compared, timeout)
        async with asyncio.timeout(timeout):
            while True:
                health = await self.health(client)
                if health["store"]["backlog_pairs"] == 0:
                    return health
                await asyncio.sleep(0.1)

    def spooled(self) -> list[Path]:
        return sorted(self.spool.glob("*/*/pair.json"))


@contextlib.asynccontextmanager
async def replica(workdir: Path, name: str, provider: ScriptedProvider, bucket_url: str,
                  **settings: Any) -> AsyncIterator[Replica]:
    spool = workdir / f"spool-{name}"
    async with FakeGateway() as gateway:
        calltap = await launch(workdir, bucket_url, gateway=gateway.url, provider=provider.url,
                               settings={"spool": spool, **settings})  # type: ignore[arg-type]
        gateway.upstream = calltap.urls["back"]
        try:
            yield Replica(gateway, calltap, spool)
        finally:
            await stopped(calltap)


async def stopped(calltap: Served) -> None:
    """SIGTERM and wait without blocking this loop: it runs the store's relay, which the last
    index segment goes through on the way out. SIGKILL after the harness's timeout."""
    if calltap.process.poll() is None:
        calltap.signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await calltap.wait()
    calltap.end()


def bucket_pairs(s3: S3Server, bucket: str, prefix: str) -> dict[str, dict[str, bytes]]:
    """The bucket's objects by pair (`<day>/<key>`), each a {file name: bytes}; the index of
    pairs beside them (`_index/`) is not a pair."""
    pairs: dict[str, dict[str, bytes]] = {}
    for key, data in s3.objects(bucket, prefix + "/").items():
        if key.startswith(f"{prefix}/{layout.INDEX}/"):
            continue
        day, stored, name = key.removeprefix(prefix + "/").split("/")
        pairs.setdefault(f"{day}/{stored}", {})[name] = data
    return pairs


def pair_json(files: dict[str, bytes]) -> dict[str, Any]:
    return orjson.loads(files["pair.json"])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
