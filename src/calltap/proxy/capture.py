"""The recordings tree on disk: capture directories, body files, pair.json.

A body is held in memory while it is small and written once, under its final name, when its
leg ends; a body past `HOLD_BYTES` (or while sinks together hold `MAX_HELD_BYTES`) spills to
`<name>.partial`, written as the stream flows and renamed when the leg ends. So a crash loses
at most the legs in flight: the small ones whole, of the large ones what the disk had not
received, and their `.partial` stays for the next start to report. Directories are 0700 and
files 0600. Every disk error is caught here and handed to `on_failure`: recording is
fail-open, the relay never sees it.

Creating a file or a directory can cost a millisecond of kernel time on a busy filesystem
(ext4 without a journal scans past every recently freed inode), and the event loop would stall
every stream meanwhile. So mkdir and open run on one disk thread, in order, handed over once
per loop iteration; a small exchange costs the loop one hand-over per leg (both bodies' files,
and the capture directory with the first of them). A spilled body is written, closed and
renamed on the loop once its file is open (cheap everywhere); until then its sink keeps its
chunks, and should the file still not be open when the leg ends, the disk thread finishes it.
What a sink holds or the thread has been handed is bounded: past `MAX_PENDING_BYTES` the body
stops being recorded, never relayed.

Past `max_capture_bytes` a body stops being recorded (the leg keeps being relayed) and the
sink is `truncated`; the leg then ends as `capture_truncated` in pair.json (its `relay_ended`
keeps how the stream itself ended) and the comparator reports CAPTURE_TRUNCATED.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from calltap import recordings
from calltap.proxy.ids import reserve_capture_dir

FILE_MODE = 0o600
OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
FLUSH_BYTES = 16 * 1024
"""A sink writes once it holds this much: as often as a 16 KiB buffered file would."""
MAX_PENDING_BYTES = 256 * 1024
"""What one sink may hold while its file is not open yet; past it the sink hands its chunks
to the disk thread (and from then on every write), where `Disk.max_backlog` bounds them."""
MIN_BACKLOG_BYTES = 64 * 1024 * 1024
"""The least `Disk.max_backlog` is: see `Recorder`."""
HOLD_BYTES = 256 * 1024
"""A body up to this size is held in memory and written once when its leg ends."""
MAX_HELD_BYTES = 64 * 1024 * 1024
"""What all sinks together hold in memory at most (`Disk.max_held`); past it a body spills."""
Opener = Callable[[str, int], int]
FailureHandler = Callable[[str, BaseException, Path], None]
Operation = tuple[Callable[..., Any], tuple[Any, ...]]


def default_opener(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_EXCL, FILE_MODE)


class Disk:
    """The one thread that makes the recorder's slow file-system calls, in the order they were
    submitted. `submit` never blocks; what a loop iteration submits reaches the thread at once,
    at the end of that iteration. `call` and `settle` let a coroutine wait for it."""

    def __init__(self, max_backlog: int = MIN_BACKLOG_BYTES) -> None:
        self.max_backlog = max_backlog
        """Bytes handed to the thread and not yet written, at most: a disk slower than the
        traffic costs recordings, not memory."""
        self._queue: SimpleQueue[list[Operation] | None] = SimpleQueue()
        self._batch: list[Operation] = []
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.batches = 0
        """Hand-overs to the thread so far: each wakes it, which costs the loop."""
        self.max_held = MAX_HELD_BYTES
        self.held_bytes = 0
        """Body bytes sinks hold in memory, no file asked for yet (counted by the loop)."""
        self.queued_bytes = 0
        """Body bytes handed to the thread (counted by the loop only)."""
        self.written_bytes = 0
        """Body bytes the thread is done with (counted by the thread only)."""

    @property
    def backlog(self) -> int:
        return self.queued_bytes - self.written_bytes

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name="calltap-disk", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Run what was submitted, then end the thread; nothing is submitted afterwards."""
        thread = self._thread
        if thread is None:
            return
        self._hand_over()
        self._queue.put(None)
        await asyncio.to_thread(thread.join)
        self._thread = None

    def submit(self, call: Callable[..., Any], *args: Any) -> None:
        if self._thread is None or self._loop is None:
            call(*args)
            return
        if not self._batch:
            self._loop.call_soon(self._hand_over)
        self._batch.append((call, args))

    def _hand_over(self) -> None:
        batch, self._batch = self._batch, []
        if batch:
            self.batches += 1
            self._queue.put(batch)

    def report(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run `callback(*args)` on the event loop (from the disk thread, or inline)."""
        if self._loop is None or threading.current_thread() is not self._thread:
            callback(*args)
        else:
            self._loop.call_soon_threadsafe(callback, *args)

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run `function(*args)` on the disk thread after everything submitted before it;
        its result, or the exception it raised."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def run() -> None:
            try:
                result = function(*args)
            except BaseException as exc:
                self.report(_settle, future, None, exc)
            else:
                self.report(_settle, future, result, None)

        self.submit(run)
        return await future

    async def settle(self) -> None:
        """Wait until everything submitted so far has run."""
        await self.mark()

    def mark(self) -> asyncio.Future[Any]:
        """A future done once everything submitted so far has run. Taken in the same loop
        iteration as the submissions it waits for, it costs no hand-over of its own."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.submit(self.report, _settle, future, None, None)
        return future

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            for call, args in batch:
                call(*args)


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


class Claim:
    """A capture directory; its files are written only once it exists. One reserved before
    relaying exists already; a minted id's is made on the disk thread by the first operation
    that writes into it, so reserving it costs the relay nothing."""

    __slots__ = ("_make", "ok", "path")

    def __init__(self, path: Path, ok: bool = True,
                 make: Callable[[], bool] | None = None) -> None:
        self.path = path
        self.ok = ok
        self._make = make

    def ready(self) -> bool:
        """Whether the directory exists (made now if need be); on the disk thread."""
        if self._make is not None:
            make, self._make = self._make, None
            self.ok = make()
        return self.ok


class Sink:
    """One body file. `write` is on the relay's hot path: it appends the chunk to a buffer (no
    formatting, no hashing: the hash is taken off-loop later).

    A body is held in memory while it is small (`HOLD_BYTES`, and at most `Disk.max_held`
    for all sinks together) and written once when its leg ends: one disk-thread call opens
    the final name, writes and closes, with no `.partial` and no rename. A body past the bound
    spills (`Spill`): from then on it is written to its `.partial` as it flows and renamed
    when the leg ends; so a crash loses the small legs in flight and leaves the large ones'
    `.partial`. `failed` is final once `settled`."""

    __slots__ = ("_buffer", "_buffered", "_ended", "_partial", "_spill", "claim", "closed",
                 "disk", "failed", "limit", "name", "on_failure", "opener", "recorded",
                 "settled", "truncated")

    def __init__(self, disk: Disk, claim: Claim, name: str, limit: int, opener: Opener,
                 on_failure: FailureHandler, *, partial: bool = True) -> None:
        self.name = name
        self.claim = claim
        self._partial = partial
        self.limit = limit
        self.recorded = 0
        self.truncated = False
        self.failed = False
        self.closed = False
        """No more bytes are taken (ended, failed or past the limit)."""
        self.settled = False
        """The file is closed and has its final name, or is known to have failed."""
        self.disk = disk
        self.opener = opener
        self.on_failure = on_failure
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._spill: Spill | None = None
        """The `.partial` the body flows into once it no longer fits in memory."""
        self._ended = False

    @property
    def final(self) -> Path:
        """Where the body ends up (paths are made off the hot path, when a file is touched)."""
        return self.claim.path / self.name

    @property
    def flowing(self) -> Path:
        """Where a spilled body is written as it flows."""
        return self.claim.path / (self.name + recordings.PARTIAL) if self._partial else self.final

    @property
    def buffered(self) -> int:
        return self._buffered

    def write(self, chunk: bytes) -> None:
        if self.closed or self.failed:
            return
        size = self.recorded + len(chunk)
        if size > self.limit:
            chunk = chunk[: self.limit - self.recorded]
            size = self.limit
            self.truncated = True
            self.closed = True
        self._buffer.append(chunk)
        self._buffered += len(chunk)
        self.recorded = size
        if self._spill is not None:
            if self._buffered >= FLUSH_BYTES:
                self._spill.flush()
            return
        disk = self.disk
        disk.held_bytes += len(chunk)
        if self._buffered > HOLD_BYTES or disk.held_bytes > disk.max_held:
            disk.held_bytes -= self._buffered
            self._spill = Spill(self)

    def take(self) -> tuple[list[bytes], int]:
        """The chunks buffered so far, and their size; the buffer starts afresh."""
        buffer, size = self._buffer, self._buffered
        self._buffer, self._buffered = [], 0
        return buffer, size

    def admit(self, size: int) -> bool:
        """Count `size` bytes handed to the disk thread; past `max_backlog` the body fails."""
        disk = self.disk
        if disk.backlog + size > disk.max_backlog:
            self.closed = True
            self.fail("write", OSError(errno.ENOBUFS, "recording backlog full"))
            return False
        disk.queued_bytes += size
        return True

    def fail(self, stage: str, exc: BaseException, path: Path | None = None) -> None:
        self.failed = True
        self.disk.report(self.on_failure, stage, exc, path or self.flowing)

    def close(self) -> str | None:
        """Write the rest and give the file its final name (a spilled one here when its file
        is open, else on the disk thread). The file's name, or None when the body is known
        not to be recorded (a spilled `.partial` stays for inspection); the disk thread may
        still fail it."""
        if not self._ended:
            self._ended = True
            self.closed = True
            if self._spill is not None:
                self._spill.close()
            else:
                self._write_once()
        return None if self.failed else self.name

    def _write_once(self) -> None:
        buffer, size = self.take()
        self.disk.held_bytes -= size
        if self.failed or not self.admit(size):
            self.settled = True
            return
        self.disk.submit(self._write_file, buffer, size)

    # -- on the disk thread ----------------------------------------------------------------

    def _write_file(self, buffer: list[bytes], size: int) -> None:
        """A held body's whole file: open the final name, write, close. A write or close that
        fails leaves the bytes it got under the `.partial` name, never under the final one."""
        try:
            fd = self._open_final()
            if fd is not None:
                error = _write_and_close(fd, buffer)
                if error is not None:
                    self.fail(*error)
                    with contextlib.suppress(OSError):
                        os.replace(self.final, self.claim.path / (self.name + recordings.PARTIAL))
        finally:
            self.disk.written_bytes += size
            self.settled = True

    def _open_final(self) -> int | None:
        if not self.claim.ready():
            self.failed = True
            return None
        try:
            return self.opener(str(self.final), OPEN_FLAGS)
        except OSError as exc:
            self.fail("open", exc, self.final)
            return None


class Spill:
    """A spilled body's `.partial`: opened on the disk thread, then written on the loop each
    time the sink holds `FLUSH_BYTES`, and closed and renamed on the loop when the leg ends.
    Until the file is open the sink keeps its chunks; past `MAX_PENDING_BYTES` they go to the
    disk thread, which then does the writes until it has caught up (so one fast burst does not
    leave a whole body queued behind the thread), and which finishes the file should it still
    not be open when the leg ends."""

    __slots__ = ("_fd", "_handed", "_handed_over", "_sink", "_taken")

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._fd: int | None = None
        self._handed_over = False
        """Chunks went to the disk thread: it does the writes until it has caught up."""
        self._handed = 0
        """Bytes handed to the disk thread (counted by the loop)."""
        self._taken = 0
        """Of those, the bytes the disk thread is done with (counted by the thread)."""
        sink.disk.submit(self._open)

    def flush(self) -> None:
        if self._handed_over and self._fd is not None and self._taken == self._handed:
            self._handed_over = False
        if self._fd is not None and not self._handed_over:
            self._write_here()
        elif self._sink.buffered >= MAX_PENDING_BYTES:
            self._hand_over()

    def close(self) -> None:
        sink = self._sink
        rest, _ = sink.take()
        if self._fd is not None and not self._handed_over:
            self._finish(rest)
        elif sink.failed:
            sink.settled = True
        else:
            sink.disk.submit(self._finish, rest)

    def _write_here(self) -> None:
        self._write_buffer(self._sink.take()[0])

    def _write_buffer(self, buffer: list[bytes]) -> None:
        try:
            _write_all(self._fd, buffer)
        except OSError as exc:
            self._close_fd()
            self._sink.fail("write", exc)

    def _hand_over(self) -> None:
        sink = self._sink
        buffer, size = sink.take()
        if not sink.admit(size):
            sink.disk.submit(self._close_fd)
            return
        self._handed_over = True
        self._handed += size
        sink.disk.submit(self._write, buffer, size)

    def _close_fd(self) -> OSError | None:
        fd, self._fd = self._fd, None
        if fd is None:
            return None
        try:
            os.close(fd)
        except OSError as exc:
            return exc
        return None

    def _finish(self, rest: list[bytes]) -> None:
        """Write what is left, close and rename (on whichever thread owns the file now)."""
        sink = self._sink
        if not sink.failed and rest:
            self._write_buffer(rest)
        error = self._close_fd()
        if not sink.failed:
            if error is not None:
                sink.fail("close", error)
            elif sink.flowing != sink.final:
                try:
                    os.replace(sink.flowing, sink.final)
                except OSError as exc:
                    sink.fail("rename", exc)
        sink.settled = True

    # -- on the disk thread ----------------------------------------------------------------

    def _open(self) -> None:
        sink = self._sink
        if sink.failed or not sink.claim.ready():
            sink.failed = True
            return
        try:
            self._fd = sink.opener(str(sink.flowing), OPEN_FLAGS)
        except OSError as exc:
            sink.fail("open", exc)

    def _write(self, buffer: list[bytes], size: int) -> None:
        try:
            if self._fd is not None and not self._sink.failed:
                _write_all(self._fd, buffer)
        except OSError as exc:
            self._close_fd()
            self._sink.fail("write", exc)
        finally:
            self._sink.disk.written_bytes += size
            self._taken += size


def _write_and_close(fd: int, buffer: list[bytes]) -> tuple[str, OSError] | None:
    """Write `buffer` to `fd` and close it; the stage and error of the first failure."""
    try:
        _write_all(fd, buffer)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.close(fd)
        return "write", exc
    try:
        os.close(fd)
    except OSError as exc:
        return "close", exc
    return None


def _write_all(fd: int | None, buffer: list[bytes]) -> None:
    if fd is not None:
        write_fully(fd, b"".join(buffer))


def write_fully(fd: int, data: bytes) -> None:
    """Write all of `data`: os.write may take less than it is given."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Recorder:
    """Owns the recordings tree: reserves capture directories, opens sinks, writes pair.json,
    keeps the disk quota (over it, `paused` until a rescan finds room again). Between `start`
    and `stop` its file-system calls run on the disk thread."""

    def __init__(self, root: Path, *, max_capture_bytes: int, quota_bytes: int,
                 on_failure: FailureHandler, opener: Opener | None = None) -> None:
        # Room for one pair's two bodies at their limit, so that a single huge exchange is
        # recorded whole even while the disk thread lags behind a fast relay.
        self.disk = Disk(max(MIN_BACKLOG_BYTES, 2 * max_capture_bytes))
        self.root = root
        self.max_capture_bytes = max_capture_bytes
        self.quota_bytes = quota_bytes
        self.used_bytes = 0
        self.paused = False
        self.opener = opener or default_opener
        self.on_failure = on_failure

    def prepare(self) -> list[str]:
        """Create the root (0700) and prove it writable; raise OSError when it is not. Returns
        the leftover `.partial` files of an earlier run (relative paths) and measures usage."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        probe = self.root / f".calltap-probe-{os.getpid()}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        os.close(fd)
        probe.unlink()
        leftovers = recordings.leftovers(self.root)
        self.used_bytes = self.measure()
        return leftovers

    def measure(self) -> int:
        total = 0
        for directory, _dirs, files in os.walk(self.root):
            for name in files:
                try:
                    total += os.lstat(os.path.join(directory, name)).st_size
                except OSError:
                    continue
        return total

    def over_quota(self) -> bool:
        return self.quota_bytes > 0 and self.used_bytes >= self.quota_bytes

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.disk.start(loop)

    async def stop(self) -> None:
        """Finish every queued file operation."""
        await self.disk.stop()

    def claim(self, request_id: str, now: float) -> tuple[str, Claim]:
        """The capture directory for a freshly minted (unique) id, made on the disk thread by
        the first file written into it; the relay goes on at once. Should the directory exist
        after all, the claim fails and nothing is written into someone else's capture."""
        day = recordings.day_directory(self.root, now)
        return request_id, Claim(day / request_id,
                                 make=functools.partial(self._claim, day, request_id))

    def _claim(self, day: Path, request_id: str) -> bool:
        try:
            key, path = reserve_capture_dir(day, request_id)
        except OSError as exc:
            self.disk.report(self.on_failure, "reserve", exc, day)
            return False
        if key != request_id:
            with contextlib.suppress(OSError):
                path.rmdir()
            self.disk.report(self.on_failure, "reserve",
                             FileExistsError(errno.EEXIST, "capture directory exists"),
                             day / request_id)
            return False
        return True

    async def reserve(self, request_id: str, now: float) -> tuple[str, Claim] | None:
        """A fresh capture directory for a client's `request_id` (`<id>+N` when that id has a
        capture already), or None (failure already reported)."""
        day = recordings.day_directory(self.root, now)
        try:
            key, path = await self.disk.call(reserve_capture_dir, day, request_id)
        except OSError as exc:
            self.on_failure("reserve", exc, day)
            return None
        return key, Claim(path)

    def sink(self, claim: Claim, name: str, *, partial: bool = True) -> Sink:
        return Sink(self.disk, claim, name, self.max_capture_bytes, self.opener,
                    self.on_failure, partial=partial)

    def account(self, nbytes: int) -> None:
        self.used_bytes += nbytes

    def rename(self, directory: Path, old: str, new: str) -> bool:
        try:
            os.replace(directory / old, directory / new)
        except OSError as exc:
            self.on_failure("rename", exc, directory / old)
            return False
        return True

    async def write_pair(self, directory: Path, document: dict[str, Any]) -> bool:
        """Write pair.json atomically (temporary file, then rename), 0600, on the disk thread."""
        payload = recordings.encode_pair(document)
        name = recordings.PAIR_JSON
        error = await self.disk.call(self._write_json, directory, name, payload)
        if error is not None:
            self.on_failure("pair_json", error, directory / name)
            return False
        self.used_bytes += len(payload)
        return True

    def _write_json(self, directory: Path, name: str, payload: bytes) -> OSError | None:
        temporary = directory / f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        try:
            with open(temporary, "wb", opener=self.opener) as handle:
                handle.write(payload)
            os.replace(temporary, directory / name)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
            return exc
        return None
