"""Which pairs a command works through, asked of the index: since when, which codes, routes and
verdicts, newest first.

`scan`, `report` and `replay` select pairs here and then fetch only the pairs they open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

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


@dataclass(slots=True)
class Tally:
    """A summary of rows, counted by the engine: verdicts, codes (each pair's distinct codes),
    and each pair that is not equal (or clean), oldest first, with its start."""

    verdicts: dict[str, int]
    codes: dict[str, int]
    not_equal: list[tuple[Any, dict[str, Any]]]


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
        f"SELECT started_at, day || '/' || stored_as, {KIND}, verdict,"
        f" list_sort(list_distinct(codes)) FROM pairs WHERE {where}"
        f" AND verdict NOT IN ({', '.join('?' * len(FINE))})"
        " ORDER BY started_at NULLS FIRST, stored_as", [*values, *FINE])
    return Tally(verdicts, codes, [
        (started, {"capture": name, "kind": kind, "verdict": verdict, "codes": codes or []})
        for started, name, kind, verdict, codes in listed])
