"""`calltap index rebuild` on a local tree: a row for each pair without one, and only those."""

from __future__ import annotations

from pathlib import Path

from tests.index import pairs

from calltap.index import layout
from calltap.index.catalog import Catalog

DAYS = {"2026-11-28": 40, "2026-11-29": 25}


def indexed(root: Path) -> tuple[list[tuple[str, str]], int, dict[str, str]]:
    """Every (day, key) the segments name (no gaps filled), the rows loaded, the problems."""
    catalog = Catalog(root, fill_gaps=False)
    done = catalog.refresh()
    try:
        return sorted(catalog.query("SELECT day, stored_as FROM pairs")), done.rows, dict(
            catalog.problems)
    finally:
        catalog.close()


def segment_files(root: Path) -> list[Path]:
    return sorted((root / layout.INDEX).glob("day=*/*.parquet"))


def test_a_tree_without_an_index_gets_one_row_per_pair_and_a_second_run_writes_nothing(
        tmp_path: Path) -> None:
    written = pairs.tree(tmp_path, DAYS)
    dry = pairs.calltap("index", "rebuild", str(tmp_path), "--dry-run")
    assert "65 pairs seen, 0 already indexed" in dry.stdout and "would write 65 rows" in dry.stdout
    assert segment_files(tmp_path) == []
    first = pairs.calltap("index", "rebuild", str(tmp_path))
    assert "wrote 65 rows in 2 segments" in first.stdout
    found, rows, problems = indexed(tmp_path)
    assert found == sorted(written) and rows == 65 and problems == {}
    assert {layout.parse(str(p.relative_to(tmp_path))).replica  # type: ignore[union-attr]
            for p in segment_files(tmp_path)} == {"rebuild"}
    second = pairs.calltap("index", "rebuild", str(tmp_path))
    assert "65 pairs seen, 65 already indexed" in second.stdout
    assert "wrote 0 rows in 0 segments" in second.stdout
    assert len(segment_files(tmp_path)) == 2


def test_only_pairs_without_a_row_get_one(tmp_path: Path) -> None:
    pairs.tree(tmp_path, DAYS)
    pairs.calltap("index", "rebuild", str(tmp_path))
    pairs.write(tmp_path, "2026-11-29", "late-1")
    pairs.write(tmp_path, "2026-11-30", "late-2")
    (tmp_path / "2026-11-30" / "no-pair-json-yet").mkdir()
    done = pairs.calltap("index", "rebuild", str(tmp_path))
    assert "67 pairs seen, 65 already indexed" in done.stdout
    assert "wrote 2 rows in 2 segments" in done.stdout
    found, rows, _ = indexed(tmp_path)
    assert rows == 67 and ("2026-11-30", "late-2") in found


def test_after_a_segment_is_corrupted_rebuild_gives_its_pairs_rows_again(tmp_path: Path) -> None:
    written = pairs.tree(tmp_path, DAYS)
    pairs.calltap("index", "rebuild", str(tmp_path))
    damaged = next(p for p in segment_files(tmp_path) if "2026-11-28" in str(p))
    damaged.write_bytes(damaged.read_bytes()[:-100])  # a truncated upload
    key = str(damaged.relative_to(tmp_path))
    found, _, problems = indexed(tmp_path)
    assert len(found) == 25 and list(problems) == [key]
    done = pairs.calltap("index", "rebuild", str(tmp_path))
    assert "65 pairs seen, 25 already indexed" in done.stdout
    assert "wrote 40 rows in 1 segments" in done.stdout
    assert "1 segments skipped as unreadable" in done.stdout and key in done.stdout
    found, rows, problems = indexed(tmp_path)
    assert found == sorted(written) and rows == 65 and list(problems) == [key]


def test_a_bad_source_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for source, why in ((str(tmp_path / "missing"), "no such directory"),
                        ("s3://Not_A_Bucket", "is not an S3 bucket name"),
                        ("s3://user:secret@bucket", "take no credentials")):
        done = pairs.calltap("index", "rebuild", source, check=False)
        assert done.returncode == 2, done
        assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith("calltap index rebuild: ") and why in done.stderr
    assert not (tmp_path / "missing").exists()
    wrong = pairs.calltap("index", "rebuild", str(tmp_path), "--day", "today", check=False)
    assert wrong.returncode == 2 and "--day applies to" in wrong.stderr
