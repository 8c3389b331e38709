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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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
PENDING = "pending"
TABLE = f"""CREATE TABLE _rows ({", ".join(f'"{name}" {kind}' for name, kind in COLUMNS.items())},
  _seq BIGINT DEFAULT nextval('_seq'))"""
KEY = "day, stored_as"


@dataclass(slots=True)
class Loaded:
    """What one refresh added."""

    segments: int = 0
    rows: int = 0
    skipped: list[str] = field(default_factory=list)


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
        self.storage = Storage(self.location) if self.bucket else None
        self.root = None if self.bucket else Path(self.location)
        self.cache = cache or (default_cache(self.location) if self.bucket else None)
        self.db = connect(threads=threads)
        self.db.execute("CREATE SEQUENCE _seq START 1")
        self.db.execute(TABLE)
        self.db.execute("CREATE VIEW pairs AS SELECT * EXCLUDE (_seq) FROM _rows")
        self.loaded: set[str] = set()
        self.problems: dict[str, str] = {}
        """Segments skipped, by key, with why."""
        self.first_day = first_day
        self.gaps = Gaps(self.root, legs_only=legs_only, first_day=first_day) \
            if fill_gaps and self.root is not None else None
        self.lock = threading.Lock()

    def close(self) -> None:
        self.db.close()

    def refresh(self) -> Loaded:
        """Load what the location holds that is not loaded yet."""
        with self.lock:
            done = Loaded()
            files = self._new_segment_files()
            self._load_segments(files, done)
            if self.root is not None:
                self._load_pending(done)
            if self.gaps is not None:
                done.rows += self._insert_rows(self.gaps.rows(self._stored_keys))
            return done

    def query(self, sql: str, values: list[object] | None = None) -> list[tuple]:
        with self.lock:
            return self.db.execute(sql, values or []).fetchall()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.db.cursor()

    # -- segments ------------------------------------------------------------------------------

    def segment_keys(self) -> list[layout.Segment]:
        """Every segment the location holds, newest first."""
        if self.storage is not None:
            keys: Iterator[str] = self.storage.keys_now(prefix=layout.INDEX + "/")
        else:
            base = Path(self.location)
            keys = (str(path.relative_to(base)) for path in
                    (base / layout.INDEX).glob("day=*/*" + layout.SUFFIX))
        found = [segment for segment in map(layout.parse, keys) if segment is not None
                 and (self.first_day is None or segment.day >= self.first_day)]
        return sorted(found, key=lambda s: (s.day, s.countdown), reverse=True)

    def _new_segment_files(self) -> list[tuple[str, Path]]:
        new = [segment for segment in self.segment_keys() if segment.key not in self.loaded]
        if self.storage is None:
            return [(segment.key, Path(self.location) / segment.key) for segment in new]
        assert self.cache is not None
        wanted = [(segment.key, self.cache / segment.key) for segment in new]
        missing = [(key, path) for key, path in wanted if not path.is_file()]
        with ThreadPoolExecutor(FETCHES_AT_ONCE) as pool:
            list(pool.map(lambda item: self._fetch(*item), missing))
        return [(key, path) for key, path in wanted if path.is_file()]

    def _fetch(self, key: str, path: Path) -> None:
        assert self.storage is not None
        data = self.storage.read_now(key)
        if data is None:
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_name(path.name + f".{os.getpid()}.fetching")
        temporary.write_bytes(data)
        os.replace(temporary, path)

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
                if self.cache is not None:
                    path.unlink(missing_ok=True)
                continue
            self.loaded.add(key)
            done.segments += 1

    def _insert_files(self, paths: list[Path]) -> int:
        """Rows of `paths` not loaded yet, each pair once; all or none (one transaction)."""
        self.db.execute("BEGIN")
        try:
            self.db.execute(
                "CREATE OR REPLACE TEMP TABLE _new AS SELECT DISTINCT ON (day, stored_as) *"
                " FROM read_parquet(?, union_by_name=true) ORDER BY day, stored_as",
                [[str(path) for path in paths]])
            count = self._insert_new()
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return count

    def _insert_new(self) -> int:
        names = ", ".join(f'"{name}"' for name in COLUMNS)
        row = self.db.execute(
            f"INSERT INTO _rows ({names}) SELECT {_select_present(self.db)} FROM _new n"
            f" WHERE NOT EXISTS (SELECT 1 FROM _rows r WHERE r.day = n.day"
            f" AND r.stored_as = n.stored_as)").fetchone()
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
            self.db.execute(
                "CREATE OR REPLACE TEMP TABLE _new AS SELECT DISTINCT ON (day, stored_as) *"
                f" FROM read_json(?, format='newline_delimited', columns={json_columns()})"
                " ORDER BY day, stored_as", [str(path)])
            return self._insert_new()
        finally:
            path.unlink(missing_ok=True)

    def _stored_keys(self, day: str) -> set[str]:
        return {key for (key,) in self.db.execute(
            "SELECT stored_as FROM _rows WHERE day = ?", [day]).fetchall()}


def default_cache(location: str) -> Path:
    """Where a bucket's segments are kept on this machine: the user's cache directory."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(location.encode()).hexdigest()[:16]
    return base / "calltap" / "index" / digest


def _select_present(db: duckdb.DuckDBPyConnection) -> str:
    """Every column of a row, null where the new rows have none (a segment of an older
    format)."""
    present = {row[0] for row in db.execute("DESCRIBE _new").fetchall()}
    return ", ".join(f'n."{name}"' if name in present else f"NULL::{kind}"
                     for name, kind in COLUMNS.items())


def _scratch() -> Path:
    handle, name = tempfile.mkstemp(prefix="calltap-rows-", suffix=".json")
    os.close(handle)
    return Path(name)


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__

