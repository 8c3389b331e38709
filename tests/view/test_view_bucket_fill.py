"""The view's copy of a bucket, filled for the list first: the newest day first, the first page
waited for and not the whole bucket, pair.json and the client's request only, the other files
fetched when a pair is opened (and by any command that reads the copy whole). Real moto on
loopback; the view's application on a loopback port."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from tests.support.s3 import S3Server, s3_server

from calltap import bucket_copy, recordings
from calltap.bucket_copy import BODIES_PENDING, BucketCopy
from calltap.view.server import ViewSettings, standalone

DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server, demo_tree: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The demo's pairs, each under all three days, in a new bucket: the URL. The store's
    variables are set for this process, where the copy runs."""
    for name, value in s3.environ.items():
        monkeypatch.setenv(name, value)
    name, client = s3.bucket(), s3.client()
    for directory in recordings.capture_directories(demo_tree):
        files = sorted(p.name for p in directory.iterdir() if p.name != recordings.PAIR_JSON)
        for day in DAYS:
            for file in [*files, recordings.PAIR_JSON]:
                client.put_object(Bucket=name, Key=f"lazy/{day}/{directory.name}/{file}",
                                  Body=(directory / file).read_bytes())
    return f"s3://{name}/lazy"


def copied(root: Path) -> list[str]:
    return sorted(str(p.parent.relative_to(root)) for p in root.glob(f"*/*/{recordings.PAIR_JSON}"))


async def test_the_first_fill_is_waited_for_until_the_newest_page_is_there(
        bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bucket_copy, "FIRST_PAGE", 5)
    copy = BucketCopy(bucket, tmp_path / "copy")
    keys = [key async for page in copy.storage.keys_after(None) for key in page]
    newest = sorted({"/".join(key.split("/")[:2]) for key in keys}, reverse=True)[:5]
    try:
        await copy.follow()
        assert set(newest) <= set(copied(copy.root))
        assert copy.filling or copy.cursor is not None
        while copy.filling:
            await asyncio.sleep(0.05)
        await copy.follow()  # the ended fill is collected; the cursor is the newest day's
        assert len(copied(copy.root)) == len({"/".join(key.split("/")[:2]) for key in keys})
        assert copy.cursor is not None and copy.cursor.startswith(DAYS[-1])
    finally:
        await copy.close()


async def test_the_view_copies_what_its_list_reads_and_the_rest_when_a_pair_is_opened(
        bucket: str, demo_tree: Path, tmp_path: Path) -> None:
    copy = BucketCopy(bucket, tmp_path / "copy")
    settings = ViewSettings(copy.root, index_path=tmp_path / "index.sqlite", bucket=copy)
    runner = web.AppRunner(standalone(settings), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    try:
        async with aiohttp.ClientSession(f"http://{host}:{port}") as session:
            async with session.get("/api/pairs?limit=500") as reply:
                listed = (await reply.json())["pairs"]
            assert listed
            assert all(row["model"] for row in listed)  # read from the client's request
            for row in (listed[0], listed[-1]):  # of the first page, and of the fill after it
                pair = copy.root / row["day"] / row["key"]
                uploaded = next(demo_tree.glob(f"*/{row['key']}"))  # under each of DAYS
                source = {p.name: p.read_bytes() for p in uploaded.iterdir()}
                held = {p.name for p in pair.iterdir()} - {BODIES_PENDING}
                assert recordings.PAIR_JSON in held and "downstream.request" in held
                assert all(name.endswith(".request") for name in held - {recordings.PAIR_JSON})
                assert (pair / BODIES_PENDING).exists()
                async with session.get(f"/pairs/{row['day']}/{row['key']}") as reply:
                    assert reply.status == 200
                assert not (pair / BODIES_PENDING).exists()
                assert {p.name: p.read_bytes() for p in pair.iterdir()} == source
    finally:
        await runner.cleanup()


async def test_a_command_reading_the_copy_completes_the_pairs_the_view_left_without_bodies(
        bucket: str, demo_tree: Path, tmp_path: Path) -> None:
    copy = BucketCopy(bucket, tmp_path / "copy")
    await copy.sync(bodies=False)
    assert list(copy.root.glob(f"*/*/{BODIES_PENDING}"))
    await BucketCopy(bucket, copy.root).sync(force=True)
    assert not list(copy.root.glob(f"*/*/{BODIES_PENDING}"))
    for directory in recordings.capture_directories(demo_tree):
        for day in DAYS:
            for file in directory.iterdir():
                assert (copy.root / day / directory.name / file.name).read_bytes() == \
                    file.read_bytes()
