"""An incremental SQLite index of pair summaries, so that a page never walks the tree.

`refresh()` costs what changed: it stats each day directory and rescans only those whose
modification time moved (a pair directory created or removed changes its day's mtime), plus the
captures seen before their pair.json was readable (still being compared, or a half-written file),
which it retries until they are. A day modified within `SETTLE_NS` of its last scan is scanned
again next time, for a change that landed in the same mtime tick. pair.json is written once,
atomically, so an indexed pair is never read again.

The index file lives outside the recordings tree (the view only reads recordings); it holds only
what the list shows, and is rebuilt from scratch when its schema changes.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path

from calltap import recordings
from calltap.view.summary import Summary, summarize

SCHEMA_VERSION = "2"
SETTLE_NS = 2_000_000_000
COLUMNS = tuple(field.name for field in fields(Summary))
SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE days (day TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, scanned_ns INTEGER NOT NULL);
CREATE TABLE pairs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  day TEXT NOT NULL, key TEXT NOT NULL, request_id TEXT NOT NULL, started_at TEXT,
  endpoint TEXT, model TEXT, dialect_up TEXT, dialect_down TEXT, pairing TEXT, attempts INTEGER,
  verdict TEXT NOT NULL, codes TEXT NOT NULL, bytes_up INTEGER, bytes_down INTEGER,
  duration_ms REAL, UNIQUE (day, key));
CREATE INDEX pairs_newest ON pairs (started_at DESC, seq DESC);
CREATE INDEX pairs_verdict ON pairs (verdict, started_at DESC, seq DESC);
CREATE INDEX pairs_request ON pairs (request_id);
CREATE INDEX pairs_key ON pairs (key);
CREATE TABLE pair_codes (code TEXT NOT NULL, started_at TEXT, seq INTEGER NOT NULL,
  PRIMARY KEY (code, seq)) WITHOUT ROWID;
CREATE INDEX pair_codes_newest ON pair_codes (code, started_at DESC, seq DESC);
CREATE TABLE pending (day TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (day, key));
"""
COLUMNS_OF_P = ", ".join(f"p.{name}" for name in COLUMNS)


@dataclass(frozen=True, slots=True)
class Filters:
    """What the list is narrowed to: a verdict, a finding code, a request id prefix."""

    verdict: str | None = None
    code: str | None = None
    prefix: str | None = None

    def query(self) -> tuple[str, str, list[str]]:
        """The FROM and WHERE clauses (pairs as `p`) and the ORDER BY of the newest first. A
        code filter reads pair_codes, whose index is in that order, so that a page of a common
        code never sorts or scans every pair."""
        clauses, values = [], []
        if self.code:
            source = "pair_codes c JOIN pairs p ON p.seq = c.seq"
            order = "c.started_at DESC, c.seq DESC"
            clauses.append("c.code = ?")
            values.append(self.code)
        else:
            source, order = "pairs p", "p.started_at DESC, p.seq DESC"
        if self.verdict:
            clauses.append("p.verdict = ?")
            values.append(self.verdict)
        if self.prefix:
            clauses.append("(p.key >= ? AND p.key < ?)")
            values += [self.prefix, self.prefix + "\U0010ffff"]
        where = " AND ".join(clauses) or "1"
        return f" FROM {source} WHERE {where}", order, values


@dataclass(slots=True)
class Changes:
    """What one refresh did."""

    added: int = 0
    removed: int = 0
    days_scanned: int = 0


class PairIndex:
    """The index of one recordings tree, in the SQLite file `path` (":memory:" for none).
    Thread-safe: one connection behind a lock."""

    def __init__(self, root: Path, path: Path | str = ":memory:") -> None:
        self.root = root
        self._lock = threading.Lock()
        self._db = _open(path)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def refresh(self) -> Changes:
        """Bring the index up to date with the tree, at the cost of what changed."""
        changes = Changes()
        with self._lock, self._db:
            on_disk = dict(_days(self.root))
            stored = {day: (mtime, scanned) for day, mtime, scanned in
                      self._db.execute("SELECT day, mtime_ns, scanned_ns FROM days")}
            for day in stored.keys() - on_disk.keys():
                changes.removed += self._forget_day(day)
            for day, mtime in sorted(on_disk.items()):
                known = stored.get(day)
                if known is None or known[0] != mtime or known[1] - mtime < SETTLE_NS:
                    self._scan_day(day, mtime, changes)
            self._retry_pending(changes)
        return changes

    def page(self, filters: Filters, *, limit: int, offset: int = 0) -> list[Summary]:
        """Pairs newest first."""
        source, order, values = filters.query()
        sql = f"SELECT {COLUMNS_OF_P}{source} ORDER BY {order} LIMIT ? OFFSET ?"
        return self._rows(sql, [*values, limit, offset])

    def count(self, filters: Filters) -> int:
        source, _order, values = filters.query()
        if filters.code and not (filters.verdict or filters.prefix):
            source = " FROM pair_codes c WHERE c.code = ?"
        with self._lock:
            return self._db.execute(f"SELECT count(*){source}", values).fetchone()[0]

    def latest(self) -> int:
        """The sequence number of the pair indexed last (0 for none): `since` starts there."""
        with self._lock:
            return self._db.execute("SELECT coalesce(max(seq), 0) FROM pairs").fetchone()[0]

    def since(self, seq: int, filters: Filters) -> list[tuple[int, Summary]]:
        """Pairs indexed after `seq`, oldest first, with their sequence numbers."""
        source, _order, values = filters.query()
        sql = f"SELECT p.seq, {COLUMNS_OF_P}{source} AND p.seq > ? ORDER BY p.seq"
        with self._lock:
            rows = self._db.execute(sql, [*values, seq]).fetchall()
        return [(row[0], _summary(row[1:])) for row in rows]

    def find(self, request_id: str) -> Summary | None:
        """The newest pair with this capture key or request id."""
        sql = (f"SELECT {COLUMNS_OF_P} FROM pairs p WHERE p.key = ? OR p.request_id = ? "
               "ORDER BY p.started_at DESC, p.seq DESC LIMIT 1")
        rows = self._rows(sql, [request_id, request_id])
        return rows[0] if rows else None

    def _rows(self, sql: str, values: list[object]) -> list[Summary]:
        with self._lock:
            return [_summary(row) for row in self._db.execute(sql, values)]

    def _scan_day(self, day: str, mtime: int, changes: Changes) -> None:
        scanned = time.time_ns()
        on_disk = set(_keys(self.root / day))
        indexed = {key for (key,) in self._db.execute("SELECT key FROM pairs WHERE day = ?",
                                                      (day,))}
        pending = {key for (key,) in self._db.execute("SELECT key FROM pending WHERE day = ?",
                                                      (day,))}
        for key in (indexed | pending) - on_disk:
            changes.removed += self._forget(day, key)
        self._index(day, sorted(on_disk - indexed - pending), changes)
        self._db.execute("INSERT OR REPLACE INTO days VALUES (?, ?, ?)", (day, mtime, scanned))
        changes.days_scanned += 1

    def _retry_pending(self, changes: Changes) -> None:
        for day, key in self._db.execute("SELECT day, key FROM pending").fetchall():
            if recordings.pair_mtime_ns(self.root / day / key) is not None:
                self._index(day, [key], changes)

    def _index(self, day: str, keys: Iterable[str], changes: Changes) -> None:
        for key in keys:
            summary = read_summary(self.root, day, key)
            if summary is None:
                self._db.execute("INSERT OR IGNORE INTO pending VALUES (?, ?)", (day, key))
                continue
            self._db.execute("DELETE FROM pending WHERE day = ? AND key = ?", (day, key))
            seq = self._db.execute(
                f"INSERT INTO pairs ({', '.join(COLUMNS)}) VALUES "
                f"({', '.join('?' * len(COLUMNS))})", _values(summary)).lastrowid
            self._db.executemany("INSERT INTO pair_codes VALUES (?, ?, ?)",
                                 [(code, summary.started_at, seq) for code in summary.codes])
            changes.added += 1

    def _forget(self, day: str, key: str) -> int:
        self._db.execute("DELETE FROM pending WHERE day = ? AND key = ?", (day, key))
        row = self._db.execute("SELECT seq FROM pairs WHERE day = ? AND key = ?",
                               (day, key)).fetchone()
        if row is None:
            return 0
        self._db.execute("DELETE FROM pair_codes WHERE seq = ?", row)
        self._db.execute("DELETE FROM pairs WHERE seq = ?", row)
        return 1

    def _forget_day(self, day: str) -> int:
        keys = [key for (key,) in self._db.execute(
            "SELECT key FROM pairs WHERE day = ? UNION SELECT key FROM pending WHERE day = ?",
            (day, day))]
        removed = sum(self._forget(day, key) for key in keys)
        self._db.execute("DELETE FROM days WHERE day = ?", (day,))
        return removed


def read_summary(root: Path, day: str, key: str) -> Summary | None:
    """A capture's list row; None while its pair.json is missing or unreadable."""
    directory = root / day / key
    try:
        document = recordings.read_pair(directory)
    except recordings.PairUnreadable:
        return None
    legs = recordings.pair_legs(directory)
    request = recordings.request_body(directory, legs.get("downstream") or legs.get("upstream"))
    return summarize(day, key, document, request)


def default_location(root: Path) -> Path:
    """Where the index of `root` lives: the user's cache directory, one file per tree."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "calltap"
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8")).hexdigest()[:24]
    return cache / f"view-{digest}.sqlite"


def _open(path: Path | str) -> sqlite3.Connection:
    if path != ":memory:":
        Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL" if path != ":memory:" else "PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = NORMAL")
    version = _version(db)
    if version != SCHEMA_VERSION:
        _rebuild(db)
    db.isolation_level = "DEFERRED"
    return db


def _version(db: sqlite3.Connection) -> str | None:
    try:
        row = db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
    except sqlite3.DatabaseError:
        return None
    return row[0] if row else None


def _rebuild(db: sqlite3.Connection) -> None:
    tables = [name for (name,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    for table in tables:
        db.execute(f'DROP TABLE "{table}"')
    db.executescript(SCHEMA)
    db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))


def _days(root: Path) -> Iterator[tuple[str, int]]:
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if recordings.is_day(entry.name) and entry.is_dir(follow_symlinks=False):
            yield entry.name, entry.stat(follow_symlinks=False).st_mtime_ns


def _keys(day: Path) -> Iterator[str]:
    try:
        entries = list(os.scandir(day))
    except OSError:
        return
    for entry in entries:
        if recordings.is_key(entry.name) and entry.is_dir(follow_symlinks=False):
            yield entry.name


def _values(summary: Summary) -> list[object]:
    return [" ".join(summary.codes) if name == "codes" else getattr(summary, name)
            for name in COLUMNS]


def _summary(row: tuple[object, ...]) -> Summary:
    values = dict(zip(COLUMNS, row, strict=True))
    values["codes"] = tuple(str(values["codes"]).split())
    return Summary(**values)  # type: ignore[arg-type]
