"""The store failing under calltap: stopped mid-load, refusing writes, slow, missing, and calltap
killed with pairs in its spool. The traffic is byte-identical throughout, and no pair is lost or
stored twice."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
from tests.reliability.harness import streaming_provider
from tests.store.replicas import Replica, bucket_pairs, pair_json, replica, sha
from tests.support.s3 import S3Server
from tests.support.s3_faults import FaultyStore

BATCH = 8


async def send_batch(side: Replica, client: aiohttp.ClientSession, prefix: str,
                     sent: dict[str, bytes]) -> None:
    keys = [f"{prefix}-{i}" for i in range(BATCH)]
    for key, body in zip(keys, await asyncio.gather(*(side.send(client, k) for k in keys)),
                         strict=True):
        sent[key] = body


def assert_stored_once(s3: S3Server, bucket: str, sent: dict[str, bytes],
                       provider_sent: dict[str, str | None]) -> None:
    """Every request's pair in the bucket exactly once, its downstream body what the client got,
    and what the client got what the provider sent."""
    pairs = bucket_pairs(s3, bucket, "p")
    stored = {path.split("/")[1]: files for path, files in pairs.items()}
    assert sorted(stored) == sorted(sent)
    for key, body in sent.items():
        assert stored[key]["downstream.sse"] == body
        assert pair_json(stored[key])["comparison"]["verdict"] == "equal"
    assert {key: sha(body) for key, body in sent.items()} == provider_sent


async def wait_for(predicate, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.1)


async def test_store_stopped_mid_load_and_started_again(s3: S3Server, store: FaultyStore,
                                                        workdir: Path) -> None:
    bucket = s3.bucket()
    sent: dict[str, bytes] = {}
    async with streaming_provider() as provider, \
            replica(workdir, "a", provider, f"s3://{bucket}/p") as side, \
            aiohttp.ClientSession() as client:
        await send_batch(side, client, "before", sent)
        await store.stop()
        await send_batch(side, client, "during", sent)
        await side.calltap.wait_compared(client, 2 * BATCH)

        async def backlog_seen() -> bool:
            health = (await side.health(client))["store"]
            return health["reachable"] is False and health["backlog_pairs"] > 0
        await wait_for(backlog_seen)
        assert len(side.spooled()) >= 1
        await store.start()
        await send_batch(side, client, "after", sent)
        await side.settled(client, 3 * BATCH)
        assert not side.spooled()
        unavailable = side.calltap.lines("store.unavailable")
        assert len(unavailable) == 1 and "secret" not in repr(unavailable).lower()
        assert side.calltap.lines("store.recovered")
        provider_sent = {key: fact.sha256 for key, fact in provider.sent.items()}
    assert_stored_once(s3, bucket, sent, provider_sent)


async def test_killed_with_pairs_in_the_spool(s3: S3Server, store: FaultyStore,
                                              workdir: Path) -> None:
    bucket = s3.bucket()
    sent: dict[str, bytes] = {}
    async with streaming_provider() as provider:
        await store.stop()
        async with replica(workdir, "a", provider, f"s3://{bucket}/p") as side, \
                aiohttp.ClientSession() as client:
            await send_batch(side, client, "spooled", sent)
            await side.calltap.wait_compared(client, BATCH)
            assert len(side.spooled()) == BATCH
            os.killpg(side.calltap.pid, signal.SIGKILL)
            side.calltap.process.wait()
        await store.start()
        async with replica(workdir, "a", provider, f"s3://{bucket}/p") as side, \
                aiohttp.ClientSession() as client:
            await side.settled(client, 0)
            assert not side.spooled()
        provider_sent = {key: fact.sha256 for key, fact in provider.sent.items()}
    assert_stored_once(s3, bucket, sent, provider_sent)


async def test_store_refusing_writes_then_accepting(s3: S3Server, store: FaultyStore,
                                                    workdir: Path) -> None:
    bucket = s3.bucket()
    sent: dict[str, bytes] = {}
    async with streaming_provider() as provider, \
            replica(workdir, "a", provider, f"s3://{bucket}/p") as side, \
            aiohttp.ClientSession() as client:
        store.mode = "forbidden"
        await send_batch(side, client, "refused", sent)
        await side.calltap.wait_compared(client, BATCH)

        async def retried() -> bool:
            metrics = await side.calltap.metrics(client)
            return metrics.get('calltap_store_uploads_total{result="retried"}', 0) >= BATCH
        await wait_for(retried)
        assert len(side.spooled()) == BATCH
        store.mode = "pass"
        await side.settled(client, BATCH)
        provider_sent = {key: fact.sha256 for key, fact in provider.sent.items()}
    assert_stored_once(s3, bucket, sent, provider_sent)


async def test_slow_store_never_slows_the_relay(s3: S3Server, store: FaultyStore,
                                                workdir: Path) -> None:
    """Every store call takes 3 s; every request still completes in well under that."""
    bucket = s3.bucket()
    sent: dict[str, bytes] = {}
    async with streaming_provider() as provider, \
            replica(workdir, "a", provider, f"s3://{bucket}/p") as side, \
            aiohttp.ClientSession() as client:
        store.mode, store.delay = "slow", 3.0
        durations = []
        for i in range(BATCH):
            started = time.monotonic()
            sent[f"slow-{i}"] = await side.send(client, f"slow-{i}")
            durations.append(time.monotonic() - started)
        assert max(durations) < 1.0, durations
        health = (await side.health(client))["store"]
        assert health["backlog_pairs"] >= 1
        store.mode = "pass"
        await side.settled(client, BATCH)
        provider_sent = {key: fact.sha256 for key, fact in provider.sent.items()}
    assert_stored_once(s3, bucket, sent, provider_sent)


def test_missing_bucket_is_a_usage_error(s3: S3Server, workdir: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CALLTAP_"))},
           **s3.environ}
    result = subprocess.run(
        [sys.executable, "-m", "calltap", "serve", "--provider", "http://127.0.0.1:9",
         "--front", "off", "--back", "127.0.0.1:0", "--admin", "off",
         "--recordings", "s3://calltap-no-such-bucket/p", "--spool", str(workdir / "spool")],
        capture_output=True, text=True, env=env, cwd=workdir, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["calltap serve: recordings: s3://calltap-no-such-bucket/p: NoSuchBucket"]
    assert s3.environ["AWS_SECRET_ACCESS_KEY"] not in result.stderr + result.stdout
