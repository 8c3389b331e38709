"""Two `calltap serve` replicas write one bucket under load, each its own index segments beside
the pairs; after SIGTERM the index holds exactly the rows a walk of every pair.json makes, each
pair once, and DuckDB (the Catalog) and ClickHouse (chDB, through its s3 table function) read the
same answers from it."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import aiohttp
import chdb
import orjson
import pytest
from tests.reliability.harness import chat_body, streaming_provider
from tests.store.index_checks import catalog_rows, segments, walked_rows, without
from tests.store.replicas import CHAT, Replica, replica
from tests.support.s3 import ACCESS_KEY, SECRET_KEY, S3Server
from tests.support.s3_faults import FaultyStore

from calltap.fakes import DEFECT_HEADER
from calltap.index.catalog import Catalog

INTERVAL = 1.0
WAVES = 3
PER_WAVE = 10
SHARED = 3
DEFECTS = ("strip-done", "null-finish-reason")
NAMES = {"a": "alpha", "b": "beta"}
ROUTE = "/v1/chat/completions"


def defect_of(key: str) -> str | None:
    """Every fourth request of a replica meets a broken gateway."""
    number = int(key.rsplit("-", 1)[1])
    return DEFECTS[number // 4 % 2] if number % 4 == 3 else None


async def send(side: Replica, client: aiohttp.ClientSession, key: str) -> bytes:
    headers = {"X-Request-ID": key, "Content-Type": "application/json"}
    defect = defect_of(key)
    if defect:
        headers[DEFECT_HEADER] = defect
    async with client.post(side.calltap.urls["front"] + CHAT, data=chat_body(key, 12),
                           headers=headers) as reply:
        assert reply.status == 200
        return await reply.read()


async def test_two_replicas_index_every_pair_once(s3: S3Server, store: FaultyStore,
                                                  workdir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3.bucket()
    url = f"s3://{bucket}/fleet"
    settings = {"index_interval": INTERVAL}
    sent: dict[str, str] = {}
    async with streaming_provider() as provider, \
            replica(workdir, "a", provider, url, replica=NAMES["a"], **settings) as a, \
            replica(workdir, "b", provider, url, replica=NAMES["b"], **settings) as b, \
            aiohttp.ClientSession() as client:
        started = time.monotonic()
        sides = {"a": a, "b": b}
        for wave in range(WAVES):
            keys = [(name, f"{name}-{wave * PER_WAVE + i}") for name in sides
                    for i in range(PER_WAVE)]
            if wave == WAVES - 1:
                keys += [(name, f"shared-{i}") for name in sides for i in range(SHARED)]
            await asyncio.gather(*(send(sides[name], client, key) for name, key in keys))
            sent.update({key: name for name, key in keys if not key.startswith("shared-")})
            if wave < WAVES - 1:
                await asyncio.sleep(INTERVAL)
        for side in sides.values():
            await side.settled(client, WAVES * PER_WAVE + SHARED)
        await asyncio.gather(*(terminated(side) for side in sides.values()))
    elapsed = time.monotonic() - started
    for side in (a, b):
        assert side.calltap.lines("serve.stopped")
        assert not list(side.spool.glob("_index/pending/*.jsonl")), "rows left unwritten"
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.url)  # the relay's loop no longer runs
    expected = walked_rows(url)
    assert len(expected) == 2 * (WAVES * PER_WAVE + SHARED)
    read = catalog_rows(url, workdir / "cache")
    assert sorted(read) == sorted(expected)
    for key, row in read.items():
        assert without(row, "replica") == without(expected[key], "replica"), key
        stored = key[1]
        if not stored.startswith("shared-"):
            assert row["replica"] == NAMES[sent[stored]]
    for i in range(SHARED):
        day = next(day for day, stored in read if stored == f"shared-{i}")
        pair = {read[(day, f"shared-{i}")]["replica"], read[(day, f"shared-{i}+2")]["replica"]}
        assert pair == set(NAMES.values())
    verdicts = Counter(row["verdict"] for row in read.values())
    assert verdicts["diverged"] >= 2 * WAVES * 2 and verdicts["equal"] >= 2 * WAVES * 6
    segments_are_each_replicas_own(url, read, elapsed)
    engines_agree(s3, bucket, "fleet", url, read, workdir)


async def terminated(side: Replica) -> None:
    """SIGTERM, and wait for the exit without blocking this loop (it runs the store's relay,
    which the last segment goes through)."""
    side.calltap.signal(signal.SIGTERM)
    assert await side.calltap.wait() == 0


def segments_are_each_replicas_own(url: str, read: dict[tuple[str, str], dict[str, Any]],
                                   elapsed: float) -> None:
    """Each segment names its writer and holds only its rows; a row is in one segment; a replica
    writes about one segment an interval a day (one more at the end, on SIGTERM)."""
    found = segments(url)
    assert sum(len(rows) for rows in found.values()) == len(read)
    by_writer: dict[tuple[str, str], list[int]] = {}
    for segment, rows in found.items():
        assert segment.replica in NAMES.values() and rows
        assert {row["replica"] for row in rows} == {segment.replica}
        assert {row["day"] for row in rows} == {segment.day}
        by_writer.setdefault((segment.replica, segment.day), []).append(segment.sealed_ms)
    assert {writer for writer, _ in by_writer} == set(NAMES.values())
    for sealed in by_writer.values():
        sealed.sort()
        assert len(sealed) <= elapsed / INTERVAL + 2
        gaps = [later - earlier for earlier, later in pairwise(sealed)]
        assert all(gap >= 0.9 * INTERVAL * 1000 for gap in gaps[:-1]), gaps


def engines_agree(s3: S3Server, bucket: str, prefix: str, url: str,
                  read: dict[tuple[str, str], dict[str, Any]], workdir: Path) -> None:
    """chDB reads the bucket's segments through the S3 API and answers the three questions as the
    walk of pair.json does; DuckDB over the Catalog gives chDB's answer to one of them."""
    source = (f"s3('{s3.url}/{bucket}/{prefix}/_index/day=*/*.parquet', '{ACCESS_KEY}',"
              f" '{SECRET_KEY}', 'Parquet')")
    once = f"(SELECT * FROM {source} LIMIT 1 BY day, stored_as)"
    rows = list(read.values())

    assert clickhouse(f"SELECT count() FROM {once}") == [[len(rows)]]

    per_code = Counter((row["day"], code) for row in rows if row["verdict"] == "diverged"
                       for code in row["codes"])
    chdb_per_code = clickhouse(
        f"SELECT day, arrayJoin(codes) AS code, count() FROM {once} WHERE verdict = 'diverged'"
        " GROUP BY day, code ORDER BY day, code")
    assert chdb_per_code == [[day, code, n] for (day, code), n in sorted(per_code.items())]
    assert per_code and all(n > 0 for n in per_code.values())

    newest = sorted((row for row in rows if row["route"] == ROUTE
                     and row["verdict"] == "diverged"),
                    key=lambda row: (-row["started_at"].timestamp(), row["stored_as"]))[:5]
    assert clickhouse(
        f"SELECT stored_as FROM {once} WHERE route = '{ROUTE}' AND verdict = 'diverged'"
        " ORDER BY started_at DESC, stored_as LIMIT 5") == [[row["stored_as"]] for row in newest]

    assert clickhouse(f"SELECT stored_as, replica FROM {once} WHERE request_id = 'shared-1'"
                      " ORDER BY stored_as") == [
        [stored, read[(day, stored)]["replica"]] for day, stored in sorted(read)
        if read[(day, stored)]["request_id"] == "shared-1"]

    catalog = Catalog(url, cache=workdir / "cache")
    try:
        catalog.refresh()
        duck_per_code = catalog.query(
            "SELECT day, code, count(*) FROM (SELECT day, unnest(codes) AS code FROM pairs"
            " WHERE verdict = 'diverged') GROUP BY day, code ORDER BY day, code")
    finally:
        catalog.close()
    assert [list(row) for row in duck_per_code] == chdb_per_code


def clickhouse(sql: str) -> list[list[Any]]:
    """The rows chDB answers `sql` with."""
    return orjson.loads(bytes(chdb.query(sql, "JSONCompact").bytes()))["data"]
