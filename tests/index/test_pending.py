"""pending: the spool of rows survives a torn last line and keeps sealed files until stored."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from calltap.index import layout
from calltap.index.parquet import decode, row_line
from calltap.index.pending import CURRENT, Pending, read_sealed
from calltap.index.writer import SegmentWriter
from calltap.storage import Storage, StoreError


def row(key: str, day: str = "2026-11-30") -> dict[str, object]:
    return {"request_id": key, "stored_as": key, "day": day, "verdict": "equal",
            "codes": [], "severities": [], "sides": [], "format": 1}


def test_a_torn_last_line_is_skipped_and_the_whole_ones_kept(tmp_path: Path) -> None:
    pending = Pending(tmp_path / "pending")
    pending.append(row("a"))
    pending.append(row("b", "2026-12-01"))
    pending.close()
    with (tmp_path / "pending" / CURRENT).open("ab") as spool:
        spool.write(row_line(row("torn"))[:25])  # a SIGKILL in the middle of a write
    pending.seal()
    (sealed,) = pending.sealed()
    by_day = read_sealed(sealed)
    assert sorted(by_day) == ["2026-11-30", "2026-12-01"]
    assert [len(lines) for _, lines in sorted(by_day.items())] == [1, 1]
    assert pending.rows_waiting() == 2


def test_sealed_files_survive_a_restart_and_a_store_that_fails(tmp_path: Path) -> None:
    directory = tmp_path / "pending"
    first = Pending(directory)
    first.append(row("a"))
    first.seal()
    first.append(row("b"))
    first.close()
    restarted = Pending(directory)
    restarted.seal()
    assert len(restarted.sealed()) == 2
    writer = SegmentWriter(Storage(tmp_path / "tree"), restarted, "r1")
    (tmp_path / "tree" / layout.INDEX).write_text("a file where the index directory goes")
    with pytest.raises(StoreError):
        asyncio.run(writer.flush())
    assert len(restarted.sealed()) == 2
    (tmp_path / "tree" / layout.INDEX).unlink()
    done = asyncio.run(writer.flush())
    assert (done.segments, done.rows) == (2, 2)
    assert restarted.sealed() == []
    keys = sorted(str(p.relative_to(tmp_path / "tree"))
                  for p in (tmp_path / "tree" / layout.INDEX).rglob("*.parquet"))
    assert [layout.parse(key).replica for key in keys] == ["r1", "r1"]  # type: ignore[union-attr]
    stored = sorted(r["stored_as"] for key in keys
                    for r in decode((tmp_path / "tree" / key).read_bytes()))
    assert stored == ["a", "b"]
