"""Sealed rows to segments in the store: the one place index segments are written.

A sealed file gives one segment per day it holds rows of, named by its seal time, the replica
and its tag, written create-only; the file is deleted once every one is stored. A store that
fails leaves the file for the next try; an object already there under that name is this writer's
own earlier attempt. A file DuckDB refuses (a hand-edited or corrupt spool) is set aside, so it
never stops the rows after it.

Once the sealed files are stored, the writer merges its own segments of a day as `tiers` says
(readers pay per object): each merge is stored create-only before its inputs are deleted, so a
failure or a crash leaves rows twice at worst (read once), never lost. It remembers its segments
in memory only: what an earlier run left is for `calltap index compact`.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from calltap.index import layout, tiers
from calltap.index.parquet import RowsRejected, encode_lines
from calltap.index.pending import Pending, read_sealed, seal_time_and_tag
from calltap.storage import Storage, StoreError

REJECTED = "rejected-"
"""The prefix a sealed file no segment can hold is renamed with: kept for a person to read,
never retried, never read as rows."""
MEMORY_LIMIT = "256MB"
"""DuckDB's memory for a merge beside the relay (one thread); past it, it spills to disk."""


class MergeFailed(Exception):
    """DuckDB or the scratch disk failed a merge: its inputs stay, due again next flush."""


@dataclass(slots=True)
class Flushed:
    segments: int = 0
    rows: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    """Sealed files no segment could hold, set aside (their new name, why)."""
    merged: int = 0
    """Segments written by merging this writer's own (their inputs deleted)."""
    merge_failed: str | None = None
    """Why a merge failed this round (the store, DuckDB or the scratch disk): it is due again
    next round, and one that keeps failing leaves a replica's segments unmerged."""


class SegmentWriter:
    """Writes the sealed rows of `pending` to `storage` as `replica`."""

    def __init__(self, storage: Storage, pending: Pending, replica: str) -> None:
        self.storage = storage
        self.pending = pending
        self.replica = layout.replica_name(replica)
        self._lock = asyncio.Lock()
        self._own: set[layout.Segment] = set()
        """The segments of today and yesterday this process stored and has not merged."""

    async def flush(self) -> Flushed:
        """Seal what is waiting, store every sealed file, then merge what is due; a StoreError
        while storing leaves the rest (and every merge) for the next flush."""
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
            done.merged, done.merge_failed = await self._merge_due()
            return done

    async def _store(self, path: Path) -> tuple[int, int]:
        by_day = await asyncio.to_thread(read_sealed, path)
        sealed_ms, tag = seal_time_and_tag(path)
        rows = 0
        for day, lines in sorted(by_day.items()):
            data = await asyncio.to_thread(encode_lines, b"".join(lines))
            segment = layout.segment(day, self.replica, sealed_ms, tag)
            await self.storage.put_new(segment.key, data)
            self._own.add(segment)
            rows += len(lines)
        path.unlink(missing_ok=True)
        return len(by_day), rows

    async def _merge_due(self) -> tuple[int, str | None]:
        """Every merge due, until none is (a merge can make the next level due); how many were
        stored. A failing store or merge ends the round: what is left is due again at the next
        flush, and the flush does not fail for it (its segments are stored)."""
        yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
        self._own = {segment for segment in self._own if segment.day >= yesterday}
        merged = 0
        try:
            while groups := tiers.due(sorted(self._own)):
                for group in groups:
                    merged += await self._merge(group)
        except (StoreError, MergeFailed) as error:
            return merged, str(error) or type(error).__name__
        return merged, None

    async def _merge(self, group: list[layout.Segment]) -> int:
        """One group merged into the segment `tiers` names, and its inputs deleted: 1 when
        done. Each outcome changes what is remembered, so the round ends."""
        target = tiers.merged(group)
        found = await asyncio.gather(*(self.storage.read(segment.key) for segment in group))
        if any(data is None for data in found):
            return await self._input_gone(group, target)
        inputs = {segment.key: data for segment, data in zip(group, found, strict=True)
                  if data is not None}
        data, unreadable = await asyncio.to_thread(merge_segments, inputs)
        if data is None:
            self._own.difference_update(s for s in group if s.key in unreadable)
            return 0
        await self.storage.put_new(target.key, data)
        await self._replace(group, target)
        return 1

    async def _input_gone(self, group: list[layout.Segment], target: layout.Segment) -> int:
        """An input deleted under the writer: by this writer, whose deletions a failing store
        cut short after the merge was stored (then finish them), or by a compaction (then the
        group is given up, and the rest of it left for the next compaction)."""
        if await self.storage.read(target.key) is None:
            self._own.difference_update(group)
            return 0
        await self._replace(group, target)
        return 1

    async def _replace(self, group: list[layout.Segment], target: layout.Segment) -> None:
        """Delete the inputs of a stored merge, and remember the merge in their place."""
        for segment in group:
            await self.storage.delete(segment.key)
        self._own.difference_update(group)
        self._own.add(target)


def merge_segments(inputs: dict[str, bytes]) -> tuple[bytes | None, list[str]]:
    """The segment holding the rows of `inputs` (segments' bytes by key), each pair once; or
    None and the keys of the inputs DuckDB cannot read (left in place, unmerged: `calltap index
    rebuild` gives their pairs rows). In one thread, within MEMORY_LIMIT; MergeFailed when
    DuckDB or the scratch disk fails (out of memory, of space)."""
    import duckdb  # loaded with the first merge, not when serve starts

    from calltap.index import segments

    try:
        with tempfile.TemporaryDirectory(prefix="calltap-merge-") as scratch:
            files = {key: Path(scratch, f"input-{n}.parquet") for n, key in enumerate(inputs)}
            for key, path in files.items():
                path.write_bytes(inputs[key])
            db = segments.merging(Path(scratch), MEMORY_LIMIT, threads=1)
            try:
                unreadable = segments.load(db, "_in", files)
                if unreadable:
                    return None, unreadable
                segments.keep_once(db, "_in", "_out")
                target = Path(scratch, "merged.parquet")
                segments.write_rows(db, "_out", target)
            finally:
                db.close()
            return target.read_bytes(), []
    except (duckdb.Error, OSError) as error:
        raise MergeFailed(str(error).strip().splitlines()[0][:300]) from error
