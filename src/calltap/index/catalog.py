"""The index of a recordings location, loaded into an embedded DuckDB as the view `pairs`.

`refresh()` costs what changed: it lists the segments (a bucket's are fetched once into a local
cache: segments are immutable), loads the ones not loaded yet, and adds the rows no segment
holds yet (a local tree's spooled rows, and its pairs that have no row at all: a tree written
before the index, or one `calltap index rebuild` has not seen). Rows are only ever added, each
pair once (by day and the key it is stored as): a row written twice, or a pair in a segment and
in the compacted segment that replaced it, is read once. A segment that cannot be read is
skipped and named in `problems`; `calltap index rebuild` gives its pairs rows again.

DuckDB never downloads or loads an extension here: it reads local files only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import orjson

from calltap.index import layout
from calltap.index.gaps import Gaps
from calltap.index.parquet import connect, json_columns
from calltap.index.rows import COLUMNS
from calltap.index.writer import REJECTED
from calltap.storage import Storage, is_bucket

FETCHES_AT_ONCE = 16
SEGMENTS_AT_ONCE = 256
NOTHING_LOADED = datetime.max.replace(tzinfo=UTC)
"""`complete_since` before the first refresh: no row is known to be loaded."""
RELISTS = 3
"""How often one refresh lists again when segments vanish under it (merged meanwhile)."""
FIRST_BATCH = 32
"""The first batch of a cold load is smaller: the newest pairs (the first page) come first."""
PENDING = "pending"
TABLE = f"""CREATE TABLE _rows ({", ".join(f'"{name}" {kind}' for name, kind in COLUMNS.items())},
  _batch INTEGER NOT NULL)"""
"""`_batch` numbers the inserts in the order they were made: the live list follows it (a
sequence numbering each row instead costs DuckDB as much as reading the rows)."""
KEY = "day, stored_as"


@dataclass(slots=True)
class Loaded:
    """What one refresh added."""

    segments: int = 0
    rows: int = 0
    skipped: list[str] = field(default_factory=list)
    more: bool = False
    """Segments listed and not loaded yet remain (a refresh asked for fewer batches)."""


class Catalog:
    """`pairs` over every row of one location's index; used from one thread at a time."""

    def __init__(self, location: str | Path, *, cache: Path | None = None,
                 fill_gaps: bool = True, legs_only: bool = False, first_day: str | None = None,
                 threads: int | None = None) -> None:
        """`fill_gaps`: a local tree's pairs without a row are read from their pair.json (and,
        with `legs_only`, a capture with no pair.json at all gets a `recorded` row);
        `first_day`: days before it are not read."""
        self.location = str(location)
        self.bucket = is_bucket(self.location)
        self.segments = SegmentFiles(self.location, cache, first_day)
        self.storage = self.segments.storage
        self.root = None if self.bucket else Path(self.location)
        self.db = connect(threads=threads)
        self.db.execute(TABLE)
        self.db.execute("CREATE VIEW pairs AS SELECT * EXCLUDE (_batch) FROM _rows")
        self._batch = 0
        self.loaded: set[str] = set()
        self.problems: dict[str, str] = {}
        """Segments skipped, by key, with why."""
        self.first_day = first_day
        self.gaps = Gaps(self.root, legs_only=legs_only, first_day=first_day) \
            if fill_gaps and self.root is not None else None
        self.lock = threading.Lock()
        """One refresh at a time."""
        self._cursors = threading.local()
        self._todo: list[layout.Segment] = []
        """Listed, not loaded yet, newest first."""
        self.complete_since: datetime | None = NOTHING_LOADED
        """While segments remain to load: every row that started at or after this is loaded
        (see `_complete_since`). None once everything listed is loaded."""

    def close(self) -> None:
        self.segments.close()
        self.db.close()

    def refresh(self, batches: int | None = None) -> Loaded:
        """Load what the location holds that is not loaded yet; with `batches`, at most that
        many batches of `SEGMENTS_AT_ONCE` segments, newest first (`more` says whether some
        remain: the next refresh goes on from there without listing again)."""
        with self.lock:
            done = Loaded()
            if not self._todo:
                self._list()
            relists = RELISTS
            while self._todo and (batches is None or batches > 0):
                size = SEGMENTS_AT_ONCE if self.loaded else min(FIRST_BATCH, SEGMENTS_AT_ONCE)
                batch, self._todo = self._todo[:size], self._todo[size:]
                files = self.segments.files(batch)
                self._load_segments(files, done)
                if len(files) < len(batch) and relists:
                    # Gone since they were listed: merged into a segment stored before they
                    # were deleted, which a new listing names (its rows would be missed else).
                    relists -= 1
                    self._list()
                if self._todo:
                    self.complete_since = _complete_since(self._todo[0])
                batches = None if batches is None else batches - 1
            done.more = bool(self._todo)
            if done.more:
                return done
            if self.root is not None:
                self._load_pending(done)
            if self.gaps is not None:
                done.rows += self._insert_rows(self.gaps.rows(self._stored_keys))
            self.complete_since = None
            return done

    def _list(self) -> None:
        """What to load next: every segment listed and not loaded yet, newest first."""
        self._todo = [segment for segment in self.segments.listed()
                      if segment.key not in self.loaded]
        self.segments.prefetch(self._todo)

    def query(self, sql: str, values: list[object] | None = None) -> list[tuple]:
        """Rows of `sql`, on a cursor of the calling thread's own: a query reads what is
        loaded while a refresh loads more on another thread."""
        cursor = getattr(self._cursors, "cursor", None)
        if cursor is None:
            cursor = self._cursors.cursor = self.db.cursor()
        return cursor.execute(sql, values or []).fetchall()

    def _load_segments(self, files: list[tuple[str, Path]], done: Loaded) -> None:
        """`SEGMENTS_AT_ONCE` files a read (a day of per-minute segments read at once would
        hold all of them in memory); a read that fails is tried again file by file, so that
        only the file DuckDB cannot read is skipped."""
        for start in range(0, len(files), SEGMENTS_AT_ONCE):
            self._load_batch(files[start:start + SEGMENTS_AT_ONCE], done)

    def _load_batch(self, files: list[tuple[str, Path]], done: Loaded) -> None:
        try:
            done.rows += self._insert_files([path for _, path in files])
            self.loaded.update(key for key, _ in files)
            done.segments += len(files)
            return
        except duckdb.Error:
            pass
        for key, path in files:
            try:
                done.rows += self._insert_files([path])
            except duckdb.Error as error:
                self.problems[key] = _first_line(error)
                done.skipped.append(key)
                if self.segments.cache is not None:
                    path.unlink(missing_ok=True)
                continue
            self.loaded.add(key)
            done.segments += 1

    def _insert_files(self, paths: list[Path]) -> int:
        """Rows of `paths` not loaded yet, each pair once; all or none (one transaction).
        Streamed from the files into the table (no sort, no copy in between): pairs loaded
        before are left out by a hash join, and a pair two of these files hold (rare: two
        compactions at once, a rebuild beside a writer) is read once afterwards."""
        files = [str(path) for path in paths]
        present = {row[0] for row in self.db.execute(
            "DESCRIBE SELECT * FROM read_parquet(?, union_by_name=true)", [files]).fetchall()}
        return self._insert_from("read_parquet(?, union_by_name=true)", [files], present)

    def _insert_from(self, source: str, values: list[object], present: set[str]) -> int:
        names = ", ".join(f'"{name}"' for name in COLUMNS)
        batch = self._batch + 1
        self.db.execute("BEGIN")
        try:
            row = self.db.execute(
                f"INSERT INTO _rows ({names}, _batch) SELECT {_select_present(present)},"
                f" {batch} FROM {source} n WHERE NOT EXISTS (SELECT 1 FROM _rows r"
                f" WHERE r.day = n.day AND r.stored_as = n.stored_as)", values).fetchone()
            count = (int(row[0]) if row else 0) - self._drop_duplicates(batch)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._batch = batch
        return count

    def _drop_duplicates(self, batch: int) -> int:
        """Rows of a pair that one insert (`batch`) loaded twice, but the first; how many were
        dropped. The join kept out every pair loaded before, and duplicates are rare: they are
        looked for first, which is cheaper than numbering every row of the batch."""
        twice = self.db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM _rows WHERE _batch = ?"
            " GROUP BY day, stored_as HAVING count(*) > 1)", [batch]).fetchone()
        if not twice or not twice[0]:
            return 0
        row = self.db.execute(
            "DELETE FROM _rows WHERE rowid IN (SELECT rowid FROM (SELECT rowid, row_number()"
            " OVER (PARTITION BY day, stored_as ORDER BY rowid) AS n FROM _rows"
            " WHERE _batch = ?) WHERE n > 1)", [batch]).fetchone()
        return int(row[0]) if row else 0

    # -- rows no segment holds yet ---------------------------------------------------------------

    def _load_pending(self, done: Loaded) -> None:
        assert self.root is not None
        directory = self.root / layout.INDEX / PENDING
        try:
            # One file's torn last line (a writer killed mid-row) must not join the next file's
            # first row: files are joined on a line break of their own.
            lines = b"\n".join(path.read_bytes() for path in sorted(directory.glob("*.jsonl"))
                                if not path.name.startswith(REJECTED))
        except OSError:
            return
        rows = []
        for line in lines.split(b"\n"):
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        try:
            done.rows += self._insert_rows(rows)
        except duckdb.Error:
            # A row of the wrong types (a hand-edited spool) costs itself, not the others.
            for row in rows:
                with contextlib.suppress(duckdb.Error):
                    done.rows += self._insert_rows([row])

    def _insert_rows(self, rows: list[dict]) -> int:
        if not rows:
            return 0
        path = _scratch()
        try:
            path.write_bytes(b"\n".join(orjson.dumps(row, option=orjson.OPT_UTC_Z)
                                        for row in rows))
            return self._insert_from(
                f"read_json(?, format='newline_delimited', columns={json_columns()})",
                [str(path)], set(COLUMNS))
        finally:
            path.unlink(missing_ok=True)

    def _stored_keys(self, day: str) -> set[str]:
        return {key for (key,) in self.db.execute(
            "SELECT stored_as FROM _rows WHERE day = ?", [day]).fetchall()}


class SegmentFiles:
    """A location's segments as local files: listed newest first, a local tree's read where
    they are, a bucket's fetched once into a cache (segments are immutable), FETCHES_AT_ONCE
    at a time."""

    def __init__(self, location: str, cache: Path | None, first_day: str | None) -> None:
        self.location = location
        self.storage = Storage(location) if is_bucket(location) else None
        self.cache = cache or (default_cache(location) if self.storage is not None else None)
        self.first_day = first_day
        self._fetcher: ThreadPoolExecutor | None = None
        self._fetching: dict[str, Future[None]] = {}
        """Segments being fetched into the cache, by key."""

    def close(self) -> None:
        if self._fetcher is not None:
            self._fetcher.shutdown(wait=True, cancel_futures=True)

    def listed(self) -> list[layout.Segment]:
        """Every segment the location holds, newest first."""
        if self.storage is not None:
            keys: Iterator[str] = self.storage.keys_now(prefix=layout.INDEX + "/")
        else:
            base = Path(self.location)
            keys = (str(path.relative_to(base)) for path in
                    (base / layout.INDEX).glob("day=*/*" + layout.SUFFIX))
        found = [segment for segment in map(layout.parse, keys) if segment is not None
                 and (self.first_day is None or segment.day >= self.first_day)]
        by_seal = sorted(found, key=lambda segment: segment.countdown)
        return sorted(by_seal, key=lambda segment: segment.day, reverse=True)

    def files(self, new: list[layout.Segment]) -> list[tuple[str, Path]]:
        """The local files of `new` segments (a bucket's fetched into the cache first); a
        segment deleted since it was listed has none."""
        if self.storage is None:
            here = [(segment.key, Path(self.location) / segment.key) for segment in new]
            return [(key, path) for key, path in here if path.is_file()]
        assert self.cache is not None
        self.prefetch(new)
        for segment in new:
            self._fetching.pop(segment.key).result()
        wanted = [(segment.key, self.cache / segment.key) for segment in new]
        return [(key, path) for key, path in wanted if path.is_file()]

    def prefetch(self, segments: list[layout.Segment]) -> None:
        """Start fetching `segments` not in the cache, in order (newest first): the fetches of
        later batches run while earlier ones load. Nothing for a local tree."""
        if self.cache is None:
            return
        if self._fetcher is None:
            self._fetcher = ThreadPoolExecutor(FETCHES_AT_ONCE,
                                               thread_name_prefix="calltap-index-fetch")
        for segment in segments:
            path = self.cache / segment.key
            if segment.key not in self._fetching:
                self._fetching[segment.key] = self._fetcher.submit(
                    lambda key=segment.key, path=path: None if path.is_file()
                    else self._fetch(key, path))

    def _fetch(self, key: str, path: Path) -> None:
        assert self.storage is not None
        data = self.storage.read_now(key)
        if data is None:
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_name(path.name + f".{os.getpid()}.fetching")
        temporary.write_bytes(data)
        os.replace(temporary, path)


def _complete_since(following: layout.Segment) -> datetime:
    """The start from which every row is loaded when `following` is the next segment to load.
    A row is in a segment of its own day sealed after it started, and segments load newest day
    first, newest seal first: every row left to load started on an earlier day, or on that
    day no later than `following`'s seal."""
    next_midnight = datetime.fromisoformat(following.day).replace(tzinfo=UTC) + timedelta(days=1)
    sealed = datetime.fromtimestamp(following.sealed_ms / 1000, UTC)
    return min(sealed, next_midnight) + timedelta(milliseconds=1)


def default_cache(location: str) -> Path:
    """Where a bucket's segments are kept on this machine: the user's cache directory."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(location.encode()).hexdigest()[:16]
    return base / "calltap" / "index" / digest


def _select_present(present: set[str]) -> str:
    """Every column of a row, null where the new rows have none (a segment of an older
    format)."""
    return ", ".join(f'n."{name}"' if name in present else f"NULL::{kind}"
                     for name, kind in COLUMNS.items())


def _scratch() -> Path:
    handle, name = tempfile.mkstemp(prefix="calltap-rows-", suffix=".json")
    os.close(handle)
    return Path(name)


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__

