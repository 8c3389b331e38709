"""A writer merges its own segments of the day as it goes: after many flushes a location holds
the few objects `tiers` names, every row read once; an input deleted under it, a compaction
racing it, a corrupt segment of its own, a store failing between a merge and its deletions: no
row lost, nothing deleted that a merge does not hold. Real files, and a real S3 API (moto)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.index.test_writer_laws import row
from tests.store.index_checks import segment_rows
from tests.support.s3 import S3Server, s3_server

from calltap.index import compaction, layout, segments, tiers
from calltap.index.catalog import Catalog
from calltap.index.parquet import decode
from calltap.index.pending import Pending, seal_time_and_tag
from calltap.index.writer import Flushed, SegmentWriter
from calltap.storage import Storage, StoreError

REPLICA = "writer-1"
ROWS = 3
"""Rows sealed by each round."""


def today(days_ago: int = 0) -> str:
    return (datetime.now(UTC) - timedelta(days=days_ago)).date().isoformat()


class Storing(Storage):
    """A store that can fail on cue (puts of merges, deletes after a few) or run a compaction
    at a chosen moment: just before the writer reads a group, or stores a merge."""

    fail_merge_puts = False
    deletes_left: int | None = None
    before_read: Callable[[], None] | None = None
    before_merge_put: Callable[[], None] | None = None

    async def read(self, key: str) -> bytes | None:
        if self.before_read is not None:
            hook, self.before_read = self.before_read, None
            await asyncio.to_thread(hook)
        return await super().read(key)

    async def put_new(self, key: str, data: bytes) -> bool:
        segment = layout.parse(key)
        if segment is not None and tiers.level_of(segment) > 0:
            if self.fail_merge_puts:
                raise StoreError("store unreachable or not answering")
            if self.before_merge_put is not None:
                hook, self.before_merge_put = self.before_merge_put, None
                await asyncio.to_thread(hook)
        return await super().put_new(key, data)

    async def delete(self, key: str) -> None:
        if self.deletes_left is not None:
            if self.deletes_left == 0:
                raise StoreError("store unreachable or not answering")
            self.deletes_left -= 1
        await super().delete(key)


class Recorder:
    """One writer over `storage`, and what it was given: the rows, the segments its sealed
    files made (in the order they were sealed), and the merges it reported."""

    def __init__(self, storage: Storage, spool: Path) -> None:
        self.storage = storage
        self.pending = Pending(spool / layout.INDEX / "pending")
        self.writer = SegmentWriter(storage, self.pending, REPLICA)
        self.seals: list[layout.Segment] = []
        self.keys: set[tuple[str, str]] = set()
        self.merged = 0

    def restart(self) -> None:
        """A new process on the same spool and store: it knows none of the segments."""
        self.pending.close()
        self.pending = Pending(self.pending.directory)
        self.writer = SegmentWriter(self.storage, self.pending, REPLICA)

    async def round(self, day: str | None = None) -> Flushed:
        day = day or today()
        for _ in range(ROWS):
            new = row(len(self.keys), day)
            self.pending.append(new)
            self.keys.add((day, new["stored_as"]))
        self.pending.seal()
        for path in self.pending.sealed():
            sealed_ms, tag = seal_time_and_tag(path)
            self.seals.append(layout.segment(day, REPLICA, sealed_ms, tag))
        done = await self.writer.flush()
        self.merged += done.merged
        return done

    def stored(self) -> set[str]:
        return {segment.key for segment in segments.listed(self.storage)}


def expected(seals: list[layout.Segment]) -> set[str]:
    return {segment.key for segment in tiers.simulate(seals)}


def read_once(location: str | Path, cache: Path) -> tuple[int, int, dict[str, str]]:
    """What a fresh Catalog reads: rows, distinct pairs, and the segments it skipped."""
    catalog = Catalog(location, cache=cache, fill_gaps=False)
    try:
        catalog.refresh()
        ((count, distinct),) = catalog.query(
            "SELECT count(*), count(DISTINCT (day, stored_as)) FROM pairs")
        return count, distinct, dict(catalog.problems)
    finally:
        catalog.close()


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Recorder]:
    made = Recorder(Storing(tmp_path / "recordings"), tmp_path / "recordings")
    yield made
    made.pending.close()


async def test_forty_flushes_leave_the_few_segments_tiers_names(recorder: Recorder,
                                                                 tmp_path: Path) -> None:
    for _ in range(40):
        await recorder.round()
    assert recorder.stored() == expected(recorder.seals)
    assert len(recorder.stored()) == 4  # 40 is 220 in base 4: two of level 2, two of level 1
    assert recorder.merged == (40 - 4) // (tiers.FAN_IN - 1)
    assert read_once(tmp_path / "recordings", tmp_path / "cache") == (40 * ROWS, 40 * ROWS, {})
    assert len(segment_rows(tmp_path / "recordings")) == 40 * ROWS, "a row stored twice"


async def test_days_before_yesterday_are_left_for_compaction(recorder: Recorder) -> None:
    for _ in range(tiers.FAN_IN):
        await recorder.round(today(3))
        await recorder.round(today(1))
    yesterday = [s for s in recorder.seals if s.day == today(1)]
    old = {s.key for s in recorder.seals if s.day == today(3)}
    assert recorder.stored() == old | {tiers.merged(yesterday).key}


async def test_an_input_deleted_under_the_writer_gives_up_its_group_alone(
        recorder: Recorder, tmp_path: Path) -> None:
    for _ in range(tiers.FAN_IN - 1):
        await recorder.round()
    gone = recorder.seals[1]
    recorder.storage.delete_now(gone.key)
    done = await recorder.round()
    assert done.merged == 0
    assert recorder.stored() == {s.key for s in recorder.seals if s != gone}
    rows = (tiers.FAN_IN - 1) * ROWS
    assert read_once(tmp_path / "recordings", tmp_path / "cache") == (rows, rows, {})
    for _ in range(tiers.FAN_IN):
        await recorder.round()
    later = recorder.seals[tiers.FAN_IN:]
    left = {s.key for s in recorder.seals[:tiers.FAN_IN] if s != gone}
    assert recorder.stored() == left | {tiers.merged(later).key}


async def test_a_compaction_before_the_writer_reads_its_group(recorder: Recorder,
                                                              tmp_path: Path) -> None:
    for _ in range(tiers.FAN_IN - 1):
        await recorder.round()
    recorder.storage.before_read = lambda: compact(tmp_path / "recordings")
    done = await recorder.round()
    assert done.merged == 0
    (compacted,) = recorder.stored()
    assert layout.parse(compacted).replica == compaction.REPLICA  # type: ignore[union-attr]
    for _ in range(tiers.FAN_IN):
        await recorder.round()
    assert recorder.stored() == {compacted, tiers.merged(recorder.seals[tiers.FAN_IN:]).key}
    rows = 2 * tiers.FAN_IN * ROWS
    assert read_once(tmp_path / "recordings", tmp_path / "cache") == (rows, rows, {})


async def test_a_compaction_between_reading_a_group_and_storing_its_merge(
        recorder: Recorder, tmp_path: Path) -> None:
    """Both the compaction and the merge hold the group's rows: read once, and the writer goes
    on merging what it stored."""
    for _ in range(tiers.FAN_IN - 1):
        await recorder.round()
    recorder.storage.before_merge_put = lambda: compact(tmp_path / "recordings")
    for _ in range(4 * tiers.FAN_IN - 3):
        await recorder.round()
    own = {key for key in recorder.stored() if f"-{REPLICA}-" in key}
    assert own == expected(recorder.seals)
    assert len(recorder.stored() - own) == 1
    rows = len(recorder.keys)
    assert rows == 4 * tiers.FAN_IN * ROWS
    assert read_once(tmp_path / "recordings", tmp_path / "cache") == (rows, rows, {})
    assert len(segment_rows(tmp_path / "recordings")) == rows + tiers.FAN_IN * ROWS


async def test_a_corrupt_segment_of_its_own_is_neither_merged_nor_deleted(
        recorder: Recorder, tmp_path: Path) -> None:
    for _ in range(tiers.FAN_IN - 1):
        await recorder.round()
    corrupt = recorder.seals[1]
    path = tmp_path / "recordings" / corrupt.key
    path.write_bytes(path.read_bytes()[:100])
    damaged = path.read_bytes()
    assert (await recorder.round()).merged == 0
    assert (await recorder.round()).merged == 1
    others = [s for s in recorder.seals if s != corrupt]
    assert recorder.stored() == {corrupt.key, tiers.merged(others).key}
    assert path.read_bytes() == damaged
    rows = len(others) * ROWS
    count, distinct, problems = read_once(tmp_path / "recordings", tmp_path / "cache")
    assert (count, distinct, list(problems)) == (rows, rows, [corrupt.key])


async def test_a_store_failing_leaves_the_merge_for_the_next_flush(recorder: Recorder,
                                                                   tmp_path: Path) -> None:
    """A merge that cannot be stored deletes nothing; deletions cut short after it was stored
    are finished by the next flush. The flush never fails for it: its own segment is stored."""
    for _ in range(tiers.FAN_IN - 1):
        await recorder.round()
    recorder.storage.fail_merge_puts = True
    done = await recorder.round()
    assert (done.segments, done.merged) == (1, 0)
    assert done.merge_failed == "store unreachable or not answering"
    assert recorder.stored() == {s.key for s in recorder.seals}
    recorder.storage.fail_merge_puts = False
    recorder.storage.deletes_left = 1
    done = await recorder.round()
    assert (done.segments, done.merged) == (1, 0)
    merge = tiers.merged(recorder.seals[:tiers.FAN_IN])
    assert recorder.stored() == {merge.key} | {s.key for s in recorder.seals[1:]}
    rows = len(recorder.keys)
    assert read_once(tmp_path / "recordings", tmp_path / "cache") == (rows, rows, {})
    assert done.merge_failed == "store unreachable or not answering"
    recorder.storage.deletes_left = None
    done = await recorder.round()
    assert (done.merged, done.merge_failed) == (1, None)
    assert recorder.stored() == {merge.key} | {s.key for s in recorder.seals[tiers.FAN_IN:]}
    assert recorder.stored() == expected(recorder.seals)


def compact(root: Path) -> None:
    compaction.compact_day(Storage(root), today())


STEPS = st.lists(st.tuples(
    st.sampled_from(["none"] * 6 + ["merge-put-fails", "deletes-fail", "restart", "compact"]),
    st.integers(0, 3),
    st.sampled_from([0] * 5 + [1]),
), min_size=8, max_size=20)
"""Rounds of today's rows (or yesterday's), each after something that may go wrong."""


@settings(max_examples=12, deadline=None)
@given(steps=STEPS)
def test_whatever_happens_every_row_is_read_once(steps: list[tuple[str, int, int]]) -> None:
    """Rounds among merges that cannot be stored, deletions cut short, restarts and
    compactions: every row sealed is read exactly once, no segment holds a row twice, and a
    writer started after all that merges its own segments again."""
    with tempfile.TemporaryDirectory(prefix="calltap-merges-law-") as scratch:
        root = Path(scratch, "recordings")
        recorder = Recorder(Storing(root), root)
        try:
            asyncio.run(play(recorder, root, steps))
            recorder.restart()
            for _ in range(tiers.FAN_IN):
                asyncio.run(recorder.round())
            last = recorder.seals[-tiers.FAN_IN:]
            assert recorder.stored() & {s.key for s in last} == set()
            assert tiers.merged(last).key in recorder.stored()
            rows = len(recorder.keys)
            assert read_once(root, Path(scratch, "cache")) == (rows, rows, {})
            for segment in segments.listed(recorder.storage):
                held = segment_rows_of(root, segment)
                assert len(held) == len(set(held)), segment.key
        finally:
            recorder.pending.close()
            shutil.rmtree(root, ignore_errors=True)


async def play(recorder: Recorder, root: Path, steps: list[tuple[str, int, int]]) -> None:
    storage = recorder.storage
    assert isinstance(storage, Storing)
    for trouble, deletes, days_ago in steps:
        if trouble == "merge-put-fails":
            storage.fail_merge_puts = True
        elif trouble == "deletes-fail":
            storage.deletes_left = deletes
        elif trouble == "restart":
            recorder.restart()
        elif trouble == "compact":
            await asyncio.to_thread(compaction.compact_day, Storage(root), today())
        await recorder.round(today(days_ago))
        storage.fail_merge_puts, storage.deletes_left = False, None


def segment_rows_of(root: Path, segment: layout.Segment) -> list[tuple[str, str]]:
    return [(r["day"], r["stored_as"]) for r in decode((root / segment.key).read_bytes())]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("moto")) as server:
        yield server


async def test_a_bucket_holds_the_few_segments_tiers_names(
        s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3.environ.items():
        monkeypatch.setenv(name, value)
    bucket = s3.bucket()
    url = f"s3://{bucket}/fleet"
    (tmp_path / "spool").mkdir()
    recorder = Recorder(Storage(url), tmp_path / "spool")
    try:
        for _ in range(20):
            await recorder.round()
    finally:
        recorder.pending.close()
    listed = {key.removeprefix("fleet/") for key in s3.objects(bucket, f"fleet/{layout.INDEX}/")}
    assert listed == expected(recorder.seals)
    assert len(listed) == 2  # 20 is 110 in base 4
    rows = 20 * ROWS
    assert read_once(url, tmp_path / "cache") == (rows, rows, {})
