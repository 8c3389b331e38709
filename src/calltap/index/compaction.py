"""A day's segments merged into few: what `calltap index compact` does.

Each replica writes a segment about once a minute, so a day ends with thousands of small files,
and every reader pays per file. Compaction reads a day's segments, drops duplicate rows (by day
and key), and writes the rows back as one segment (several past `rows_per_segment` rows), then
deletes the inputs. The order of those steps is what makes it safe to run at any time:

- Only segments listed at the start are inputs: a segment a replica writes meanwhile is not one,
  so it is never deleted.
- The merged segments are written create-only under a fresh name whose time is the newest
  input's seal time (the newest-first order of names holds: no row in it is newer), and read
  back whole before any input is deleted; a deletion that finds its key gone is fine.
- Two compactions of one day at once both write merged segments with the same rows (readers
  read each pair once) and delete the same inputs. One that finds an input gone before it has
  written anything (the other deleted it) lists the day again and starts over, and after a few
  tries stops, having written and deleted nothing.
- A segment DuckDB cannot read (corrupt, truncated) is left where it is and reported;
  `calltap index rebuild` gives its pairs rows again.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from calltap.index import layout, segments
from calltap.storage import Storage

REPLICA = "compact"
"""The writer name in the segments compaction writes."""
ROWS_PER_SEGMENT = 1_000_000
ATTEMPTS = 3
MEMORY_LIMIT = "512MB"
"""DuckDB's memory while merging; past it, it spills into the scratch directory."""


class CompactionError(Exception):
    """A merged segment that did not read back as written: nothing was deleted."""


@dataclass(slots=True)
class DayCompacted:
    """What compacting one day did."""

    day: str
    segments_in: int = 0
    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    written: list[str] = field(default_factory=list)
    deleted: int = 0
    unreadable: list[str] = field(default_factory=list)
    gave_way: bool = False
    """Inputs kept vanishing (another compaction at work): nothing written or deleted."""
    seconds: float = 0.0

    @property
    def bytes_per_row(self) -> float | None:
        return self.bytes_out / self.rows_out if self.rows_out else None


def closed_days(storage: Storage, today: str) -> list[str]:
    """The days before `today` that have more than one segment."""
    count: dict[str, int] = {}
    for segment in segments.listed(storage):
        count[segment.day] = count.get(segment.day, 0) + 1
    return sorted(day for day, n in count.items() if n > 1 and day < today)


def compact_day(storage: Storage, day: str,
                rows_per_segment: int = ROWS_PER_SEGMENT) -> DayCompacted:
    """Merge the segments of `day` (when it has more than one readable)."""
    started = time.monotonic()
    done = DayCompacted(day, gave_way=True)
    for _ in range(ATTEMPTS):
        inputs = segments.listed(storage, day)
        if len(inputs) < 2:
            done = DayCompacted(day, segments_in=len(inputs))
            break
        with tempfile.TemporaryDirectory(prefix="calltap-compact-") as scratch:
            fetched = segments.fetch(storage, inputs, Path(scratch))
            if fetched.vanished:
                continue
            done = _merge(storage, day, inputs, fetched, Path(scratch), rows_per_segment)
            break
    done.seconds = time.monotonic() - started
    return done


def _merge(storage: Storage, day: str, inputs: list[layout.Segment],
           fetched: segments.Fetched, scratch: Path, rows_per_segment: int) -> DayCompacted:
    db = segments.merging(scratch, MEMORY_LIMIT)
    try:
        unreadable = segments.load(db, "_in", fetched.files)
        readable = [s for s in inputs if s.key not in unreadable]
        done = DayCompacted(day, segments_in=len(readable), unreadable=unreadable,
                            bytes_in=sum(fetched.sizes[s.key] for s in readable))
        if len(readable) < 2:
            return done
        done.rows_in = _count(db, "_in")
        done.rows_out = segments.keep_once(db, "_in", "_out")
        newest = min(readable, key=lambda s: s.countdown)
        for first in range(0, done.rows_out, rows_per_segment):
            path = scratch / f"merged-{first}.parquet"
            segments.write_rows(db, "_out", path, first, rows_per_segment)
            expected = min(rows_per_segment, done.rows_out - first)
            key = _store(storage, day, newest.sealed_ms, path, expected, scratch)
            done.written.append(key)
            done.bytes_out += path.stat().st_size
    finally:
        db.close()
    for segment in readable:
        storage.delete_now(segment.key)
        done.deleted += 1
    return done


def _store(storage: Storage, day: str, sealed_ms: int, path: Path, rows: int,
           scratch: Path) -> str:
    """Write `path` create-only under a fresh name, and check that the store gives back the same
    bytes with `rows` rows; its key."""
    data = path.read_bytes()
    key = layout.segment(day, REPLICA, sealed_ms, secrets.token_hex(8)).key
    while not storage.put_new_now(key, data):
        key = layout.segment(day, REPLICA, sealed_ms, secrets.token_hex(8)).key
    back = storage.read_now(key)
    check = scratch / "read-back.parquet"
    if back is not None:
        check.write_bytes(back)
    try:
        readable = back == data and segments.count_rows(check) == rows
    except duckdb.Error:
        readable = False
    if not readable:
        raise CompactionError(f"{key} did not read back as written; no input was deleted")
    return key


def _count(db: duckdb.DuckDBPyConnection, table: str) -> int:
    row = db.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0
