"""What the index tests compare: the rows a `Catalog` reads, the rows a walk of every pair.json
makes (with `row_of`, as if the index did not exist), and the segments a location holds, each
read on its own (so a row stored twice is seen twice here, where the Catalog reads it once)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from calltap import recordings
from calltap.index import layout
from calltap.index.catalog import Catalog
from calltap.index.parquet import decode
from calltap.index.rows import COLUMNS, row_of
from calltap.storage import Storage

Key = tuple[str, str]
"""(day, stored_as): a pair, once."""


def normal(row: dict[str, Any]) -> dict[str, Any]:
    """A row as two readers can compare it: every column, times in UTC, lists as tuples."""
    out: dict[str, Any] = {}
    for name in COLUMNS:
        value = row.get(name)
        if isinstance(value, datetime):
            value = value.astimezone(UTC)
        elif isinstance(value, list):
            value = tuple(value)
        out[name] = value
    return out


def catalog_rows(location: str | Path, cache: Path, *, fill_gaps: bool = False
                 ) -> dict[Key, dict[str, Any]]:
    """Every row a fresh Catalog of `location` reads, by pair (a pair read twice fails)."""
    catalog = Catalog(location, cache=cache, fill_gaps=fill_gaps)
    try:
        catalog.refresh()
        assert not catalog.problems, catalog.problems
        cursor = catalog.db.execute("SELECT * FROM pairs")
        names = [column[0] for column in cursor.description]
        rows = [normal(dict(zip(names, values, strict=True))) for values in cursor.fetchall()]
    finally:
        catalog.close()
    by_key = {(row["day"], row["stored_as"]): row for row in rows}
    assert len(by_key) == len(rows), Counter((r["day"], r["stored_as"]) for r in rows)
    return by_key


def walked_rows(location: str | Path) -> dict[Key, dict[str, Any]]:
    """A row for every pair.json the location holds, made from it and its client request (the
    replica left empty: pair.json does not say which replica stored it)."""
    storage = Storage(str(location))
    rows: dict[Key, dict[str, Any]] = {}
    for key in storage.keys_now():
        parts = key.split("/")
        if len(parts) != 3 or parts[2] != recordings.PAIR_JSON or not recordings.is_day(parts[0]):
            continue
        day, stored = parts[0], parts[1]
        data = storage.read_now(key)
        assert data is not None, key
        document = orjson.loads(data)
        legs = document.get("legs") or {}
        name = (legs.get("downstream") or {}).get("request_file")
        request = storage.read_now(f"{day}/{stored}/{name}") if name else None
        rows[(day, stored)] = normal(row_of(document, request, day=day,
                                            stored_as=document.get("stored_as") or stored,
                                            replica=""))
    return rows


def without(row: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: value for name, value in row.items() if name not in names}


def segments(location: str | Path) -> dict[layout.Segment, list[dict[str, Any]]]:
    """Every segment of the location's index with its rows, each file read on its own."""
    storage = Storage(str(location))
    found: dict[layout.Segment, list[dict[str, Any]]] = {}
    for key in storage.keys_now(prefix=layout.INDEX + "/"):
        segment = layout.parse(key)
        if segment is None:
            continue
        data = storage.read_now(key)
        assert data is not None, key
        found[segment] = [normal(row) for row in decode(data)]
    return found


def segment_rows(location: str | Path) -> list[dict[str, Any]]:
    """Every row of every segment, duplicates included."""
    return [row for rows in segments(location).values() for row in rows]
