"""The pair list's rows, read from the index of pairs: a page never walks the recordings.

`PairList` answers the list, its filters and counts, and the live stream's "what is new" from a
`Catalog` (the index's rows in DuckDB: a bucket's segments, a local tree's segments, its spooled
rows and its pairs without a row). Rows are only ever added; each carries the number of the
load that added it (`seq`), which the live stream follows.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from calltap.index.catalog import Catalog, Loaded
from calltap.view.query import Filters
from calltap.view.summary import Summary

SELECTED = ("day, stored_as, request_id, started_at, route, model, dialect_upstream,"
            " dialect_downstream, pairing, attempts, verdict, codes, bytes_upstream,"
            " bytes_downstream, duration_ms")
NEWEST_FIRST = "started_at DESC NULLS LAST, _batch DESC"


class PairList:
    """The list of one recordings location (a directory or `s3://…`)."""

    def __init__(self, location: str | Path, *, cache: Path | None = None) -> None:
        self.catalog = Catalog(location, cache=cache)

    def close(self) -> None:
        self.catalog.close()

    def refresh(self, batches: int | None = None) -> Loaded:
        """Load what is new (at most `batches` batches of segments, newest first); an index
        DuckDB cannot read costs the list its newest rows, never the page."""
        try:
            return self.catalog.refresh(batches)
        except duckdb.Error as error:
            return Loaded(skipped=[str(error).splitlines()[0] if str(error) else "unreadable"])

    def page(self, filters: Filters, *, limit: int, offset: int = 0) -> list[Summary]:
        """Pairs newest first."""
        where, values = filters.where()
        return [_summary(row) for row in self.catalog.query(
            f"SELECT {SELECTED} FROM _rows WHERE {where} ORDER BY {NEWEST_FIRST}"
            " LIMIT ? OFFSET ?", [*values, limit, offset])]

    @property
    def loading(self) -> bool:
        """Older segments are still being loaded: counts are partial."""
        return self.catalog.complete_since is not None

    def answers(self, filters: Filters, rows: int) -> bool:
        """Whether the newest `rows` rows `filters` keeps are all loaded: everything is, or
        that many started at or after the time from which every row is loaded."""
        since = self.catalog.complete_since
        if since is None:
            return True
        where, values = filters.where()
        found = self.catalog.query(
            f"SELECT count(*) FROM (SELECT 1 FROM _rows WHERE {where} AND started_at >= ?"
            " LIMIT ?)", [*values, since, rows])
        return int(found[0][0]) >= rows

    def count(self, filters: Filters) -> int:
        where, values = filters.where()
        return int(self.catalog.query(f"SELECT count(*) FROM _rows WHERE {where}", values)[0][0])

    def latest(self) -> int:
        """The `seq` of the rows loaded last (0 for none): `since` starts there."""
        return int(self.catalog.query("SELECT coalesce(max(_batch), 0) FROM _rows")[0][0])

    def since(self, seq: int, filters: Filters) -> list[tuple[int, Summary]]:
        """Rows loaded after `seq`, oldest first, with their `seq`."""
        where, values = filters.where()
        rows = self.catalog.query(f"SELECT _batch, {SELECTED} FROM _rows WHERE {where}"
                                  " AND _batch > ? ORDER BY _batch, started_at NULLS FIRST",
                                  [*values, seq])
        return [(row[0], _summary(row[1:])) for row in rows]

    def find(self, request_id: str) -> Summary | None:
        """The newest pair stored under this key or given this request id."""
        rows = self.catalog.query(
            f"SELECT {SELECTED} FROM _rows WHERE stored_as = ? OR request_id = ?"
            f" ORDER BY (stored_as = ?) DESC, {NEWEST_FIRST} LIMIT 1",
            [request_id, request_id, request_id])
        return _summary(rows[0]) if rows else None


def _summary(row: tuple[Any, ...]) -> Summary:
    (day, key, request_id, started, route, model, up, down, pairing, attempts, verdict, codes,
     bytes_up, bytes_down, duration) = row
    return Summary(day=day, key=key, request_id=request_id, started_at=_iso(started),
                   endpoint=route, model=model, dialect_up=up, dialect_down=down,
                   pairing=pairing, attempts=attempts, verdict=verdict,
                   codes=tuple(sorted(set(codes or ()))), bytes_up=bytes_up,
                   bytes_down=bytes_down, duration_ms=duration)


def _iso(moment: datetime | None) -> str | None:
    """A row's time as pair.json writes it (UTC, `Z`)."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
