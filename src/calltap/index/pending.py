"""Rows that no segment holds yet, spooled on disk so that a crash loses none.

Each row is appended as one JSON line to `current.jsonl` (one write, so a SIGKILL leaves at most
a torn last line, which is skipped). Sealing renames that file to `sealed-<ms>-<tag>.jsonl`; a
sealed file becomes one segment per day, named after it, and is deleted only once they are
stored. A retry after a crash therefore writes the same segment names, and a store that already
has one keeps it (create-only): a row is never stored twice by its own writer.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from calltap.index.parquet import row_line
from calltap.storage import private_directories

CURRENT = "current.jsonl"
SEALED = re.compile(r"sealed-(?P<ms>[0-9]{13})-(?P<tag>[a-z0-9]{8})\.jsonl")


class Pending:
    """The spool of rows of one writer, in `directory` (created 0700)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._lock = threading.Lock()
        """Rows are appended from one thread and sealed from another."""

    def append(self, row: dict[str, Any]) -> None:
        line = row_line(row)
        with self._lock:
            if self._fd is None:
                private_directories(self.directory.parents[1], list(self.directory.parts[-2:]))
                self._fd = os.open(self.directory / CURRENT,
                                   os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
                if _ends_torn(self._fd):
                    line = b"\n" + line
            os.write(self._fd, line)

    def seal(self) -> None:
        """Close the current file (rows appended from now on start a new one) and seal it.
        All under the lock: a row appended between the close and the rename would open the
        file about to be sealed, and keep writing to it after its segment was made."""
        with self._lock:
            self.close()
            current = self.directory / CURRENT
            try:
                if current.stat().st_size == 0:
                    current.unlink()
                    return
            except FileNotFoundError:
                return
            name = f"sealed-{int(time.time() * 1000):013d}-{secrets.token_hex(4)}.jsonl"
            os.replace(current, self.directory / name)

    def sealed(self) -> list[Path]:
        """Sealed files, oldest first (an earlier run's included)."""
        try:
            return sorted(entry for entry in self.directory.iterdir()
                          if SEALED.fullmatch(entry.name))
        except FileNotFoundError:
            return []

    def rows_waiting(self) -> int:
        return sum(len(by_day) for path in self.sealed()
                   for by_day in read_sealed(path).values())

    def close(self) -> None:
        """Close the current file (sealing it is `seal`'s job)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_sealed(path: Path) -> dict[str, list[bytes]]:
    """A sealed file's whole rows (JSON lines), by day; torn or unreadable lines skipped."""
    by_day: dict[str, list[bytes]] = defaultdict(list)
    for line in path.read_bytes().split(b"\n"):
        day = _day_of(line)
        if day is not None:
            by_day[day].append(line + b"\n")
    return dict(by_day)


def seal_time_and_tag(path: Path) -> tuple[int, str]:
    match = SEALED.fullmatch(path.name)
    if match is None:
        raise ValueError(f"not a sealed file: {path.name}")
    return int(match["ms"]), match["tag"]


def _ends_torn(fd: int) -> bool:
    """Whether a file a killed writer left ends mid-line: the next row must start a line of its
    own, or it would be read as part of the torn one and lost."""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def _day_of(line: bytes) -> str | None:
    if not line.strip():
        return None
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    day = row.get("day") if isinstance(row, dict) else None
    return day if isinstance(day, str) and len(day) == 10 else None
