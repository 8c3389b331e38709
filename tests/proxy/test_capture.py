"""Body files through the disk thread: every byte lands under the final name, in order, whether
the body was held and written once, or spilled and written as it flowed (the file open before
the leg ended, or finished by the thread); failures are reported."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

from calltap.proxy.capture import (
    FLUSH_BYTES,
    HOLD_BYTES,
    MAX_PENDING_BYTES,
    MIN_BACKLOG_BYTES,
    Claim,
    Disk,
    Recorder,
    Sink,
    default_opener,
)

Failure = tuple[str, BaseException, Path]


def chunks() -> list[bytes]:
    return [bytes([n % 251]) * (FLUSH_BYTES // 3 + n) for n in range(12)]


def spilling_chunks() -> list[bytes]:
    """More than a sink holds: the body spills to its `.partial` on the way."""
    return [bytes([n % 251]) * (FLUSH_BYTES + n) for n in range(HOLD_BYTES // FLUSH_BYTES + 4)]


class Opened:
    """An opener that remembers every path it opened."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, path: str, flags: int) -> int:
        self.paths.append(os.path.basename(path))
        return default_opener(path, flags)


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


async def test_a_small_body_is_held_and_written_once_under_its_final_name(tmp_path: Path) -> None:
    """Nothing touches the disk while the leg flows; its end opens the final name once (no
    `.partial`, no rename) and the bytes held in memory are given back."""
    disk = await started_disk()
    opened = Opened()
    sink = Sink(disk, Claim(tmp_path), "upstream.sse", 1 << 30, opened, lambda *f: None)
    for chunk in chunks():
        sink.write(chunk)
    await disk.settle()
    assert opened.paths == [] and os.listdir(tmp_path) == []
    assert disk.held_bytes == sum(map(len, chunks()))
    sink.close()
    await disk.settle()
    await disk.stop()
    assert opened.paths == ["upstream.sse"] and disk.held_bytes == 0
    assert (tmp_path / "upstream.sse").read_bytes() == b"".join(chunks())


async def test_a_body_past_the_hold_bound_spills_to_its_partial_as_it_flows(
    tmp_path: Path,
) -> None:
    disk = await started_disk()
    opened = Opened()
    sink = Sink(disk, Claim(tmp_path), "upstream.sse", 1 << 30, opened, lambda *f: None)
    body = spilling_chunks()
    for chunk in body:
        sink.write(chunk)
        await disk.settle()
    partial = (tmp_path / "upstream.sse.partial").read_bytes()
    assert len(partial) > HOLD_BYTES and b"".join(body).startswith(partial)
    assert disk.held_bytes == 0
    sink.close()
    await disk.stop()
    assert sink.settled and opened.paths == ["upstream.sse.partial"]
    assert (tmp_path / "upstream.sse").read_bytes() == b"".join(body)
    assert not (tmp_path / "upstream.sse.partial").exists()


async def test_sinks_holding_more_than_the_disk_allows_together_spill(tmp_path: Path) -> None:
    disk = await started_disk()
    disk.max_held = 3 * FLUSH_BYTES
    opened = Opened()
    first, second = (Sink(disk, Claim(tmp_path), name, 1 << 30, opened, lambda *f: None)
                     for name in ("downstream.sse", "upstream.sse"))
    first.write(b"a" * 2 * FLUSH_BYTES)
    second.write(b"b" * FLUSH_BYTES)
    await disk.settle()
    assert opened.paths == []
    second.write(b"b")
    await disk.settle()
    assert opened.paths == ["upstream.sse.partial"]
    assert disk.held_bytes == 2 * FLUSH_BYTES
    for sink in (first, second):
        sink.close()
    await disk.stop()
    assert (tmp_path / "downstream.sse").read_bytes() == b"a" * 2 * FLUSH_BYTES
    assert (tmp_path / "upstream.sse").read_bytes() == b"b" * (FLUSH_BYTES + 1)


async def test_a_held_body_whose_write_fails_is_kept_as_partial_never_as_final(
    tmp_path: Path,
) -> None:
    def read_only(path: str, flags: int) -> int:
        return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o600)

    disk = await started_disk()
    failures: list[Failure] = []
    sink = Sink(disk, Claim(tmp_path), "upstream.sse", 1 << 30, read_only,
                lambda *f: failures.append(f))
    sink.write(b"data: {}\n\n")
    assert sink.close() == "upstream.sse"
    await disk.settle()
    await disk.stop()
    assert sink.failed and sink.settled
    assert [(stage, exc.errno) for stage, exc, _ in failures] == [("write", errno.EBADF)]
    assert os.listdir(tmp_path) == ["upstream.sse.partial"]


async def test_a_spilled_leg_ending_before_its_file_opened_is_finished_by_the_disk_thread(
    tmp_path: Path,
) -> None:
    disk = await started_disk()
    release = threading.Event()
    disk.submit(release.wait)
    sink = Sink(disk, Claim(tmp_path), "downstream.sse", 1 << 30, default_opener,
                lambda *f: None)
    for chunk in spilling_chunks():
        sink.write(chunk)
    sink.close()
    await asyncio.sleep(0)
    assert not (tmp_path / "downstream.sse.partial").exists()
    release.set()
    await disk.settle()
    await disk.stop()
    assert sink.settled and not sink.failed
    assert (tmp_path / "downstream.sse").read_bytes() == b"".join(spilling_chunks())


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


async def test_a_disk_thread_too_far_behind_costs_the_recording_not_memory(
    tmp_path: Path,
) -> None:
    """While the thread is stuck, what a sink hands it piles up; past `max_backlog` the body
    stops being recorded (ENOBUFS, reported) instead of growing without bound."""
    open_fds = len(os.listdir("/proc/self/fd"))
    disk = Disk(max_backlog=4 * MAX_PENDING_BYTES)
    disk.start(asyncio.get_running_loop())
    release = threading.Event()
    disk.submit(release.wait)
    failures: list[Failure] = []
    sink = Sink(disk, Claim(tmp_path), "upstream.sse", 1 << 30, default_opener,
                lambda *f: failures.append(f))
    piece = b"x" * MAX_PENDING_BYTES
    for _ in range(8):
        sink.write(piece)
    assert sink.failed and sink.closed
    assert disk.backlog <= disk.max_backlog
    sink.close()
    release.set()
    await disk.settle()
    await disk.stop()
    assert [(stage, getattr(exc, "errno", None)) for stage, exc, _ in failures] == [
        ("write", errno.ENOBUFS)]
    assert sink.settled
    assert os.listdir(tmp_path) == []
    assert len(os.listdir("/proc/self/fd")) == open_fds


async def test_a_body_failed_while_its_file_was_opening_closes_the_file(tmp_path: Path) -> None:
    """The thread is inside open() while the loop hands it more than `max_backlog`: the body
    fails, and the file the thread then opens is closed, never leaked."""
    open_fds = len(os.listdir("/proc/self/fd"))
    inside, opening = threading.Event(), threading.Event()

    def slow_opener(path: str, flags: int) -> int:
        fd = default_opener(path, flags)
        inside.set()
        opening.wait()
        return fd

    disk = Disk(max_backlog=2 * MAX_PENDING_BYTES)
    disk.start(asyncio.get_running_loop())
    sink = Sink(disk, Claim(tmp_path), "upstream.sse", 1 << 30, slow_opener, lambda *f: None)
    sink.write(b"x" * (HOLD_BYTES + 1))
    await asyncio.to_thread(inside.wait)
    for _ in range(4):
        sink.write(b"x" * MAX_PENDING_BYTES)
    assert sink.failed
    opening.set()
    await disk.settle()
    await disk.stop()
    assert len(os.listdir("/proc/self/fd")) == open_fds


def test_the_recorder_makes_room_for_one_pair_at_the_capture_limit(tmp_path: Path) -> None:
    small = Recorder(tmp_path, max_capture_bytes=1 << 20, quota_bytes=0,
                     on_failure=lambda *f: None)
    large = Recorder(tmp_path, max_capture_bytes=96 << 20, quota_bytes=0,
                     on_failure=lambda *f: None)
    assert small.disk.max_backlog == MIN_BACKLOG_BYTES
    assert large.disk.max_backlog == 2 * (96 << 20)


async def test_a_mark_is_done_once_everything_submitted_before_it_has_run(tmp_path: Path) -> None:
    """Taken in the iteration that submitted the work it waits for, it travels in the same
    batch to the thread: one hand-over for the legs' files and the wait on them."""
    disk = await started_disk()
    release = threading.Event()
    ran: list[str] = []
    disk.submit(release.wait)
    disk.submit(ran.append, "file")
    mark = disk.mark()
    await asyncio.sleep(0.05)
    assert not mark.done() and ran == []
    release.set()
    await mark
    assert ran == ["file"]
    await disk.stop()
    assert disk.batches == 1
