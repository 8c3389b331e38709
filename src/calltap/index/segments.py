"""A location's segments as local files: listed, fetched, read into DuckDB, checked.

`calltap index rebuild` and `calltap index compact` work on whole segments. Both fetch them
through `calltap.storage` into a scratch directory (a local tree's too: a segment another
compaction deletes while it is read is then a missing object, never a half-read file), read
them with DuckDB, and set aside the ones DuckDB cannot read (a corrupt or truncated upload).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from calltap.index import layout
from calltap.index.parquet import connect
from calltap.storage import Storage, is_bucket

FETCHES_AT_ONCE = 16


class BadSource(ValueError):
    """A SOURCE that is neither a directory nor an s3:// URL calltap accepts."""


def open_source(source: str) -> Storage:
    """The store of SOURCE: an existing directory or s3://BUCKET[/PREFIX] (BadSource else)."""
    if is_bucket(source):
        try:
            return Storage(source)
        except ValueError as error:
            raise BadSource(str(error)) from None
    path = Path(source)
    if not path.is_dir():
        raise BadSource(f"cannot read '{source}': "
                        + ("no such directory" if not path.exists() else "not a directory"))
    return Storage(path)


def listed(storage: Storage, day: str | None = None) -> list[layout.Segment]:
    """The segments of the location (of one day), newest first."""
    prefix = layout.day_prefix(day) if day else layout.INDEX + "/"
    found = [segment for segment in map(layout.parse, storage.keys_now(prefix=prefix))
             if segment is not None]
    return sorted(found, key=lambda s: (s.day, s.countdown, s.key), reverse=True)


@dataclass(slots=True)
class Fetched:
    """Segments copied into a scratch directory, by key; the ones gone before they were read."""

    files: dict[str, Path] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    vanished: list[str] = field(default_factory=list)


def fetch(storage: Storage, segments: Iterable[layout.Segment], directory: Path) -> Fetched:
    """Copy each segment into `directory` (16 at once); a StoreError propagates."""
    done = Fetched()

    def one(segment: layout.Segment) -> None:
        data = storage.read_now(segment.key)
        if data is None:
            done.vanished.append(segment.key)
            return
        path = directory / segment.key.replace("/", "_")
        path.write_bytes(data)
        done.files[segment.key] = path
        done.sizes[segment.key] = len(data)

    with ThreadPoolExecutor(FETCHES_AT_ONCE) as pool:
        list(pool.map(one, segments))
    return done


def load(db: duckdb.DuckDBPyConnection, table: str, files: dict[str, Path]) -> list[str]:
    """Every row of the readable `files` into a new table `table`; the keys of the others.

    All files are read in one go; only when that fails is each read on its own (every column
    decoded, as a reader would) to find the ones that cannot be read."""
    unreadable: list[str] = []
    good = dict(files)
    try:
        _create(db, table, list(good.values()))
        return unreadable
    except duckdb.Error:
        pass
    for key, path in sorted(files.items()):
        try:
            _create(db, "_check", [path])
        except duckdb.Error:
            unreadable.append(key)
            del good[key]
    db.execute("DROP TABLE IF EXISTS _check")
    _create(db, table, list(good.values()))
    return unreadable


def count_rows(path: Path) -> int:
    """The rows of a Parquet file, every column decoded (a damaged file raises duckdb.Error)."""
    db = connect(threads=1)
    try:
        _create(db, "_count", [path])
        row = db.execute("SELECT count(*) FROM _count").fetchone()
    finally:
        db.close()
    return int(row[0]) if row else 0


def _create(db: duckdb.DuckDBPyConnection, table: str, paths: list[Path]) -> None:
    if not paths:
        db.execute(f"CREATE OR REPLACE TEMP TABLE {table} (day VARCHAR, stored_as VARCHAR)")
        return
    db.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT * FROM"
               " read_parquet(?, union_by_name=true)", [[str(path) for path in paths]])


def sql_text(text: str) -> str:
    """`text` inside a SQL string literal (a path in SET or COPY, which take no parameters)."""
    return text.replace("'", "''")
