"""keep = diverged: equal pairs are not kept (but for a deterministic sample), everything worth a
look is, in a local tree and in a bucket alike."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from tests.reliability.harness import chat_body, launch, streaming_provider
from tests.store.replicas import CHAT, bucket_pairs, pair_json, replica
from tests.support.s3 import S3Server
from tests.support.s3_faults import FaultyStore

from calltap.fakes import DEFECT_HEADER, FakeGateway
from calltap.proxy.keeping import sampled

EQUAL = 20
SAMPLE = 0.25


def test_the_sample_is_a_share_of_the_ids_and_the_same_everywhere() -> None:
    ids = [f"req-{i}" for i in range(4000)]
    kept = [i for i in ids if sampled(i, SAMPLE)]
    assert 0.22 < len(kept) / len(ids) < 0.28
    assert kept == [i for i in ids if sampled(i, SAMPLE)]
    assert not any(sampled(i, 0.0) for i in ids) and all(sampled(i, 1.0) for i in ids)


async def send(client: aiohttp.ClientSession, front: str, key: str,
               defect: str | None = None) -> None:
    headers = {"X-Request-ID": key, "Content-Type": "application/json"}
    if defect:
        headers[DEFECT_HEADER] = defect
    async with client.post(front + CHAT, data=chat_body(key, 10), headers=headers) as reply:
        assert reply.status == 200
        await reply.read()


async def test_keep_diverged_in_a_local_tree(workdir: Path) -> None:
    recordings = workdir / "recordings"
    async with streaming_provider() as provider, FakeGateway() as gateway, \
            aiohttp.ClientSession() as client:
        calltap = await launch(workdir, recordings, gateway=gateway.url, provider=provider.url,
                               settings={"keep": "diverged", "keep_equal_sample": SAMPLE})
        gateway.upstream = calltap.urls["back"]
        try:
            keys = [f"equal-{i}" for i in range(EQUAL)]
            await asyncio.gather(*(send(client, calltap.urls["front"], k) for k in keys))
            await send(client, calltap.urls["front"], "broken", "strip-done")
            await calltap.wait_compared(client, EQUAL + 1)
            metrics = await calltap.metrics(client)
            await asyncio.sleep(0.5)
        finally:
            calltap.end()
    kept = sorted(path.parent.name for path in recordings.glob("*/*/pair.json"))
    expected = sorted([k for k in keys if sampled(k, SAMPLE)] + ["broken"])
    assert kept == expected
    assert sorted(path.name for path in recordings.glob("[0-9]*/*")) == expected
    assert metrics["calltap_pairs_discarded_total"] == EQUAL - len(expected) + 1


async def test_keep_diverged_in_a_bucket(s3: S3Server, store: FaultyStore,
                                         workdir: Path) -> None:
    bucket = s3.bucket()
    async with streaming_provider() as provider, \
            replica(workdir, "a", provider, f"s3://{bucket}/p", keep="diverged",
                    keep_equal_sample=0) as side, aiohttp.ClientSession() as client:
        front = side.calltap.urls["front"]
        await asyncio.gather(*(send(client, front, f"equal-{i}") for i in range(EQUAL)))
        await send(client, front, "broken", "null-finish-reason")
        await send(client, front, "no-done", "strip-done")
        await side.settled(client, EQUAL + 2)
        await asyncio.sleep(0.5)
        assert not list(side.spool.glob("[0-9]*/*"))
    pairs = bucket_pairs(s3, bucket, "p")
    assert sorted(path.split("/")[1] for path in pairs) == ["broken", "no-done"]
    assert pair_json(pairs[next(p for p in pairs if p.endswith("/no-done"))])[
        "comparison"]["verdict"] == "diverged"
