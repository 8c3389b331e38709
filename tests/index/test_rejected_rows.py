"""A spooled row DuckDB cannot type (a hand-edited or corrupt spool) costs itself, never the rows
after it: the writer sets its sealed file aside and goes on, the list reads the others."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from calltap.index.catalog import Catalog
from calltap.index.pending import Pending
from calltap.index.rows import row_of
from calltap.index.writer import REJECTED, SegmentWriter
from calltap.proxy.index_rows import pending_directory
from calltap.storage import Storage


def row(key: str) -> dict:
    document = {"request_id": key, "legs": {"downstream": {
        "path": "/v1/chat/completions", "started_at": "2026-12-05T10:00:00Z"}},
        "comparison": {"verdict": "equal", "findings": []}}
    return row_of(document, None, day="2026-12-05", stored_as=key, replica="r1")


def test_a_rejected_file_is_set_aside_and_the_next_rows_are_written(tmp_path: Path) -> None:
    pending = Pending(pending_directory(tmp_path))
    writer = SegmentWriter(Storage(tmp_path), pending, "r1")
    pending.append({**row("bad"), "attempts": 2**40})
    first = asyncio.run(writer.flush())
    assert first.segments == 0 and len(first.rejected) == 1
    assert first.rejected[0][0].startswith(REJECTED)
    pending.append(row("good"))
    second = asyncio.run(writer.flush())
    assert (second.segments, second.rows, second.rejected) == (1, 1, [])
    catalog = Catalog(tmp_path)
    catalog.refresh()
    assert catalog.query("SELECT stored_as FROM pairs") == [("good",)]


def test_a_spooled_row_of_the_wrong_type_costs_the_list_only_itself(tmp_path: Path) -> None:
    pending = Pending(pending_directory(tmp_path))
    pending.append(row("good-1"))
    pending.append({**row("bad"), "started_at": "not a time"})
    pending.append(row("good-2"))
    pending.close()
    catalog = Catalog(tmp_path)
    catalog.refresh()
    assert sorted(catalog.query("SELECT stored_as FROM pairs")) == [("good-1",), ("good-2",)]
    assert orjson.loads((pending.directory / "current.jsonl").read_bytes().split(b"\n")[1])[
        "stored_as"] == "bad"
