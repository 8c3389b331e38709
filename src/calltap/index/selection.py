"""Which pairs a command works through, asked of the index: since when, which codes, routes and
verdicts, newest first.

`scan`, `report` and `replay` select pairs here and then fetch only the pairs they open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import orjson

from calltap.index.catalog import Catalog
from calltap.index.rows import COLUMNS

DURATION = re.compile(r"([0-9]{1,6})([smhdw])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `24h`, `7d`, `2w`: ValueError for anything else."""
    match = DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"expected a duration such as 30m, 24h or 7d, got {text!r}")
    return timedelta(**{UNITS[match[2]]: int(match[1])})


@dataclass(frozen=True, slots=True)
class Wanted:
    """The pairs asked for; an empty field asks nothing of that column."""

    since: timedelta | None = None
    codes: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()
    day: str | None = None

    def first_day(self, now: datetime) -> str | None:
        """The oldest day a wanted pair can be stored under (segments before it are not read)."""
        days = [self.day] if self.day else []
        if self.since is not None:
            days.append((now - self.since).astimezone(UTC).date().isoformat())
        return max(days) if days else None

    def where(self, now: datetime) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        values: list[Any] = []
        if self.since is not None:
            clauses.append("started_at >= ?")
            values.append(now - self.since)
        if self.day:
            clauses.append("day = ?")
            values.append(self.day)
        if self.codes:
            clauses.append("list_has_any(codes, ?::VARCHAR[])")
            values.append(list(self.codes))
        for column, wanted in (("route", self.routes), ("verdict", self.verdicts)):
            if wanted:
                clauses.append(f"{column} IN ({', '.join('?' * len(wanted))})")
                values += list(wanted)
        return " AND ".join(clauses) or "true", values


def selected(catalog: Catalog, wanted: Wanted, now: datetime | None = None
             ) -> list[dict[str, Any]]:
    """The wanted rows, newest first."""
    where, values = wanted.where(now or datetime.now(UTC))
    names = list(COLUMNS)
    rows = catalog.query(f"SELECT {', '.join(names)} FROM pairs WHERE {where}"
                         " ORDER BY started_at DESC NULLS LAST, stored_as DESC", values)
    return [dict(zip(names, row, strict=True)) for row in rows]


FINE = ("equal", "clean")
KIND = ("CASE WHEN dialect_upstream IS NOT NULL AND dialect_downstream IS NOT NULL THEN 'pair'"
        " WHEN dialect_downstream IS NOT NULL THEN 'downstream' ELSE 'upstream' END")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Listed(NamedTuple):
    """A pair that is not equal (or clean), as `scan --json` lists it: its place in the list
    (pairs with no start first, then oldest first) and its entry as JSON. The engine writes the
    JSON of each of a million rows faster than Python builds the dicts."""

    order: tuple[bool, int, str]
    json: str

    @classmethod
    def of(cls, started: datetime | None, entry: dict[str, Any]) -> Listed:
        micros = 0 if started is None else (started - EPOCH) // timedelta(microseconds=1)
        return cls((started is not None, micros, entry["capture"]), orjson.dumps(entry).decode())

    def entry(self) -> dict[str, Any]:
        return orjson.loads(self.json)


@dataclass(slots=True)
class Tally:
    """A summary of rows, counted by the engine: verdicts, codes (each pair's distinct codes),
    and each pair that is not equal (or clean), in the order `Listed` gives."""

    verdicts: dict[str, int]
    codes: dict[str, int]
    not_equal: list[Listed]


def tally(catalog: Catalog, wanted: Wanted, now: datetime | None = None,
          leave_out: tuple[str, ...] = ()) -> Tally:
    """The wanted rows summarized, those with a verdict in `leave_out` left out."""
    where, values = wanted.where(now or datetime.now(UTC))
    if leave_out:
        where += f" AND verdict NOT IN ({', '.join('?' * len(leave_out))})"
        values = [*values, *leave_out]
    verdicts = dict(catalog.query(
        f"SELECT verdict, count(*) FROM pairs WHERE {where} GROUP BY verdict", values))
    codes = dict(catalog.query(
        f"SELECT code, count(*) FROM (SELECT unnest(list_distinct(codes)) AS code FROM pairs"
        f" WHERE {where}) GROUP BY code", values))
    listed = catalog.query(
        f"SELECT started_at IS NOT NULL, coalesce(epoch_us(started_at), 0),"
        f" day || '/' || stored_as AS capture, to_json({{'capture': capture, 'kind': {KIND},"
        f" 'verdict': verdict, 'codes': coalesce(list_sort(list_distinct(codes)), [])}})"
        f"::VARCHAR FROM pairs WHERE {where} AND verdict NOT IN ({', '.join('?' * len(FINE))})"
        " ORDER BY started_at NULLS FIRST, capture", [*values, *FINE])
    return Tally(verdicts, codes, [Listed((started, micros, capture), text)
                                   for started, micros, capture, text in listed])
