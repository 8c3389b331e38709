"""A big index loads newest first, a batch of segments at a time, so the first page answers
before the rest is loaded: after each batch, every row that started at or after the catalog's
`complete_since` is loaded, whatever the segments, their seal times and their days."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calltap.index import catalog as catalog_module
from calltap.index import layout, parquet
from calltap.index.catalog import Catalog
from calltap.index.rows import row_of

EPOCH = datetime(2026, 12, 1, tzinfo=UTC)


def row(key: str, started: datetime) -> dict:
    document = {"request_id": key, "legs": {"downstream": {
        "path": "/v1/chat/completions", "started_at": started.isoformat()}},
        "comparison": {"verdict": "equal", "findings": []}}
    return row_of(document, None, day=started.date().isoformat(), stored_as=key, replica="r")


segments_strategy = st.lists(
    st.tuples(st.lists(st.integers(0, 3 * 86_400_000), min_size=1, max_size=4),
              st.integers(0, 7_200_000)),
    min_size=1, max_size=12)
"""Segments: the start of each row (ms after EPOCH), and how long after the newest of them the
segment was sealed."""


@contextlib.contextmanager
def one_segment_a_batch() -> Iterator[None]:
    """Each refresh(batches=1) loads one segment: the laws are checked after every one."""
    original = catalog_module.SEGMENTS_AT_ONCE
    catalog_module.SEGMENTS_AT_ONCE = 1
    try:
        yield
    finally:
        catalog_module.SEGMENTS_AT_ONCE = original


def write_segments(root: Path, segments: list) -> tuple[dict[str, datetime],
                                                        dict[Path, tuple[int, list[dict]]]]:
    """The drawn segments in a tree: each row's start by key, and each file's seal and rows."""
    starts: dict[str, datetime] = {}
    written: dict[Path, tuple[int, list[dict]]] = {}
    for number, (offsets, delay) in enumerate(segments):
        by_day: dict[str, list[dict]] = {}
        for index, offset in enumerate(offsets):
            key = f"k{number}-{index}"
            starts[key] = EPOCH + timedelta(milliseconds=offset)
            by_day.setdefault(starts[key].date().isoformat(), []).append(row(key, starts[key]))
        sealed = int((EPOCH.timestamp()) * 1000) + max(offsets) + delay
        for day, rows in by_day.items():
            path = root / layout.segment(day, "r", sealed, f"t{number}").key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(parquet.encode_rows(rows))
            written[path] = (sealed, rows)
    return starts, written


@settings(max_examples=40)
@given(segments=segments_strategy)
def test_every_row_since_complete_since_is_loaded_after_each_batch(
        tmp_path_factory: pytest.TempPathFactory, segments: list) -> None:
    root = tmp_path_factory.mktemp("tree")
    starts, _ = write_segments(root, segments)
    with one_segment_a_batch():
        catalog = Catalog(root, fill_gaps=False)
        while True:
            loaded = catalog.refresh(batches=1)
            present = {key for (key,) in catalog.query("SELECT stored_as FROM pairs")}
            since = catalog.complete_since
            if since is None:
                assert not loaded.more
                assert present == set(starts)
                break
            assert loaded.more
            assert {key for key, start in starts.items() if start >= since} <= present


@settings(max_examples=40)
@given(segments=segments_strategy, when=st.integers(0, 12), which=st.integers(0, 3))
def test_a_day_merged_while_it_loads_is_read_whole_and_once(
        tmp_path_factory: pytest.TempPathFactory, segments: list, when: int, which: int) -> None:
    """A compaction (or a replica merging its own) between two batches: the day's segments,
    loaded or not, become one sealed at the newest of them, and their inputs are deleted. The
    law above still holds after every batch, and in the end every row is read, once."""
    root = tmp_path_factory.mktemp("tree")
    starts, written = write_segments(root, segments)
    with one_segment_a_batch():
        catalog = Catalog(root, fill_gaps=False)
        for batch in range(len(written) + 2):
            if batch == when:
                _merge_a_day(root, written, which)
            loaded = catalog.refresh(batches=1)
            present = catalog.query("SELECT stored_as FROM pairs")
            assert len(present) == len(set(present))
            since = catalog.complete_since
            if since is None:
                break
            assert loaded.more
            assert {key for key, start in starts.items() if start >= since} <= {
                key for (key,) in present}
        assert catalog.complete_since is None
        assert {key for (key,) in catalog.query("SELECT stored_as FROM pairs")} == set(starts)


def _merge_a_day(root: Path, written: dict[Path, tuple[int, list[dict]]], which: int) -> None:
    days = sorted({path.parent.name for path in written})
    day = days[which % len(days)]
    inputs = [path for path in written if path.parent.name == day]
    sealed = max(written[path][0] for path in inputs)
    rows = [row for path in inputs for row in written[path][1]]
    merged = root / layout.segment(day.removeprefix("day="), "compact", sealed, "m0").key
    merged.write_bytes(parquet.encode_rows(rows))
    for path in inputs:
        path.unlink()
        del written[path]
    written[merged] = (sealed, rows)


def test_a_page_is_whole_before_older_segments_load(tmp_path: Path) -> None:
    from calltap.view.listing import PairList
    from calltap.view.query import Filters

    for day in range(1, 4):
        started = EPOCH.replace(day=day, hour=12)
        rows = [row(f"d{day}-{n}", started + timedelta(seconds=n)) for n in range(5)]
        path = tmp_path / layout.segment(started.date().isoformat(), "r",
                                         int(started.timestamp() * 1000) + 60_000, "t1").key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(parquet.encode_rows(rows))
    with one_segment_a_batch():
        pairs = PairList(tmp_path)
        assert pairs.refresh(batches=1).more
        assert pairs.loading
        assert pairs.answers(Filters(), 5) and not pairs.answers(Filters(), 6)
        assert [summary.key for summary in pairs.page(Filters(), limit=2)] == ["d3-4", "d3-3"]
        while pairs.refresh(batches=1).more:
            pass
        assert not pairs.loading and pairs.count(Filters()) == 15
