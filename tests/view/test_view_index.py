"""The index of pair summaries: built once, then brought up to date by what changed only."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from view_helpers import two_calls, write_pair

from calltap import recordings
from calltap.view.index import Changes, Filters, PairIndex

OLD_NS = 1_000_000_000_000_000_000
"""An mtime long before any scan: a day last changed then is settled."""


def settle(root: Path) -> None:
    """Date every day directory back, as if the last change were long before the last scan."""
    for day in root.iterdir():
        os.utime(day, ns=(OLD_NS, OLD_NS))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "recordings"
    write_pair(root, "a-equal", two_calls(), two_calls(), started="2026-11-30T04:11:50.123000Z")
    write_pair(root, "b-dropped", two_calls(), two_calls(keep=1),
               started="2026-11-30T04:11:51.123000Z")
    write_pair(root, "c-next-day", two_calls(), two_calls(), day="2026-12-01",
               started="2026-12-01T00:00:01.123000Z")
    return root


EVERYTHING = Filters()


def keys(index: PairIndex, filters: Filters = EVERYTHING) -> list[str]:
    return [row.key for row in index.page(filters, limit=100)]


def test_a_first_refresh_indexes_every_pair_newest_first(tree: Path) -> None:
    index = PairIndex(tree)
    assert index.refresh() == Changes(added=3, removed=0, days_scanned=2)
    assert keys(index) == ["c-next-day", "b-dropped", "a-equal"]
    assert index.count(Filters()) == 3


def test_filters_narrow_by_verdict_code_and_request_id_prefix(tree: Path) -> None:
    index = PairIndex(tree)
    index.refresh()
    assert keys(index, Filters(verdict="diverged")) == ["b-dropped"]
    assert keys(index, Filters(code="TOOL_CALLS_DROPPED")) == ["b-dropped"]
    assert keys(index, Filters(code="TEXT_CHANGED")) == []
    assert keys(index, Filters(prefix="a-")) == ["a-equal"]
    assert keys(index, Filters(verdict="equal", prefix="c")) == ["c-next-day"]
    assert index.count(Filters(verdict="equal")) == 2
    assert [row.key for row in index.page(Filters(), limit=1, offset=1)] == ["b-dropped"]


def test_an_unchanged_tree_costs_no_day_scan(tree: Path) -> None:
    index = PairIndex(tree)
    index.refresh()
    settle(tree)
    index.refresh()
    assert index.refresh() == Changes(added=0, removed=0, days_scanned=0)


def test_a_new_pair_rescans_its_day_only_and_is_since_the_last_sequence(tree: Path) -> None:
    index = PairIndex(tree)
    index.refresh()
    settle(tree)
    index.refresh()
    latest = index.latest()
    write_pair(tree, "d-new", two_calls(), two_calls(keep=1), day="2026-12-01",
               started="2026-12-01T00:00:02.000000Z")
    assert index.refresh() == Changes(added=1, removed=0, days_scanned=1)
    assert [(seq, row.key) for seq, row in index.since(latest, Filters())] == [
        (latest + 1, "d-new")]
    assert index.since(latest, Filters(verdict="equal")) == []
    assert keys(index)[0] == "d-new"


def test_a_deleted_pair_and_a_deleted_day_leave_the_index(tree: Path) -> None:
    index = PairIndex(tree)
    index.refresh()
    shutil.rmtree(tree / "2026-11-30" / "b-dropped")
    assert index.refresh().removed == 1
    assert keys(index) == ["c-next-day", "a-equal"]
    assert keys(index, Filters(code="TOOL_CALLS_DROPPED")) == []
    shutil.rmtree(tree / "2026-12-01")
    assert index.refresh() == Changes(added=0, removed=1, days_scanned=1)
    assert keys(index) == ["a-equal"]


def test_a_half_written_pair_json_is_skipped_until_it_is_whole(tree: Path) -> None:
    index = PairIndex(tree)
    directory = write_pair(tree, "e-late", two_calls(), two_calls())
    whole = (directory / recordings.PAIR_JSON).read_bytes()
    (directory / recordings.PAIR_JSON).write_bytes(whole[: len(whole) // 2])
    assert index.refresh().added == 3
    assert "e-late" not in keys(index)
    settle(tree)
    index.refresh()
    (directory / recordings.PAIR_JSON).write_bytes(whole)
    assert index.refresh() == Changes(added=1, removed=0, days_scanned=0)
    assert "e-late" in keys(index)


def test_a_capture_directory_without_pair_json_is_found_once_it_has_one(tree: Path) -> None:
    index = PairIndex(tree)
    (tree / "2026-11-30" / "f-in-flight").mkdir()
    index.refresh()
    settle(tree)
    assert index.refresh().added == 0
    write_pair(tree / "elsewhere", "f-in-flight", two_calls(), two_calls())
    shutil.copy(tree / "elsewhere" / "2026-11-30" / "f-in-flight" / recordings.PAIR_JSON,
                tree / "2026-11-30" / "f-in-flight")
    assert index.refresh().added == 1
    assert index.find("f-in-flight") is not None


def test_names_outside_the_layout_are_never_indexed(tree: Path) -> None:
    (tree / "not-a-day").mkdir()
    (tree / "2026-11-30" / "bad key").mkdir()
    (tree / "2026-11-30" / "stray-file").write_text("x")
    index = PairIndex(tree)
    index.refresh()
    assert sorted(keys(index)) == ["a-equal", "b-dropped", "c-next-day"]


def test_an_index_file_is_reused_without_reading_any_pair_again(tree: Path,
                                                               tmp_path: Path) -> None:
    path = tmp_path / "cache" / "index.sqlite"
    first = PairIndex(tree, path)
    first.refresh()
    first.close()
    assert path.stat().st_mode & 0o777 == 0o600
    second = PairIndex(tree, path)
    assert second.refresh().added == 0
    assert second.find("b-dropped").codes == ("TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED")


def test_find_answers_by_key_or_request_id_newest_first(tree: Path) -> None:
    write_pair(tree, "g+2", two_calls(), two_calls(), day="2026-12-01",
               started="2026-12-01T01:00:00.000000Z")
    index = PairIndex(tree)
    index.refresh()
    assert index.find("g+2").day == "2026-12-01"
    assert index.find("missing") is None
