"""Sealed rows to segments in the store: the one place index segments are written.

A sealed file gives one segment per day it holds rows of, named by its seal time, the replica
and its tag, written create-only; the file is deleted once every one is stored. A store that
fails leaves the file for the next try; an object already there under that name is this writer's
own earlier attempt. A file DuckDB refuses (a hand-edited or corrupt spool) is set aside, so it
never stops the rows after it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from calltap.index import layout
from calltap.index.parquet import RowsRejected, encode_lines
from calltap.index.pending import Pending, read_sealed, seal_time_and_tag
from calltap.storage import Storage

REJECTED = "rejected-"
"""The prefix a sealed file no segment can hold is renamed with: kept for a person to read,
never retried, never read as rows."""


@dataclass(slots=True)
class Flushed:
    segments: int = 0
    rows: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    """Sealed files no segment could hold, set aside (their new name, why)."""


class SegmentWriter:
    """Writes the sealed rows of `pending` to `storage` as `replica`."""

    def __init__(self, storage: Storage, pending: Pending, replica: str) -> None:
        self.storage = storage
        self.pending = pending
        self.replica = layout.replica_name(replica)
        self._lock = asyncio.Lock()

    async def flush(self) -> Flushed:
        """Seal what is waiting and store every sealed file; a StoreError leaves the rest."""
        async with self._lock:
            self.pending.seal()
            done = Flushed()
            for path in self.pending.sealed():
                try:
                    segments, rows = await self._store(path)
                except RowsRejected as error:
                    aside = path.with_name(REJECTED + path.name)
                    path.rename(aside)
                    done.rejected.append((aside.name, str(error)))
                    continue
                done.segments += segments
                done.rows += rows
            return done

    async def _store(self, path: Path) -> tuple[int, int]:
        by_day = await asyncio.to_thread(read_sealed, path)
        sealed_ms, tag = seal_time_and_tag(path)
        rows = 0
        for day, lines in sorted(by_day.items()):
            data = await asyncio.to_thread(encode_lines, b"".join(lines))
            key = layout.segment(day, self.replica, sealed_ms, tag).key
            await self.storage.put_new(key, data)
            rows += len(lines)
        path.unlink(missing_ok=True)
        return len(by_day), rows
