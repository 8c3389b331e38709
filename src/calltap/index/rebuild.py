"""Rows for the stored pairs no readable segment names: what `calltap index rebuild` writes.

A tree written before the index, a bucket a replica filled before it had the index, a segment
lost or damaged (a corrupt or truncated upload is skipped by every reader, so its pairs look
unindexed): each such pair gets a row again, made from its pair.json (and the client's request
when pair.json does not name the model), written as new segments beside the others, create-only.
A pair some segment already names is left alone; a row written twice (a writer still running)
is read once, so running it while replicas write is safe.
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from calltap import recordings
from calltap.index import layout, segments
from calltap.index.gaps import row_for
from calltap.index.parquet import connect, encode_rows
from calltap.index.rows import row_of
from calltap.storage import Storage, StoreError, is_bucket

REPLICA = "rebuild"
"""The writer name in the segments rebuild writes."""
ROWS_PER_SEGMENT = 100_000
READS_AT_ONCE = 16
LISTINGS = 3
MEMORY_LIMIT = "512MB"
"""DuckDB's memory while it reads the segments; past it, it spills into a scratch directory."""
"""Listings of the segments at most, when a compaction deletes some while they are read."""


@dataclass(slots=True)
class Rebuilt:
    """What a rebuild found and did."""

    pairs: int = 0
    """Pairs with a pair.json."""
    indexed: int = 0
    """Of those, the ones a readable segment names."""
    unreadable_pairs: int = 0
    """Pairs whose pair.json cannot be read (no row can be made)."""
    rows: int = 0
    written: list[str] = field(default_factory=list)
    """Keys of the segments written."""
    unreadable: list[str] = field(default_factory=list)
    """Keys of the segments DuckDB cannot read."""


def rebuild(storage: Storage, *, dry_run: bool = False) -> Rebuilt:
    """Rows for every pair of `storage` without one; none written when `dry_run`."""
    done = Rebuilt()
    known, done.unreadable = indexed(storage)
    rows_by_day: dict[str, list[dict[str, Any]]] = {}
    for day, keys in stored_pairs(storage):
        done.pairs += len(keys)
        missing = [key for key in keys if key not in known.get(day, ())]
        done.indexed += len(keys) - len(missing)
        rows = rows_of(storage, day, missing)
        done.unreadable_pairs += len(missing) - len(rows)
        fresh = [row for row in rows if row["stored_as"] not in known.get(day, ())]
        done.indexed += len(rows) - len(fresh)
        if fresh:
            rows_by_day[day] = fresh
    for day, rows in sorted(rows_by_day.items()):
        done.rows += len(rows)
        if not dry_run:
            done.written += write_rows(storage, day, rows)
    return done


def indexed(storage: Storage) -> tuple[dict[str, set[str]], list[str]]:
    """The keys each day's readable segments name, and the segments that cannot be read."""
    db = connect(memory_limit=MEMORY_LIMIT)
    try:
        with tempfile.TemporaryDirectory(prefix="calltap-rebuild-") as scratch:
            db.execute(f"SET temp_directory = '{segments.sql_text(str(Path(scratch) / 'spill'))}'")
            files: dict[str, Path] = {}
            for _ in range(LISTINGS):
                wanted = [s for s in segments.listed(storage) if s.key not in files]
                fetched = segments.fetch(storage, wanted, Path(scratch))
                files.update(fetched.files)
                if not fetched.vanished:
                    break
            unreadable = segments.load(db, "_indexed", files)
            known: dict[str, set[str]] = {}
            for day, key in db.execute("SELECT DISTINCT day, stored_as FROM _indexed").fetchall():
                known.setdefault(day, set()).add(key)
            return known, unreadable
    finally:
        db.close()


def stored_pairs(storage: Storage) -> Iterator[tuple[str, list[str]]]:
    """(day, keys of its pairs that have a pair.json), day by day."""
    if not is_bucket(storage.location):
        root = Path(storage.location)
        for day in sorted(entry.name for entry in root.iterdir()
                          if recordings.is_day(entry.name) and entry.is_dir()):
            yield day, sorted(entry.name for entry in (root / day).iterdir()
                              if recordings.is_key(entry.name)
                              and (entry / recordings.PAIR_JSON).is_file())
        return
    days = [day for day in asyncio.run(storage.folders()) if recordings.is_day(day)]
    for day in days:
        keys = []
        for name in storage.keys_now(prefix=f"{day}/"):
            parts = name.split("/")
            if (len(parts) == 3 and parts[2] == recordings.PAIR_JSON
                    and recordings.is_key(parts[1])):
                keys.append(parts[1])
        yield day, sorted(keys)


def rows_of(storage: Storage, day: str, keys: list[str]) -> list[dict[str, Any]]:
    """The rows of the pairs `keys` of `day`; a pair whose pair.json cannot be read has none."""
    if not is_bucket(storage.location):
        root = Path(storage.location)
        found = (row_for(root, day, key) for key in keys)
        return [row for row in found if row is not None]
    with ThreadPoolExecutor(READS_AT_ONCE) as pool:
        found = pool.map(lambda key: bucket_row(storage, day, key), keys)
        return [row for row in found if row is not None]


def bucket_row(storage: Storage, day: str, key: str) -> dict[str, Any] | None:
    """The row of the pair `day/key` of a bucket: its pair.json, and the client's request only
    when pair.json does not say the model."""
    data = storage.read_now(f"{day}/{key}/{recordings.PAIR_JSON}")
    document = _document(data)
    if document is None:
        return None
    stored_as = str(document.get("stored_as") or key)
    row = row_of(document, None, day=day, stored_as=stored_as, replica="")
    if row["model"] is not None:
        return row
    legs = document.get("legs") if isinstance(document.get("legs"), dict) else {}
    down = legs.get("downstream") if isinstance(legs.get("downstream"), dict) else {}
    name = down.get("request_file")
    if not isinstance(name, str) or not recordings.is_leg_file(name):
        return row
    request = storage.read_now(f"{day}/{key}/{name}")
    return row_of(document, request, day=day, stored_as=stored_as, replica="")


def write_rows(storage: Storage, day: str, rows: list[dict[str, Any]]) -> list[str]:
    """`rows` of `day` as new segments (at most ROWS_PER_SEGMENT rows each); their keys."""
    written = []
    for start in range(0, len(rows), ROWS_PER_SEGMENT):
        key = layout.segment(day, REPLICA, int(time.time() * 1000), secrets.token_hex(4)).key
        if not storage.put_new_now(key, encode_rows(rows[start:start + ROWS_PER_SEGMENT])):
            raise StoreError(f"{key} already exists")
        written.append(key)
    return written


def _document(data: bytes | None) -> dict[str, Any] | None:
    """A pair.json's document, or None when it is not one this version reads."""
    if data is None:
        return None
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict):
        return None
    version = document.get("format", recordings.FORMAT)
    return document if isinstance(version, int) and version <= recordings.FORMAT else None
