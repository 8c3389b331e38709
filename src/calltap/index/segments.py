"""A location's segments as local files: listed, fetched, read into DuckDB, checked.

`calltap index rebuild` and `calltap index compact` work on whole segments. Both fetch them
through `calltap.storage` into a scratch directory (a local tree's too: a segment another
compaction deletes while it is read is then a missing object, never a half-read file), read
them with DuckDB, and set aside the ones DuckDB cannot read (a corrupt or truncated upload).
Compaction and a writer merging its own segments merge them the same way (`merging`,
`keep_once`, `write_rows`).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from calltap.index import layout
from calltap.index.parquet import ORDER, ROW_GROUP_SIZE, connect
from calltap.index.rows import COLUMNS
from calltap.storage import Storage, is_bucket

FETCHES_AT_ONCE = 16
CHUNK = 256
"""Segments read in one statement."""


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

    The table has every column of this format, and any other a segment brings (a newer
    format's); a column a segment lacks (an older format's) is null in its rows. Files are read
    `CHUNK` at a time (a day holds thousands: read at once, their readers alone would fill the
    memory); only when a chunk fails is each of its files read on its own (every column
    decoded, as a reader would) to find the ones that cannot be read."""
    columns = ", ".join(f'"{name}" {kind}' for name, kind in COLUMNS.items())
    db.execute(f"CREATE OR REPLACE TEMP TABLE {table} ({columns})")
    unreadable: list[str] = []
    items = sorted(files.items())
    for start in range(0, len(items), CHUNK):
        chunk = items[start:start + CHUNK]
        try:
            _append(db, table, [path for _, path in chunk])
            continue
        except duckdb.Error:
            pass
        for key, path in chunk:
            try:
                _append(db, table, [path])
            except duckdb.Error:
                unreadable.append(key)
    return unreadable


def _append(db: duckdb.DuckDBPyConnection, table: str, paths: list[Path]) -> None:
    """The rows of `paths` added to `table` (one statement: all or none)."""
    names = [str(path) for path in paths]
    source = "read_parquet(?, union_by_name=true)"
    have = {row[0] for row in db.execute(f"DESCRIBE {table}").fetchall()}
    for name, kind, *_ in db.execute(f"DESCRIBE SELECT * FROM {source}", [names]).fetchall():
        if name not in have:
            db.execute(f'ALTER TABLE {table} ADD COLUMN "{_identifier(name)}" {kind}')
    db.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {source}", [names])


def _identifier(name: str) -> str:
    return name.replace('"', '""')


def merging(scratch: Path, memory_limit: str, threads: int | None = None
            ) -> duckdb.DuckDBPyConnection:
    """A DuckDB to merge segments in: past `memory_limit` it spills into `scratch`, and it keeps
    no insertion order (merged rows are sorted when written)."""
    db = connect(threads=threads, memory_limit=memory_limit)
    db.execute(f"SET temp_directory = '{sql_text(str(scratch / 'spill'))}'")
    db.execute("SET preserve_insertion_order = false")
    return db


def keep_once(db: duckdb.DuckDBPyConnection, source: str, target: str) -> int:
    """A new table `target` of the rows of `source`, each pair once (by day and key: a row
    written twice, or held by a segment and by its merge), numbered `_n` in a segment's order;
    how many rows it holds."""
    db.execute(f"CREATE TEMP TABLE {target} AS SELECT *, row_number() OVER (ORDER BY {ORDER})"
               f" AS _n FROM (SELECT DISTINCT ON (day, stored_as) * FROM {source}"
               " ORDER BY day, stored_as, finished_at)")
    row = db.execute(f"SELECT count(*) FROM {target}").fetchone()
    return int(row[0]) if row else 0


def write_rows(db: duckdb.DuckDBPyConnection, table: str, path: Path, first: int = 0,
               count: int | None = None) -> None:
    """Rows `first` + 1 to `first` + `count` (all after `first` without it) of a table
    `keep_once` made, as a segment at `path`: sorted, zstd, in row groups of ROW_GROUP_SIZE."""
    last = "" if count is None else f" AND _n <= {first + count}"
    db.execute(f"COPY (SELECT * EXCLUDE (_n) FROM {table} WHERE _n > {first}{last}"
               f" ORDER BY _n) TO '{sql_text(str(path))}' (FORMAT parquet, COMPRESSION zstd,"
               f" ROW_GROUP_SIZE {ROW_GROUP_SIZE})")


def count_rows(path: Path) -> int:
    """The rows of a Parquet file, every column decoded (a damaged file raises duckdb.Error)."""
    db = connect(threads=1)
    try:
        db.execute("CREATE TEMP TABLE _count AS SELECT * FROM read_parquet(?)", [str(path)])
        row = db.execute("SELECT count(*) FROM _count").fetchone()
    finally:
        db.close()
    return int(row[0]) if row else 0


def sql_text(text: str) -> str:
    """`text` inside a SQL string literal (a path in SET or COPY, which take no parameters)."""
    return text.replace("'", "''")
