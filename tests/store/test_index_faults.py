"""The index's writer path when things go wrong: serve killed between a pair's upload and its
segment, killed between a segment and the deletion of its sealed rows, the store down while
segments are due, and a local tree's serve killed with rows spooled. Every pair ends with exactly
one row, none is stored twice, and the traffic never notices."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from tests.reliability.harness import Served, launch, streaming_provider
from tests.store.index_checks import catalog_rows, segment_rows, walked_rows, without
from tests.store.replicas import Replica, replica, sha
from tests.support.s3 import S3Server
from tests.support.s3_faults import FaultyStore

from calltap.fakes import FakeGateway
from calltap.index import layout, tiers
from calltap.index.pending import CURRENT

BATCH = 6
FOREVER = 3600


class IndexDownStore(FaultyStore):
    """A store whose index prefix answers 503 while `index_down` (the pairs still go in)."""

    index_down = False

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        if self.index_down and f"/{layout.INDEX}/" in request.path:
            self.requests += 1
            return web.Response(status=503, text="SlowDown")
        return await super()._relay(request)


def through(store: FaultyStore, s3: S3Server, monkeypatch: pytest.MonkeyPatch
            ) -> tuple[str, str]:
    """Every store call of the processes started from here goes through `store`: a new bucket
    and its URL."""
    for name, value in {**s3.environ, "AWS_ENDPOINT_URL": store.url}.items():
        monkeypatch.setenv(name, value)
    bucket = s3.bucket()
    return bucket, f"s3://{bucket}/p"


async def until(predicate: Callable[[], Awaitable[bool] | bool], timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            result = predicate()
            if await result if isinstance(result, Awaitable) else result:
                return
            await asyncio.sleep(0.1)


async def send_batch(client: aiohttp.ClientSession, side: Replica, prefix: str,
                     sent: dict[str, bytes]) -> None:
    keys = [f"{prefix}-{i}" for i in range(BATCH)]
    for key, body in zip(keys, await asyncio.gather(*(side.send(client, k) for k in keys)),
                         strict=True):
        sent[key] = body


async def terminated(served: Served) -> None:
    """SIGTERM and the exit, without blocking this loop (it runs the store's relay)."""
    served.signal(signal.SIGTERM)
    assert await served.wait() == 0


def killed(served: Served) -> None:
    os.killpg(served.pid, signal.SIGKILL)
    served.process.wait()


def spooled_lines(spool: Path) -> list[bytes]:
    """The whole rows in a spool of rows (current and sealed files)."""
    directory = spool / layout.INDEX / "pending"
    return [line for path in sorted(directory.glob("*.jsonl"))
            for line in path.read_bytes().split(b"\n") if line.endswith(b"}")]


def index_objects(s3: S3Server, bucket: str, prefix: str) -> dict[str, bytes]:
    return s3.objects(bucket, f"{prefix}/{layout.INDEX}/")


def pairs_in(s3: S3Server, bucket: str, prefix: str) -> list[str]:
    return sorted(key.split("/")[2] for key in s3.objects(bucket, prefix + "/")
                  if key.endswith("/pair.json"))


async def every_pair_has_one_row(url: str, cache: Path, count: int) -> None:
    """The Catalog reads a row for every pair.json, equal to the one made from it; and the
    segments, each read on its own, hold each pair once."""
    expected = await asyncio.to_thread(walked_rows, url)
    read = await asyncio.to_thread(catalog_rows, url, cache)
    assert len(expected) == count and sorted(read) == sorted(expected)
    for key, row in read.items():
        assert without(row, "replica") == without(expected[key], "replica")
    stored = await asyncio.to_thread(segment_rows, url)
    assert sorted((row["day"], row["stored_as"]) for row in stored) == sorted(expected)


async def test_killed_between_upload_and_segment(s3: S3Server, store: FaultyStore,
                                                 workdir: Path) -> None:
    """Killed with pairs stored and their rows only spooled: restarted, it writes the rows; killed
    again after that segment but before deleting the sealed rows, the retry stores nothing new."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/p"
    settings = {"replica": "solo", "index_interval": FOREVER}
    sent: dict[str, bytes] = {}
    async with streaming_provider() as provider:
        async with replica(workdir, "a", provider, url, **settings) as side, \
                aiohttp.ClientSession() as client:
            await send_batch(client, side, "first", sent)
            await side.settled(client, BATCH)
            await until(lambda: len(spooled_lines(side.spool)) == BATCH)
            killed(side.calltap)
        assert pairs_in(s3, bucket, "p") == sorted(sent)
        assert index_objects(s3, bucket, "p") == {}
        pending = side.spool / layout.INDEX / "pending"
        rows = (pending / CURRENT).read_bytes()

        async with replica(workdir, "a", provider, url, **settings) as side:
            await until(lambda: index_objects(s3, bucket, "p") != {})
            assert not list(pending.glob("*.jsonl"))
            await terminated(side.calltap)
        written = index_objects(s3, bucket, "p")
        await every_pair_has_one_row(url, workdir / "cache", BATCH)

        (key,) = written
        segment = layout.parse(key.removeprefix("p/"))
        assert segment is not None and segment.replica == "solo"
        (pending / f"sealed-{segment.sealed_ms:013d}-{segment.tag}.jsonl").write_bytes(rows)
        async with replica(workdir, "a", provider, url, **settings) as side:
            await until(lambda: not list(pending.glob("*.jsonl")))
            await terminated(side.calltap)
    assert index_objects(s3, bucket, "p") == written
    assert len(await asyncio.to_thread(segment_rows, url)) == BATCH
    await every_pair_has_one_row(url, workdir / "cache-2", BATCH)


async def test_store_down_while_segments_are_due(s3: S3Server, workdir: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The index prefix refusing, then the whole store gone: rows stay spooled, one
    `index.unavailable` line a minute, the traffic byte-identical; back again, every pair gets
    one row."""
    async with IndexDownStore(s3.url) as store:
        bucket, url = through(store, s3, monkeypatch)
        sent: dict[str, bytes] = {}
        async with streaming_provider() as provider, \
                replica(workdir, "a", provider, url, replica="r1", index_interval=1) as side, \
                aiohttp.ClientSession() as client:
            store.index_down = True
            await send_batch(client, side, "refused", sent)
            await side.settled(client, BATCH)

            async def retried(times: int) -> bool:
                metrics = await side.calltap.metrics(client)
                return metrics.get('calltap_index_segments_total{result="retried"}', 0) >= times
            await until(lambda: retried(2))
            assert len(spooled_lines(side.spool)) == BATCH
            await send_batch(client, side, "more", sent)
            await side.settled(client, 2 * BATCH)
            await until(lambda: len(spooled_lines(side.spool)) == 2 * BATCH)
            await until(lambda: retried(4))

            await store.stop()
            await send_batch(client, side, "gone", sent)
            await side.calltap.wait_compared(client, 3 * BATCH)
            await until(lambda: len(side.spooled()) == BATCH)
            assert index_objects(s3, bucket, "p") == {}

            store.index_down = False
            await store.start()
            await side.settled(client, 3 * BATCH)
            await until(lambda: not list(side.spool.glob("_index/pending/*.jsonl")))
            unavailable = [datetime.fromisoformat(line["timestamp"])
                           for line in side.calltap.lines("index.unavailable")]
            assert unavailable and all(later - earlier >= timedelta(seconds=59)
                                       for earlier, later in pairwise(unavailable))
            assert await retried(len(unavailable) + 3)
            await terminated(side.calltap)
            provider_sent = {key: fact.sha256 for key, fact in provider.sent.items()}
        assert {key: sha(body) for key, body in sent.items()} == provider_sent
        assert pairs_in(s3, bucket, "p") == sorted(sent)
        await every_pair_has_one_row(url, workdir / "cache", 3 * BATCH)


async def test_a_local_tree_killed_with_rows_spooled(workdir: Path) -> None:
    """A tree gets segments of its own; killed with rows in current.jsonl (the last one torn),
    its Catalog still shows every pair, and a restart puts the spooled rows in segments."""
    recordings = workdir / "recordings"
    sent: dict[str, bytes] = {}
    async with streaming_provider() as provider, FakeGateway() as gateway, \
            aiohttp.ClientSession() as client:

        async def start(interval: float) -> Replica:
            served = await launch(workdir, recordings, gateway=gateway.url, provider=provider.url,
                                  settings={"replica": "tree", "index_interval": interval})
            gateway.upstream = served.urls["back"]
            return Replica(gateway, served, recordings)

        side = await start(1)
        try:
            await send_batch(client, side, "early", sent)
            await side.calltap.wait_compared(client, BATCH)
            await until(lambda: len(segment_rows(recordings)) == BATCH)
            await terminated(side.calltap)
            side = await start(FOREVER)
            await send_batch(client, side, "late", sent)
            await side.calltap.wait_compared(client, BATCH)
            await until(lambda: len(spooled_lines(recordings)) == BATCH)
            killed(side.calltap)
        finally:
            side.calltap.end()
        current = recordings / layout.INDEX / "pending" / CURRENT
        lines = current.read_bytes()
        current.write_bytes(lines[:-20])  # the last row torn, as a kill mid-write leaves it
        assert segment_rows(recordings) and len(spooled_lines(recordings)) == BATCH - 1

        walked = walked_rows(recordings)
        assert len(walked) == 2 * BATCH
        read = catalog_rows(recordings, workdir / "cache", fill_gaps=True)
        assert sorted(read) == sorted(walked)
        gaps = [key for key, row in read.items() if row["replica"] != "tree"]
        assert len(gaps) == 1 and read[gaps[0]]["replica"] == ""
        for key, row in read.items():
            assert without(row, "replica") == without(walked[key], "replica")

        side = await start(FOREVER)
        try:
            await until(lambda: len(segment_rows(recordings)) == 2 * BATCH - 1)
            assert not list(current.parent.glob("*.jsonl"))
            await terminated(side.calltap)
        finally:
            side.calltap.end()
    assert sorted((row["day"], row["stored_as"]) for row in segment_rows(recordings)) == sorted(
        key for key in walked if key != gaps[0])
    rebuild = subprocess.run([sys.executable, "-m", "calltap", "index", "rebuild",
                              str(recordings)], capture_output=True, text=True, timeout=120)
    assert rebuild.returncode == 0, rebuild.stderr
    assert sorted((row["day"], row["stored_as"]) for row in segment_rows(recordings)) == sorted(
        walked)
    assert catalog_rows(recordings, workdir / "cache-2") == read


async def test_a_local_tree_stopped_mid_stream_writes_every_row(workdir: Path) -> None:
    """SIGTERM while streams are relayed: they finish within the grace, are compared on the way
    out, and their rows are in segments before the process exits."""
    recordings = workdir / "recordings"
    async with streaming_provider(delay=0.05) as provider, FakeGateway() as gateway, \
            aiohttp.ClientSession() as client:
        served = await launch(workdir, recordings, gateway=gateway.url, provider=provider.url,
                              settings={"replica": "tree", "index_interval": FOREVER})
        gateway.upstream = served.urls["back"]
        side = Replica(gateway, served, recordings)
        try:
            sends = [asyncio.create_task(side.send(client, f"late-{i}")) for i in range(BATCH)]
            await until(lambda: provider.open_streams == BATCH)
            await terminated(served)
            bodies = await asyncio.gather(*sends)
        finally:
            served.end()
    assert all(bodies)
    assert len(list(recordings.glob("*/*/pair.json"))) == BATCH
    assert not served.lines("capture.failed")
    assert not list((recordings / layout.INDEX / "pending").glob("*.jsonl"))
    assert sorted(row["stored_as"] for row in segment_rows(recordings)) == sorted(
        f"late-{i}" for i in range(BATCH))


class IndexUndeletableStore(FaultyStore):
    """A store whose policy allows no deletion under the index (an IAM policy without
    s3:DeleteObject there): a replica's merges are stored, their inputs stay. S3 answers a
    DeleteObjects call so: 200, and an AccessDenied error for each key."""

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        if request.method == "POST" and "delete" in request.query:
            body = await request.read()
            keys = re.findall(rb"<Key>([^<]*)</Key>", body)
            if any(f"/{layout.INDEX}/".encode() in key for key in keys):
                self.requests += 1
                errors = b"".join(b"<Error><Key>" + key + b"</Key><Code>AccessDenied</Code>"
                                  b"<Message>Access Denied</Message></Error>" for key in keys)
                return web.Response(status=200, content_type="application/xml", body=(
                    b'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns='
                    b'"http://s3.amazonaws.com/doc/2006-03-01/">' + errors + b"</DeleteResult>"))
            return await super()._relay(request)
        return await super()._relay(request)


@pytest.mark.parametrize("deletes", ["allowed", "refused"])
async def test_a_replica_merges_its_own_segments_or_says_why_not(
        s3: S3Server, workdir: Path, monkeypatch: pytest.MonkeyPatch, deletes: str) -> None:
    """`serve` merges its own segments as it goes: five segments sealed become a merge of the
    first four and the fifth, each pair in one of them. A store that refuses the deletions:
    one `index.merge_failed` line (not one a round), counted, and every pair still read once
    from segments that now hold some rows twice. The traffic is byte-identical either way."""
    store_class = IndexUndeletableStore if deletes == "refused" else FaultyStore
    async with store_class(s3.url) as store:
        bucket, url = through(store, s3, monkeypatch)
        sent: dict[str, bytes] = {}
        async with streaming_provider() as provider, \
                replica(workdir, "a", provider, url, replica="r1", index_interval=1) as side, \
                aiohttp.ClientSession() as client:

            async def counted(result: str) -> float:
                metrics = await side.calltap.metrics(client)
                return metrics.get(f'calltap_index_segments_total{{result="{result}"}}', 0)

            for number in range(tiers.FAN_IN + 1):
                await send_batch(client, side, f"b{number}", sent)
                await side.settled(client, (number + 1) * BATCH)
                await until(lambda n=number: _at_least(counted("stored"), n + 1))
            if deletes == "refused":
                await until(lambda: _at_least(counted("merge_failed"), 2))
                assert len(side.calltap.lines("index.merge_failed")) == 1
                assert await counted("merged") == 0
            else:
                await until(lambda: _at_least(counted("merged"), 1))
                assert await counted("merge_failed") == 0
                assert len(index_objects(s3, bucket, "p")) == 2
            await terminated(side.calltap)
            provider_sent = {key: fact.sha256 for key, fact in provider.sent.items()}
        assert {key: sha(body) for key, body in sent.items()} == provider_sent
        if deletes == "allowed":
            await every_pair_has_one_row(url, workdir / "cache", len(sent))
            return
        expected = await asyncio.to_thread(walked_rows, url)
        read = await asyncio.to_thread(catalog_rows, url, workdir / "cache")
        assert len(expected) == len(sent) and sorted(read) == sorted(expected)
        stored = await asyncio.to_thread(segment_rows, url)
        assert len(stored) > len(expected)


async def _at_least(value: Awaitable[float], least: float) -> bool:
    return await value >= least
