"""catalog: each pair read once, damaged segments skipped and named, older segments loaded."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tests.index import pairs

from calltap.index import layout
from calltap.index.catalog import Catalog
from calltap.index.parquet import connect, encode_rows
from calltap.index.rows import row_of

DAY = "2026-11-30"


def rows(keys: list[str], day: str = DAY, replica: str = "r1") -> list[dict[str, object]]:
    started = datetime.fromisoformat(f"{day}T10:00:00+00:00")
    return [row_of(pairs.document(key, started), pairs.request("gpt-4o"), day=day,
                   stored_as=key, replica=replica) for key in keys]


def put_segment(root: Path, data: bytes, *, sealed_ms: int, replica: str = "r1",
                day: str = DAY) -> str:
    key = layout.segment(day, replica, sealed_ms, "t1").key
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(data)
    return key


def loaded(root: Path) -> tuple[list[tuple[str, str]], Catalog]:
    catalog = Catalog(root, fill_gaps=False)
    catalog.refresh()
    return sorted(catalog.query("SELECT day, stored_as FROM pairs")), catalog


def test_a_row_written_twice_is_read_once(tmp_path: Path) -> None:
    put_segment(tmp_path, encode_rows(rows(["a", "b"])), sealed_ms=1000, replica="r1")
    put_segment(tmp_path, encode_rows(rows(["b", "c"])), sealed_ms=2000, replica="r2")
    found, catalog = loaded(tmp_path)
    assert found == [(DAY, "a"), (DAY, "b"), (DAY, "c")]
    put_segment(tmp_path, encode_rows(rows(["a", "c", "d"])), sealed_ms=3000, replica="r3")
    catalog.refresh()
    assert sorted(catalog.query("SELECT stored_as FROM pairs")) == [("a",), ("b",), ("c",),
                                                                    ("d",)]


def test_a_corrupt_and_a_truncated_segment_are_skipped_and_named(tmp_path: Path) -> None:
    good = encode_rows(rows(["a", "b"]))
    put_segment(tmp_path, good, sealed_ms=1000, replica="good")
    other = encode_rows(rows(["c", "d"]))
    truncated = put_segment(tmp_path, other[: len(other) // 2], sealed_ms=2000,
                            replica="truncated")
    corrupt = bytearray(encode_rows(rows(["e"])))
    corrupt[4:200] = bytes(196)  # the pages, not the footer: the file still looks like Parquet
    damaged = put_segment(tmp_path, bytes(corrupt), sealed_ms=3000, replica="corrupt")
    found, catalog = loaded(tmp_path)
    assert found == [(DAY, "a"), (DAY, "b")]
    assert sorted(catalog.problems) == sorted([truncated, damaged])
    assert all(catalog.problems.values())


def test_a_segment_of_an_older_format_loads_with_nulls_where_columns_are_missing(
        tmp_path: Path) -> None:
    key = layout.segment(DAY, "old", 1000, "t1").key
    (tmp_path / key).parent.mkdir(parents=True)
    db = connect()
    db.execute(f"COPY (SELECT 'old-1' AS request_id, 'old-1' AS stored_as, '{DAY}' AS day,"
               " 'diverged' AS verdict, ['DONE_MISSING'] AS codes)"
               f" TO '{tmp_path / key}' (FORMAT parquet)")
    db.close()
    put_segment(tmp_path, encode_rows(rows(["new-1"])), sealed_ms=2000)
    catalog = Catalog(tmp_path, fill_gaps=False)
    catalog.refresh()
    assert sorted(catalog.query(
        "SELECT stored_as, verdict, codes, model, replica, format FROM pairs")) == [
        ("new-1", "equal", [], "gpt-4o", "r1", 1),
        ("old-1", "diverged", ["DONE_MISSING"], None, None, None)]


def test_segments_merged_while_a_refresh_loads_are_read_from_the_merged_one(
        tmp_path: Path) -> None:
    """A compaction (or a replica merging its own) between two batches of one refresh: the
    inputs listed are gone, and their rows are read from the segment that replaced them."""
    keys = [f"k{number:02d}" for number in range(40)]
    listed = [put_segment(tmp_path, encode_rows(rows([key])), sealed_ms=1000 * (number + 1))
              for number, key in enumerate(keys)]
    catalog = Catalog(tmp_path, fill_gaps=False)
    assert catalog.refresh(batches=1).more
    oldest = listed[:8]
    put_segment(tmp_path, encode_rows(rows(keys[:8])), sealed_ms=8000, replica="compact")
    for key in oldest:
        (tmp_path / key).unlink()
    catalog.refresh()
    assert catalog.query("SELECT count(*), count(DISTINCT stored_as) FROM pairs") == [(40, 40)]
    assert catalog.problems == {}
    assert catalog.complete_since is None
