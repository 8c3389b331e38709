"""The pair list's first byte on a big recordings tree: cold (the index built from nothing),
warm (the index up to date), and how long the index takes to catch up with a change.

Generates N pairs (default 100,000) spread over ten UTC days, each a directory with a pair.json
and a client request as the proxy writes them (no response bodies: the list never reads them),
serves `calltap view`'s application on loopback in this process, and times each request from
sending it to the first byte of the answer. Prints the figures; it is not a test.

With --bucket the tree is uploaded to a moto S3 server on loopback and the view follows the
bucket: cold (its local copy and index built from nothing: the first page, which waits for the
newest pairs only, and the time until every pair is listed), then warm, then after a restart.

usage: python bench/view_index.py [--pairs N] [--tree DIR] [--keep] [--bucket]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
from aiohttp import web

from calltap import recordings
from calltap.bucket_copy import BucketCopy
from calltap.storage import Storage
from calltap.view.server import ViewSettings, standalone
from calltap.view.state import REFRESH_INTERVAL

DAYS = 10
CODES = (("equal", []), ("diverged", ["TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED"]),
         ("equal", ["TOOL_CALL_IDS_REMAPPED"]), ("inconclusive", ["SSE_INCOMPLETE_EVENT"]))
WARM_RUNS = 10


def document(key: str, number: int, day: str) -> dict:
    verdict, codes = CODES[number % len(CODES)]
    started = f"{day}T{number % 24:02d}:{number % 60:02d}:{number % 59:02d}.{number % 1000:03d}Z"
    leg = {"method": "POST", "path": "/v1/chat/completions", "status": 200,
           "request_headers": {"authorization": "[redacted]"}, "response_headers": {},
           "started_at": started, "first_byte_at": started, "finished_at": started,
           "bytes": 2048 + number % 512, "ended": "complete", "file": "downstream.sse",
           "request_file": "downstream.request"}
    side = {"dialect": "openai.chat", "framing": "sse", "events": 11, "bytes": 2048,
            "choices": 1, "tool_calls": 2, "findings": []}
    return {"request_id": key, "pairing": "header", "attempts": 1,
            "legs": {"downstream": leg, "upstream": {**leg, "file": "upstream.sse"}},
            "comparison": {"verdict": verdict, "upstream": side, "downstream": side,
                           "findings": [{"code": code, "severity": "fatal", "side": "downstream",
                                         "choice": 0, "count": 1,
                                         "position": {"event": 6, "byte": 1180}}
                                        for code in codes]}}


def generate(root: Path, pairs: int, *, first: int = 0, day_index: int | None = None) -> None:
    for number in range(first, first + pairs):
        day = f"2026-11-{1 + (day_index if day_index is not None else number % DAYS):02d}"
        key = f"req-{number:08d}"
        directory = root / day / key
        directory.mkdir(parents=True, exist_ok=True)
        (directory / recordings.PAIR_JSON).write_bytes(
            recordings.encode_pair(document(key, number, day)))
        (directory / "downstream.request").write_bytes(b'{"model": "gpt-4o", "stream": true}')


async def first_byte(session: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with session.get(url) as response:
        await response.content.readany()
        elapsed = time.perf_counter() - started
        await response.read()
    assert response.status == 200, response.status
    return elapsed * 1000


@asynccontextmanager
async def serving(root: Path, index: Path,
                  bucket: BucketCopy | None = None) -> AsyncIterator[str]:
    """`calltap view`'s application on a loopback port; yields its base URL."""
    settings = ViewSettings(bucket.root if bucket else root, index_path=index, bucket=bucket)
    runner = web.AppRunner(standalone(settings), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


async def measure(root: Path, index: Path) -> dict[str, object]:
    figures: dict[str, object] = {}
    async with serving(root, index) as base, aiohttp.ClientSession() as session:
        cold = await first_byte(session, base + "/")
        figures["cold first byte (index built from nothing)"] = cold
        for name, path in (("warm list", "/"), ("warm, filtered by code",
                                                "/?code=TOOL_CALLS_DROPPED"),
                           ("warm, page 500", "/?page=500")):
            runs = []
            for _ in range(WARM_RUNS):
                await asyncio.sleep(REFRESH_INTERVAL)  # each request refreshes the index
                runs.append(await first_byte(session, base + path))
            figures[name] = runs
        await asyncio.sleep(REFRESH_INTERVAL)
        generate(root, 10, first=10_000_000, day_index=3)
        figures["first byte after 10 new pairs in one day"] = await first_byte(
            session, base + "/")
        shutil.rmtree(root / "2026-11-04" / "req-10000000")
        await asyncio.sleep(REFRESH_INTERVAL)
        figures["first byte after a pair was deleted"] = await first_byte(session, base + "/")
    for added in (root / "2026-11-04").glob("req-1000000?"):
        shutil.rmtree(added)
    return figures


async def upload_tree(root: Path, url: str) -> None:
    """Every file of the generated tree into the bucket, pair.json after the request body."""
    storage = Storage(url)
    semaphore = asyncio.Semaphore(32)

    async def put(path: Path) -> None:
        async with semaphore:
            await storage.put_new(str(path.relative_to(root)), path.read_bytes())
    for day in sorted(root.iterdir()):
        await asyncio.gather(*(put(p) for p in day.glob("*/downstream.request")))
        await asyncio.gather(*(put(p) for p in day.glob("*/pair.json")))


async def measure_bucket(url: str, copy: Path, index: Path) -> dict[str, object]:
    """The list page on the bucket: cold (the copy and the index built from nothing: the first
    page, then how long until every pair is listed), warm, and after a restart (copy and index
    on disk, the listing resumed after its cursor)."""
    figures: dict[str, object] = {}
    bucket = BucketCopy(url, copy)
    async with serving(copy, index, bucket) as base, aiohttp.ClientSession() as session:
        started = time.perf_counter()
        figures["cold first byte (newest page copied, indexed)"] = await first_byte(
            session, base + "/")
        while bucket.filling:
            await asyncio.sleep(REFRESH_INTERVAL)
            await first_byte(session, base + "/")
        await asyncio.sleep(REFRESH_INTERVAL)
        await first_byte(session, base + "/")
        figures["cold, until every pair is listed"] = (time.perf_counter() - started) * 1000
        runs = []
        for _ in range(WARM_RUNS):
            await asyncio.sleep(REFRESH_INTERVAL)
            runs.append(await first_byte(session, base + "/"))
        figures["warm list"] = runs
    async with serving(copy, index, BucketCopy(url, copy)) as base, \
            aiohttp.ClientSession() as session:
        figures["first byte after a restart"] = await first_byte(session, base + "/")
    return figures


def show(figures: dict[str, object]) -> None:
    for name, value in figures.items():
        if isinstance(value, list):
            print(f"{name:48s} median {statistics.median(value):7.1f} ms   "
                  f"min {min(value):6.1f}  max {max(value):6.1f}  ({len(value)} runs)")
        else:
            print(f"{name:48s} {value:7.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--tree", type=Path, help="generate here (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the generated tree")
    parser.add_argument("--bucket", action="store_true",
                        help="upload the tree to a moto S3 server on loopback and view the bucket")
    args = parser.parse_args()
    work = args.tree or Path(tempfile.mkdtemp(prefix="calltap-view-bench-"))
    root = work / "recordings"
    try:
        if not root.exists():
            started = time.perf_counter()
            generate(root, args.pairs)
            print(f"generated {args.pairs} pairs in {time.perf_counter() - started:.1f} s",
                  file=sys.stderr)
        index = work / "index.sqlite"
        index.unlink(missing_ok=True)
        if args.bucket:
            view_bucket(work, root, index, args.pairs)
            return 0
        print(f"calltap view on {args.pairs} pairs ({DAYS} days):")
        show(asyncio.run(measure(root, index)))
        restarted = asyncio.run(measure_restart(root, index))
        print(f"{'first byte after a restart (index on disk)':48s} {restarted:7.1f} ms")
    finally:
        if not args.keep and args.tree is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def view_bucket(work: Path, root: Path, index: Path, pairs: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.s3 import s3_server  # the suite's moto server, from the repo

    with s3_server(work) as s3:
        os.environ.update(s3.environ)
        url = f"s3://{s3.bucket()}/staging"
        started = time.perf_counter()
        asyncio.run(upload_tree(root, url))
        print(f"uploaded {pairs} pairs in {time.perf_counter() - started:.1f} s",
              file=sys.stderr)
        print(f"calltap view on {pairs} pairs in a bucket ({DAYS} days):")
        show(asyncio.run(measure_bucket(url, work / "copy", index)))


async def measure_restart(root: Path, index: Path) -> float:
    async with serving(root, index) as base, aiohttp.ClientSession() as session:
        return await first_byte(session, base + "/")


if __name__ == "__main__":
    sys.exit(main())
