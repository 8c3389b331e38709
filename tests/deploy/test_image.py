"""The image `make image` builds, run with podman as a deployment runs it: non-root, read-only
root filesystem, recordings and spool on volumes.

calltap in the container relays front -> back -> the fake provider on the host's loopback (it
stands in for a faithful gateway between its own listeners), so one request crosses both legs,
is paired and compared in the worker processes, and lands on the mounted volume.
"""

from __future__ import annotations

import asyncio
import json
import stat
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from tests.deploy.image_helpers import UID, Container, podman, podman_sync
from tests.support.s3 import S3Server, s3_server

from calltap.fakes import FakeProvider
from calltap.fakes.provider import CHAT_PATH, TOOLS_REQUEST

PAIR_TIMEOUT = 30.0
GRACE_PERIOD = 8.0
STOP_TIMEOUT = 20
"""Seconds `podman stop` waits after SIGTERM before it kills: well past the grace period."""


def test_image_declares_a_non_root_user_its_volumes_and_a_healthcheck(image: str) -> None:
    """The HEALTHCHECK survives only in a docker-format image (podman builds OCI by default)."""
    inspected = json.loads(podman_sync("image", "inspect", image))[0]
    config = inspected["Config"]
    assert config["User"] == f"{UID}:{UID}"
    assert set(config["Volumes"]) == {"/recordings", "/spool"}
    assert inspected["Healthcheck"]["Test"][0] == "CMD-SHELL"
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["CALLTAP_RECORDINGS"] == "/recordings"
    assert env["CALLTAP_SPOOL"] == "/spool"
    assert config["Entrypoint"] == ["calltap", "serve"]


async def send(container: Container, request_id: str) -> tuple[int, bytes]:
    """POST a streamed chat request through the container's front listener."""
    headers = {"Content-Type": "application/json", "X-Request-ID": request_id}
    async with aiohttp.ClientSession(auto_decompress=False) as session, session.post(
        f"{container.front_url}{CHAT_PATH}", data=orjson.dumps(TOOLS_REQUEST), headers=headers,
    ) as reply:
        return reply.status, await reply.read()


async def compared_pair(recordings: Path, request_id: str) -> dict[str, Any]:
    """pair.json of `request_id` once it holds the comparison."""
    deadline = time.monotonic() + PAIR_TIMEOUT
    while time.monotonic() < deadline:
        for path in recordings.glob(f"*/{request_id}/pair.json"):
            pair = orjson.loads(path.read_bytes())
            if "comparison" in pair:
                return pair
        await asyncio.sleep(0.1)
    raise AssertionError(f"no compared pair.json for {request_id} under {recordings}")


def assert_private(recordings: Path) -> None:
    """Directories calltap made are 0700, files 0600, all owned by the image's user."""
    made = list(recordings.rglob("*"))
    assert any(path.is_file() for path in made)
    for path in made:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
        assert path.stat().st_uid == UID, path


async def test_relays_byte_identical_and_records_on_the_volume(calltap_in_image) -> None:
    async with FakeProvider() as provider, calltap_in_image(provider.url) as container:
        health = await container.wait_healthy()
        assert health["status"] == "ok"
        assert health["recorder"]["recordings"] == "/recordings"
        uid = await podman("exec", container.name, "id", "-u")
        assert (uid.returncode, uid.stdout) == (0, str(UID))
        checked = await podman("healthcheck", "run", container.name)
        assert checked.returncode == 0, checked.stderr

        status, body = await send(container, "image-relay-1")

        assert status == 200
        assert body == bytes(provider.exchange_for("image-relay-1").response_body)
        pair = await compared_pair(container.recordings, "image-relay-1")
        assert pair["comparison"]["verdict"] == "equal"
        assert pair["legs"]["downstream"]["bytes"] == len(body)
        assert_private(container.recordings)


async def stored_pair(s3: S3Server, bucket: str, request_id: str) -> dict[str, bytes]:
    """The objects of `request_id`'s pair by file name, once pair.json (stored last) is there."""
    deadline = time.monotonic() + PAIR_TIMEOUT
    while time.monotonic() < deadline:
        objects = await asyncio.to_thread(s3.objects, bucket)
        mine = {key.rsplit("/", 1)[1]: data for key, data in objects.items()
                if key.split("/")[-2] == request_id}
        if "pair.json" in mine:
            return mine
        await asyncio.sleep(0.2)
    raise AssertionError(f"{request_id}'s pair.json never reached bucket {bucket}")


async def listed_pairs(container, request_id: str) -> dict:
    """`/api/pairs` once it lists `request_id` (its row reaches the bucket's index within a
    round or two), or as it last answered."""
    deadline = time.monotonic() + PAIR_TIMEOUT
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(f"{container.admin_url}/api/pairs", headers={
                    "Authorization": "Bearer image-view-token"}) as listing:
                listed = await listing.json()
            if any(row["key"] == request_id for row in listed["pairs"]) \
                    or time.monotonic() > deadline:
                return listed
            await asyncio.sleep(0.5)


async def test_records_to_a_bucket_through_the_spool_volume(
    calltap_in_image, tmp_path: Path,
) -> None:
    """With a bucket, captures are written to /spool first: the pair reaches the bucket only if
    the spool volume is writable. `/ui/` lists the bucket from its index of pairs (a segment a
    second here), fetched into the user's cache directory, which the image puts on the
    recordings volume."""
    with s3_server(tmp_path) as s3:
        bucket = s3.bucket()
        settings = {"CALLTAP_RECORDINGS": f"s3://{bucket}/image", **s3.environ,
                    "CALLTAP_VIEW_TOKEN": "image-view-token", "CALLTAP_INDEX_INTERVAL": "1"}
        async with FakeProvider() as provider, calltap_in_image(provider.url, **settings) as (
            container
        ):
            health = await container.wait_healthy()
            assert health["store"]["reachable"] is True
            status, body = await send(container, "image-bucket-1")
            stored = await stored_pair(s3, bucket, "image-bucket-1")
            listed = await listed_pairs(container, "image-bucket-1")

    assert status == 200
    assert stored["downstream.sse"] == body
    assert orjson.loads(stored["pair.json"])["comparison"]["verdict"] == "equal"
    assert [row["key"] for row in listed["pairs"]] == ["image-bucket-1"]
    assert [path.name for path in container.recordings.iterdir()] == [".cache"]
    (day,) = (path for path in container.spool.iterdir() if path.name != "_index")
    assert (stat.S_IMODE(day.stat().st_mode), day.stat().st_uid) == (0o700, UID)
    assert not any(day.iterdir())  # the capture was written there, and deleted once stored


WRITE_EVERYWHERE = """
import os
for directory in ("/", "/app", "/app/config", "/opt/calltap", "/tmp", "/var/tmp", "/run",
                  "/etc", "/recordings", "/spool"):
    try:
        with open(os.path.join(directory, "probe"), "x"):
            pass
    except OSError as exc:
        print(directory, exc.strerror)
    else:
        print(directory, "written")
"""


async def test_nothing_but_the_volumes_is_writable(calltap_in_image) -> None:
    async with FakeProvider() as provider, calltap_in_image(provider.url) as container:
        await container.wait_healthy()
        probe = await podman("exec", container.name, "python", "-c", WRITE_EVERYWHERE)

    assert probe.returncode == 0, probe.stderr
    written = dict(line.split(" ", 1) for line in probe.stdout.splitlines())
    assert written.pop("/recordings") == "written"
    assert written.pop("/spool") == "written"
    assert set(written.values()) == {"Read-only file system"}, written


async def test_sigterm_lets_the_stream_in_flight_finish_and_exits_0(calltap_in_image) -> None:
    """`podman stop` sends SIGTERM: the stream under way ends complete and byte-identical,
    calltap exits 0 well before podman's deadline would have killed it (exit code 137)."""
    grace = {"CALLTAP_GRACE_PERIOD": str(GRACE_PERIOD)}
    async with (
        FakeProvider(events_delay=0.25) as provider,
        calltap_in_image(provider.url, **grace) as container,
    ):
        await container.wait_healthy()
        headers = {"Content-Type": "application/json", "X-Request-ID": "image-stop-1"}
        async with aiohttp.ClientSession(auto_decompress=False) as session, session.post(
            f"{container.front_url}{CHAT_PATH}", data=orjson.dumps(TOOLS_REQUEST),
            headers=headers,
        ) as reply:
            first = await reply.content.readany()
            started = time.monotonic()
            stop = asyncio.create_task(
                podman("stop", "--time", str(STOP_TIMEOUT), container.name, timeout=60))
            body = first + await reply.read()
        assert (await stop).returncode == 0
        stopped_after = time.monotonic() - started

        assert body == bytes(provider.exchange_for("image-stop-1").response_body)
        assert provider.exchange_for("image-stop-1").complete
        assert stopped_after < GRACE_PERIOD
        assert await container.exit_code() == 0
        logs = await podman("logs", container.name)
        assert '"event":"serve.stopped"' in logs.stdout
        pair = await compared_pair(container.recordings, "image-stop-1")
        assert pair["legs"]["downstream"]["ended"] == "complete"
