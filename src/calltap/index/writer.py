"""Sealed rows to segments in the store: the one place index segments are written.

A sealed file gives one segment per day it holds rows of, named by its seal time, the replica
and its tag, written create-only; the file is deleted once every one is stored. A store that
fails leaves the file for the next try; an object already there under that name is this writer's
own earlier attempt.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from calltap.index import layout
from calltap.index.parquet import encode_lines
from calltap.index.pending import Pending, read_sealed, seal_time_and_tag
from calltap.storage import Storage


@dataclass(slots=True)
class Flushed:
    segments: int = 0
    rows: int = 0


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
                segments, rows = await self._store(path)
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
