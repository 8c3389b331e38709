"""Two gateway replicas, a calltap beside each, one bucket: every pair lands once, whole and
compared, and two replicas given the same client request id never overwrite each other."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import aiohttp
import pytest
from tests.reliability.harness import streaming_provider
from tests.store.replicas import bucket_pairs, pair_json, replica
from tests.support.s3 import ACCESS_KEY, SECRET_KEY, S3Server, free_port
from tests.support.s3_faults import FaultyStore

from calltap.index import layout, parquet

PER_REPLICA = 12
SHARED = 3


async def test_two_replicas_one_bucket(s3: S3Server, store: FaultyStore, workdir: Path) -> None:
    bucket = s3.bucket()
    url = f"s3://{bucket}/staging"
    async with streaming_provider() as provider, \
            replica(workdir, "a", provider, url, index_interval=1) as a, \
            replica(workdir, "b", provider, url, index_interval=1) as b, \
            aiohttp.ClientSession() as client:
        keys = {name: [f"{name}-{i}" for i in range(PER_REPLICA)]
                + [f"shared-{i}" for i in range(SHARED)] for name in ("a", "b")}
        bodies = await asyncio.gather(*(
            side.send(client, key) for name, side in (("a", a), ("b", b)) for key in keys[name]))
        health = [await side.settled(client, PER_REPLICA + SHARED) for side in (a, b)]
        assert not a.spooled() and not b.spooled()
        await indexed(s3, bucket, "staging", 2 * (PER_REPLICA + SHARED))
        logs = a.calltap.log_path.read_text() + b.calltap.log_path.read_text()
    pairs = bucket_pairs(s3, bucket, "staging")
    assert len(pairs) == 2 * (PER_REPLICA + SHARED)
    by_key = {path.split("/")[1]: files for path, files in pairs.items()}
    received = dict(zip([k for name in ("a", "b") for k in keys[name]], bodies, strict=True))
    for key, body in received.items():
        if key.startswith("shared-"):
            continue
        document = pair_json(by_key[key])
        assert document["comparison"]["verdict"] == "equal"
        assert by_key[key]["downstream.sse"] == body
        assert "stored_as" not in document
    for i in range(SHARED):
        first, second = pair_json(by_key[f"shared-{i}"]), pair_json(by_key[f"shared-{i}+2"])
        assert first["request_id"] == second["request_id"] == f"shared-{i}"
        assert second["stored_as"] == f"shared-{i}+2" and "stored_as" not in first
        assert first["capture_id"] != second["capture_id"]
        assert {first["comparison"]["verdict"], second["comparison"]["verdict"]} == {"equal"}
    everything = b"".join(data for files in pairs.values() for data in files.values())
    seen = everything + logs.encode() + repr(health).encode()
    assert SECRET_KEY.encode() not in seen and ACCESS_KEY.encode() not in seen
    assert health[0]["store"]["url"] == url and health[0]["store"]["reachable"] is True
    readers_see_every_replica(url, s3.url, workdir, len(pairs))


async def indexed(s3: S3Server, bucket: str, prefix: str, count: int) -> None:
    """Until the replicas' index segments name `count` pairs (a round a second each)."""
    async with asyncio.timeout(30):
        while sum(len(parquet.decode(data)) for data in s3.objects(
                bucket, f"{prefix}/{layout.INDEX}/").values()) < count:
            await asyncio.sleep(0.2)


def readers_see_every_replica(url: str, endpoint: str, workdir: Path, count: int) -> None:
    """`calltap scan` and `calltap view` on the bucket count both replicas' pairs (from the
    store itself: this test's loop, which runs the faulty relay, waits on them)."""
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "XDG_CACHE_HOME": str(workdir / "cache")}
    scan = subprocess.run([sys.executable, "-m", "calltap", "scan", url, "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert scan.returncode == 0, scan.stderr
    summary = json.loads(scan.stdout)
    assert summary["captures"] == count and summary["verdicts"] == {"equal": count}
    port = free_port()
    with subprocess.Popen([sys.executable, "-m", "calltap", "view", url, "--listen",
                           f"127.0.0.1:{port}", "--index", str(workdir / "index-cache")],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as view:
        try:
            assert view.stdout is not None and view.stdout.readline()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/pairs?limit=200",
                                        timeout=60) as reply:
                listed = json.loads(reply.read())
            assert len(listed["pairs"]) == count
        finally:
            view.terminate()


async def test_a_view_copy_it_cannot_write_costs_serve_the_view_not_the_relay(
        s3: S3Server, store: FaultyStore, workdir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only root (a container's, a pod's) where the view's bucket copy would go: serve
    starts, relays and uploads, and `/ui/` still answers."""
    blocked = workdir / "not-a-directory"
    blocked.write_bytes(b"")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    bucket = s3.bucket()
    async with streaming_provider() as provider, \
            replica(workdir, "a", provider, f"s3://{bucket}/staging") as a, \
            aiohttp.ClientSession() as client:
        body = await a.send(client, "cache-blocked")
        assert hashlib.sha256(body).hexdigest() == provider.sent["cache-blocked"].sha256
        await a.settled(client, 1)
        async with client.get(a.calltap.urls["admin"] + "/ui/") as page:
            assert page.status == 200
    assert [key.split("/")[1] for key in bucket_pairs(s3, bucket, "staging")] == ["cache-blocked"]
