"""Upload throughput to an S3-compatible bucket: how many finalized pairs a second calltap's
uploader stores, against one plain create-only PUT a pair of the same bytes in the same run.

Records `--pairs N` real pairs (the demo's faithful tool-call stream, through calltap's fake
gateway and provider), leaves them in a spool as a killed calltap would, starts a moto S3 server on
loopback and `calltap serve` on that spool and bucket, and times the spool's backlog from N to 0
(every pair's claim, bodies and pair.json stored, the spool copy deleted). The baseline PUTs the
same pairs' bytes as one object each with obstore, 4 at a time (the uploader's concurrency), so the
ratio says what the claim, the per-file objects and the bookkeeping cost. Prints figures; not a
test.

usage: python bench/store_upload.py [--pairs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reliability.harness import chat_body, launch, streaming_provider  # noqa: E402
from tests.support.s3 import s3_server  # noqa: E402

from calltap.fakes import DEFECT_HEADER, FakeGateway  # noqa: E402
from calltap.storage import Storage  # noqa: E402

CHAT = "/v1/chat/completions"


async def record(workdir: Path, spool: Path, pairs: int, **settings: object) -> None:
    """`pairs` finalized pairs in `spool` (recorded by a calltap on a local tree); one in a
    hundred through a gateway that strips `[DONE]`."""
    async with streaming_provider() as provider, FakeGateway() as gateway, \
            aiohttp.ClientSession() as client:
        calltap = await launch(workdir, spool, gateway=gateway.url, provider=provider.url,
                               settings=settings)
        gateway.upstream = calltap.urls["back"]
        try:
            semaphore = asyncio.Semaphore(16)

            async def one(i: int) -> None:
                async with semaphore, client.post(
                        calltap.urls["front"] + CHAT, data=chat_body(f"q{i}", 200),
                        headers={"X-Request-ID": f"bench-{i:06d}",
                                 "Content-Type": "application/json",
                                 **({DEFECT_HEADER: "strip-done"} if i % 100 == 99 else {})},
                ) as reply:
                    await reply.read()
            await asyncio.gather(*(one(i) for i in range(pairs)))
            await calltap.wait_compared(client, pairs, timeout=600)
        finally:
            calltap.end()


async def baseline(spool: Path, bucket_url: str) -> float:
    """Seconds to PUT each pair's bytes as one object, four at a time."""
    storage = Storage(bucket_url)
    blobs = [b"".join(p.read_bytes() for p in sorted(d.iterdir()))
             for d in sorted(spool.glob("*/*"))]
    semaphore = asyncio.Semaphore(4)

    async def put(i: int, data: bytes) -> None:
        async with semaphore:
            await storage.put_new(f"baseline/{i}", data)
    started = time.monotonic()
    await asyncio.gather(*(put(i, data) for i, data in enumerate(blobs)))
    return time.monotonic() - started


async def upload(workdir: Path, spool: Path, bucket_url: str, pairs: int) -> float:
    """Seconds from calltap's start on a full spool to an empty backlog."""
    async with streaming_provider() as provider, aiohttp.ClientSession() as client:
        started = time.monotonic()
        calltap = await launch(workdir, bucket_url, gateway=None, provider=provider.url,  # type: ignore[arg-type]
                               settings={"spool": spool})
        try:
            while (await calltap.health(client))["store"]["backlog_pairs"] > 0:
                await asyncio.sleep(0.05)
            return time.monotonic() - started
        finally:
            calltap.end()


async def run(pairs: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="calltap-bench-store-"))
    try:
        spool = workdir / "spool"
        await record(workdir, spool, pairs)
        size = sum(p.stat().st_size for p in spool.rglob("*") if p.is_file())
        with s3_server(workdir) as s3:
            os.environ.update(s3.environ)
            bucket = s3.bucket()
            spare = workdir / "spare"
            shutil.copytree(spool, spare)
            plain = await baseline(spare, f"s3://{bucket}")
            took = await upload(workdir, spool, f"s3://{bucket}/pairs", pairs)
            stored = sum(1 for key in s3.objects(bucket, "pairs/") if key.endswith("pair.json"))
        print(f"pairs: {pairs} ({size / pairs / 1024:.1f} KiB each, {stored} stored)")
        print(f"calltap uploader: {took:.2f} s, {pairs / took:.0f} pairs/s (start included)")
        print(f"one PUT a pair:   {plain:.2f} s, {pairs / plain:.0f} pairs/s")
        print(f"ratio (uploader / plain PUTs, throughput): {plain / took:.2f}x")
        kept = workdir / "kept"
        await record(workdir, kept, pairs, keep="diverged")
        left = sum(p.stat().st_size for p in kept.rglob("*") if p.is_file())
        count = len(list(kept.glob("*/*/pair.json")))
        print(f"keep = diverged on the same traffic: {count} of {pairs} pairs kept,"
              f" {left / 1024:.0f} KiB of {size / 1024:.0f} KiB ({left / size:.1%})")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=500)
    asyncio.run(run(parser.parse_args().pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
