"""The recordings tree on disk: capture directories, body files written as bytes flow, pair.json.

A body is written to `<name>.partial` while its stream flows and renamed to `<name>` when the
leg ends, so a crash loses at most what the disk had not received and leaves the `.partial` for
the next start to report. Directories are 0700 and files 0600. Every disk error is caught
here and handed to `on_failure`: recording is fail-open, the relay never sees it.

Past `max_capture_bytes` a body stops being recorded (the leg keeps being relayed) and the
sink is `truncated`; the leg then ends as `capture_truncated` in pair.json (its `relay_ended`
keeps how the stream itself ended) and the comparator reports CAPTURE_TRUNCATED.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import orjson

from calltap.proxy.ids import day_dir_for, reserve_capture_dir

PARTIAL = ".partial"
FILE_MODE = 0o600
WRITE_BUFFER = 16 * 1024
"""Small on purpose: a larger buffer is a fresh mmap per file, which costs more CPU than the
write calls it saves."""
Opener = Callable[[str, int], int]
FailureHandler = Callable[[str, BaseException, Path], None]


def default_opener(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_EXCL, FILE_MODE)


class Sink:
    """One body file, appended to as chunks arrive. `write` is on the relay's hot path: one
    buffered write per chunk, no formatting, no hashing (the hash is taken off-loop later)."""

    __slots__ = ("_file", "_on_failure", "failed", "final", "limit", "name", "partial",
                 "recorded", "truncated")

    def __init__(self, directory: Path, name: str, limit: int, opener: Opener,
                 on_failure: FailureHandler) -> None:
        self.name = name
        self.final = directory / name
        self.partial = directory / (name + PARTIAL)
        self.limit = limit
        self.recorded = 0
        self.truncated = False
        self.failed = False
        self._on_failure = on_failure
        self._file: IO[bytes] | None = None
        try:
            self._file = open(self.partial, "wb", buffering=WRITE_BUFFER, opener=opener)  # noqa: SIM115
        except OSError as exc:
            self.failed = True
            on_failure("open", exc, self.partial)

    @property
    def ok(self) -> bool:
        """True while the file is being written (not failed, not past its limit)."""
        return self._file is not None

    def write(self, chunk: bytes) -> None:
        file = self._file
        if file is None:
            return
        size = self.recorded + len(chunk)
        if size > self.limit:
            chunk = chunk[: self.limit - self.recorded]
            size = self.limit
            self.truncated = True
        try:
            file.write(chunk)
        except (OSError, ValueError) as exc:
            self._fail("write", exc)
            return
        self.recorded = size
        if self.truncated:
            self._close_file()

    def _fail(self, stage: str, exc: BaseException) -> None:
        file, self._file = self._file, None
        self.failed = True
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()
        self._on_failure(stage, exc, self.partial)

    def _close_file(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError as exc:
                self.failed = True
                self._on_failure("close", exc, self.partial)

    def close(self) -> str | None:
        """Flush, close and rename to the final name; the file's name, or None when the body
        could not be recorded (the `.partial` stays for inspection)."""
        self._close_file()
        if self.failed:
            return None
        try:
            os.replace(self.partial, self.final)
        except OSError as exc:
            self.failed = True
            self._on_failure("rename", exc, self.partial)
            return None
        return self.name


class Recorder:
    """Owns the recordings tree: reserves capture directories, opens sinks, writes pair.json,
    keeps the disk quota (over it, `paused` until a rescan finds room again)."""

    def __init__(self, root: Path, *, max_capture_bytes: int, quota_bytes: int,
                 on_failure: FailureHandler, opener: Opener | None = None) -> None:
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
        leftovers = sorted(str(p.relative_to(self.root)) for p in self.root.glob(f"*/*/*{PARTIAL}"))
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

    def reserve(self, request_id: str, now: float) -> tuple[str, Path] | None:
        """A fresh capture directory for `request_id`, or None (failure already reported)."""
        day = day_dir_for(self.root, now)
        try:
            return reserve_capture_dir(day, request_id)
        except OSError as exc:
            self.on_failure("reserve", exc, day)
            return None

    def sink(self, directory: Path, name: str) -> Sink:
        return Sink(directory, name, self.max_capture_bytes, self.opener, self.on_failure)

    def account(self, nbytes: int) -> None:
        self.used_bytes += nbytes

    def rename(self, directory: Path, old: str, new: str) -> bool:
        try:
            os.replace(directory / old, directory / new)
        except OSError as exc:
            self.on_failure("rename", exc, directory / old)
            return False
        return True

    def write_json(self, directory: Path, name: str, data: Any) -> bool:
        """Write `name` atomically (temporary file, then rename), 0600."""
        payload = orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"
        temporary = directory / f".{name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        try:
            with open(temporary, "wb", opener=self.opener) as handle:
                handle.write(payload)
            os.replace(temporary, directory / name)
        except OSError as exc:
            self.on_failure("pair_json", exc, directory / name)
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
            return False
        self.used_bytes += len(payload)
        return True
