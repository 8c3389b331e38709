"""The pair list from the index of pairs: segments, spooled rows and pairs with no row yet, each
pair once, newest first, at the cost of what changed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from view_helpers import two_calls, write_pair

from calltap import recordings
from calltap.index import parquet
from calltap.index.gaps import row_for
from calltap.index.layout import segment
from calltap.view.listing import PairList
from calltap.view.query import Filters

OLD_NS = 1_000_000_000_000_000_000
"""An mtime long before any look: a day last changed then is settled."""


def settle(root: Path) -> None:
    """Date every day directory back, as if the last change were long before the last look."""
    for day in root.iterdir():
        if recordings.is_day(day.name):
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


def keys(pairs: PairList, filters: Filters = EVERYTHING) -> list[str]:
    return [row.key for row in pairs.page(filters, limit=100)]


def write_segment(root: Path, day: str, keys_: list[str], sealed_ms: int = 1) -> Path:
    """A segment naming `keys_` of `day`, as serve or `index rebuild` writes one."""
    rows = [row_for(root, day, key, replica="r1") for key in keys_]
    path = root / segment(day, "r1", sealed_ms, "t1").key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(parquet.encode_rows(rows))
    return path


def test_a_tree_without_an_index_lists_every_pair_newest_first(tree: Path) -> None:
    pairs = PairList(tree)
    assert pairs.refresh().rows == 3
    assert keys(pairs) == ["c-next-day", "b-dropped", "a-equal"]
    assert pairs.count(Filters()) == 3


def test_filters_narrow_by_verdict_code_and_request_id_prefix(tree: Path) -> None:
    pairs = PairList(tree)
    pairs.refresh()
    assert keys(pairs, Filters(verdict="diverged")) == ["b-dropped"]
    assert keys(pairs, Filters(code="TOOL_CALLS_DROPPED")) == ["b-dropped"]
    assert keys(pairs, Filters(code="TEXT_CHANGED")) == []
    assert keys(pairs, Filters(prefix="a-")) == ["a-equal"]
    assert keys(pairs, Filters(verdict="equal", prefix="c")) == ["c-next-day"]
    assert pairs.count(Filters(verdict="equal")) == 2
    assert pairs.count(Filters(code="TOOL_CALLS_DROPPED")) == 1
    assert [row.key for row in pairs.page(Filters(), limit=1, offset=1)] == ["b-dropped"]


def test_a_pair_in_a_segment_and_on_disk_is_listed_once_with_the_segment_row(tree: Path) -> None:
    write_segment(tree, "2026-11-30", ["a-equal", "b-dropped"])
    pairs = PairList(tree)
    loaded = pairs.refresh()
    assert (loaded.segments, loaded.rows) == (1, 3)
    assert sorted(keys(pairs)) == ["a-equal", "b-dropped", "c-next-day"]
    replicas = dict(pairs.catalog.query("SELECT stored_as, replica FROM pairs"))
    assert replicas == {"a-equal": "r1", "b-dropped": "r1", "c-next-day": ""}


def test_an_unchanged_tree_loads_nothing_again(tree: Path) -> None:
    pairs = PairList(tree)
    pairs.refresh()
    settle(tree)
    pairs.refresh()
    again = pairs.refresh()
    assert (again.segments, again.rows) == (0, 0)


def test_a_new_pair_is_since_the_last_sequence(tree: Path) -> None:
    pairs = PairList(tree)
    pairs.refresh()
    settle(tree)
    pairs.refresh()
    latest = pairs.latest()
    write_pair(tree, "d-new", two_calls(), two_calls(keep=1), day="2026-12-01",
               started="2026-12-01T00:00:02.000000Z")
    assert pairs.refresh().rows == 1
    assert [(seq, row.key) for seq, row in pairs.since(latest, Filters())] == [
        (latest + 1, "d-new")]
    assert pairs.since(latest, Filters(verdict="equal")) == []
    assert keys(pairs)[0] == "d-new"


def test_a_new_segment_of_pairs_already_listed_adds_no_row(tree: Path) -> None:
    pairs = PairList(tree)
    pairs.refresh()
    write_segment(tree, "2026-11-30", ["a-equal", "b-dropped"])
    loaded = pairs.refresh()
    assert (loaded.segments, loaded.rows) == (1, 0)
    assert pairs.count(Filters()) == 3


def test_a_half_written_pair_json_is_skipped_until_it_is_whole(tree: Path) -> None:
    pairs = PairList(tree)
    directory = write_pair(tree, "e-late", two_calls(), two_calls())
    whole = (directory / recordings.PAIR_JSON).read_bytes()
    (directory / recordings.PAIR_JSON).write_bytes(whole[: len(whole) // 2])
    assert pairs.refresh().rows == 3
    assert "e-late" not in keys(pairs)
    settle(tree)
    pairs.refresh()
    (directory / recordings.PAIR_JSON).write_bytes(whole)
    assert pairs.refresh().rows == 1
    assert "e-late" in keys(pairs)


def test_a_capture_directory_without_pair_json_is_found_once_it_has_one(tree: Path) -> None:
    pairs = PairList(tree)
    (tree / "2026-11-30" / "f-in-flight").mkdir()
    pairs.refresh()
    settle(tree)
    assert pairs.refresh().rows == 0
    write_pair(tree / "elsewhere", "f-in-flight", two_calls(), two_calls())
    shutil.copy(tree / "elsewhere" / "2026-11-30" / "f-in-flight" / recordings.PAIR_JSON,
                tree / "2026-11-30" / "f-in-flight")
    assert pairs.refresh().rows == 1
    assert pairs.find("f-in-flight") is not None


def test_names_outside_the_layout_are_never_listed(tree: Path) -> None:
    (tree / "not-a-day").mkdir()
    (tree / "2026-11-30" / "bad key").mkdir()
    (tree / "2026-11-30" / "stray-file").write_text("x")
    pairs = PairList(tree)
    pairs.refresh()
    assert sorted(keys(pairs)) == ["a-equal", "b-dropped", "c-next-day"]


def test_a_corrupt_segment_is_skipped_and_the_pairs_on_disk_still_listed(tree: Path) -> None:
    path = write_segment(tree, "2026-11-30", ["a-equal", "b-dropped"])
    path.write_bytes(path.read_bytes()[:40])
    pairs = PairList(tree)
    loaded = pairs.refresh()
    assert loaded.skipped == [str(path.relative_to(tree))]
    assert sorted(keys(pairs)) == ["a-equal", "b-dropped", "c-next-day"]


def test_find_answers_by_key_or_request_id_newest_first(tree: Path) -> None:
    write_pair(tree, "g+2", two_calls(), two_calls(), day="2026-12-01",
               started="2026-12-01T01:00:00.000000Z")
    pairs = PairList(tree)
    pairs.refresh()
    assert pairs.find("g+2").day == "2026-12-01"
    assert pairs.find("b-dropped").codes == ("TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED")
    assert pairs.find("missing") is None
