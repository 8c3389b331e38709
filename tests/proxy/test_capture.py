"""Body files through the disk thread: every byte lands under the final name, in order, whether
the file was open before the leg ended or the thread finishes it; failures are reported."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from calltap.proxy.capture import FLUSH_BYTES, Claim, Disk, Sink, default_opener

Failure = tuple[str, BaseException, Path]


def chunks() -> list[bytes]:
    return [bytes([n % 251]) * (FLUSH_BYTES // 3 + n) for n in range(12)]


async def started_disk() -> Disk:
    disk = Disk()
    disk.start(asyncio.get_running_loop())
    return disk


async def test_chunks_land_in_order_under_the_final_name(tmp_path: Path) -> None:
    disk = await started_disk()
    failures: list[Failure] = []
    sink = Sink(disk, Claim(tmp_path), "upstream.sse", 1 << 30, default_opener,
                lambda *f: failures.append(f))
    await disk.settle()
    for chunk in chunks():
        sink.write(chunk)
    assert sink.close() == "upstream.sse"
    await disk.settle()
    await disk.stop()
    assert sink.settled and not sink.failed and failures == []
    assert (tmp_path / "upstream.sse").read_bytes() == b"".join(chunks())
    assert not (tmp_path / "upstream.sse.partial").exists()
    assert (tmp_path / "upstream.sse").stat().st_mode & 0o777 == 0o600


async def test_a_leg_ending_before_its_file_opened_is_finished_by_the_disk_thread(
    tmp_path: Path,
) -> None:
    disk = await started_disk()
    release = threading.Event()
    disk.submit(release.wait)
    sink = Sink(disk, Claim(tmp_path), "downstream.sse", 1 << 30, default_opener,
                lambda *f: None)
    for chunk in chunks():
        sink.write(chunk)
    sink.close()
    await asyncio.sleep(0)
    assert not (tmp_path / "downstream.sse.partial").exists()
    release.set()
    await disk.settle()
    await disk.stop()
    assert sink.settled and not sink.failed
    assert (tmp_path / "downstream.sse").read_bytes() == b"".join(chunks())


async def test_a_failed_claim_opens_nothing_and_a_failed_open_is_reported(
    tmp_path: Path,
) -> None:
    disk = await started_disk()
    failures: list[Failure] = []
    unclaimed = Sink(disk, Claim(tmp_path / "taken", ok=False), "upstream.sse", 100,
                     default_opener, lambda *f: failures.append(f))
    missing = Sink(disk, Claim(tmp_path / "missing"), "upstream.sse", 100, default_opener,
                   lambda *f: failures.append(f))
    for sink in (unclaimed, missing):
        sink.write(b"data: {}\n\n")
        sink.close()
    await disk.settle()
    await disk.stop()
    assert unclaimed.failed and missing.failed
    assert [(stage, type(exc)) for stage, exc, _ in failures] == [("open", FileNotFoundError)]
    assert os.listdir(tmp_path) == []
