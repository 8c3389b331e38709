"""`calltap index compact` on a local tree: the same rows in fewer segments, safe beside writers
and beside another compaction (real subprocesses, started at once)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from tests.index import pairs

from calltap.index import compaction, layout
from calltap.index.catalog import Catalog
from calltap.index.parquet import connect, encode_rows
from calltap.index.rows import row_of
from calltap.storage import Storage

DAY = "2026-11-28"
ALL = "SELECT * FROM pairs ORDER BY day, stored_as"


def rows(day: str, keys: list[str], replica: str) -> list[dict[str, object]]:
    """The rows of `keys`, each the same whichever segment holds it (a row written twice)."""
    start = datetime.fromisoformat(f"{day}T09:00:00+00:00")
    made = []
    for key in keys:
        n = sum(map(ord, key))
        diverged = n % 3 == 0
        made.append(row_of(
            pairs.document(key, start + timedelta(milliseconds=n * 37),
                           verdict="diverged" if diverged else "equal",
                           codes=("TOOL_CALL_DROPPED",) if diverged else ()),
            pairs.request(f"model-{n % 4}"), day=day, stored_as=key, replica=replica))
    return made


def put(root: Path, day: str, replica: str, sealed_ms: int, keys: list[str],
        again: list[str] | None = None, again_replica: str = "") -> str:
    """A segment of `keys`, and of `again` as another replica wrote them before."""
    key = layout.segment(day, replica, sealed_ms, "s1").key
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(encode_rows(rows(day, keys, replica)
                                         + rows(day, again or [], again_replica)))
    return key


def segments_of(root: Path, day: str = DAY) -> list[str]:
    return sorted(str(path.relative_to(root))
                  for path in (root / layout.INDEX).glob(f"day={day}/*.parquet"))


def read_all(root: Path, sql: str = ALL) -> list[tuple[object, ...]]:
    catalog = Catalog(root, fill_gaps=False)
    catalog.refresh()
    try:
        return catalog.query(sql)
    finally:
        catalog.close()


def fill(root: Path, day: str, segments: int, per_segment: int, base_ms: int) -> set[str]:
    """`segments` segments of 3 replicas, each repeating a row of the one before (a retry)."""
    keys: set[str] = set()
    for n in range(segments):
        own = [f"{day}-s{base_ms}-{n}-{k}" for k in range(per_segment)]
        repeat = [f"{day}-s{base_ms}-{n - 1}-0"] if n else []
        put(root, day, f"replica-{n % 3}", base_ms + n * 1000, own, repeat,
            f"replica-{(n - 1) % 3}")
        keys.update(own)
    return keys


def test_compaction_keeps_every_row_in_one_segment_named_after_the_newest_input(
        tmp_path: Path) -> None:
    fill(tmp_path, DAY, 12, 20, 1_764_000_000_000)
    fill(tmp_path, "2026-11-27", 3, 5, 1_763_900_000_000)
    before, inputs = read_all(tmp_path), segments_of(tmp_path)
    newest = min(layout.parse(key).countdown for key in inputs)  # type: ignore[union-attr]
    done = pairs.calltap("index", "compact", str(tmp_path))
    assert f"{DAY}: 12 segments in, 251 rows in, 240 rows out, 1 segments out" in done.stdout
    assert "2026-11-27: 3 segments in, 17 rows in, 15 rows out, 1 segments out" in done.stdout
    assert "bytes a row" in done.stdout
    (merged,) = segments_of(tmp_path)
    assert layout.parse(merged).countdown == newest  # type: ignore[union-attr]
    assert layout.parse(merged).replica == "compact"  # type: ignore[union-attr]
    assert read_all(tmp_path) == before
    again = pairs.calltap("index", "compact", str(tmp_path))
    assert "nothing to compact" in again.stdout and segments_of(tmp_path) == [merged]


def test_a_day_past_rows_per_segment_becomes_several_and_today_is_left_alone(
        tmp_path: Path) -> None:
    fill(tmp_path, DAY, 5, 20, 1_764_000_000_000)
    fill(tmp_path, pairs.today(), 3, 2, 1_764_100_000_000)
    before = read_all(tmp_path)
    done = pairs.calltap("index", "compact", str(tmp_path), "--rows-per-segment", "30")
    assert "100 rows out, 4 segments out" in done.stdout
    assert len(segments_of(tmp_path)) == 4 and len(segments_of(tmp_path, pairs.today())) == 3
    assert read_all(tmp_path) == before
    today = pairs.calltap("index", "compact", str(tmp_path), "--day", "today")
    assert f"{pairs.today()}: 3 segments in" in today.stdout
    assert len(segments_of(tmp_path, pairs.today())) == 1 and read_all(tmp_path) == before


def test_a_damaged_input_is_left_in_place_and_reported(tmp_path: Path) -> None:
    fill(tmp_path, DAY, 4, 10, 1_764_000_000_000)
    damaged = put(tmp_path, DAY, "broken", 1_764_000_500_000, ["lost-1", "lost-2"])
    (tmp_path / damaged).write_bytes((tmp_path / damaged).read_bytes()[:-64])
    before = read_all(tmp_path)
    done = pairs.calltap("index", "compact", str(tmp_path), "--day", DAY)
    assert "4 segments in" in done.stdout and damaged in done.stdout
    assert "1 segments skipped as unreadable" in done.stdout
    remaining = segments_of(tmp_path)
    assert damaged in remaining and len(remaining) == 2
    assert read_all(tmp_path) == before


def test_two_compactions_at_once_leave_every_row_once_and_no_input(tmp_path: Path) -> None:
    expected: set[str] = set()
    for round_ in range(6):
        expected |= fill(tmp_path, DAY, 8, 15, 1_764_000_000_000 + round_ * 100_000)
        inputs = set(segments_of(tmp_path))
        racing = [subprocess.Popen([sys.executable, "-m", "calltap", "index", "compact",
                                    str(tmp_path), "--day", DAY], cwd=pairs.ROOT,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for _ in range(2)]
        outputs = [process.communicate(timeout=120) for process in racing]
        for process, (out, err) in zip(racing, outputs, strict=True):
            assert process.returncode == 0, out + err
        keys = [key for (key,) in read_all(tmp_path, "SELECT stored_as FROM pairs")]
        assert len(keys) == len(set(keys)) and set(keys) == expected, round_
        left = set(segments_of(tmp_path))
        assert not inputs & left, (round_, outputs)
        assert 1 <= len(left) <= 2


def test_segments_a_writer_adds_during_compaction_are_kept(tmp_path: Path) -> None:
    day = pairs.today()
    expected = fill(tmp_path, day, 150, 4, 1_764_000_000_000)
    written: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            key = f"late-{n}"
            written.append(put(tmp_path, day, "writer", int(time.time() * 1000), [key]))
            expected.add(key)
            n += 1
            time.sleep(0.005)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        done = pairs.calltap("index", "compact", str(tmp_path), "--day", "today")
    finally:
        stop.set()
        thread.join()
    assert "segments in" in done.stdout
    keys = [key for (key,) in read_all(tmp_path, "SELECT stored_as FROM pairs")]
    assert len(keys) == len(set(keys)) and set(keys) == expected
    kept = set(segments_of(tmp_path, day))
    merged = [key for key in kept if layout.parse(key).replica == "compact"]  # type: ignore[union-attr]
    late = [key for key in kept if layout.parse(key).replica == "writer"]  # type: ignore[union-attr]
    assert len(merged) == 1 and late and set(late) < set(written)


class Vanishing(Storage):
    """A tree where, `times` times, another compaction deletes one of the segments just
    listed as this one reads it."""

    def __init__(self, root: Path, times: int) -> None:
        super().__init__(root)
        self.times = times
        self.armed = False
        self.lock = threading.Lock()

    def keys_now(self, after: str | None = None, prefix: str | None = None) -> Iterator[str]:
        with self.lock:
            self.armed, self.times = self.times > 0, max(self.times - 1, 0)
        return super().keys_now(after, prefix)

    def read_now(self, key: str) -> bytes | None:
        with self.lock:
            vanish, self.armed = self.armed and layout.parse(key) is not None, False
        if vanish:
            super().delete_now(key)
            return None
        return super().read_now(key)


def test_an_input_deleted_under_a_compaction_makes_it_start_over_or_give_way(
        tmp_path: Path) -> None:
    fill(tmp_path, DAY, 4, 5, 1_764_000_000_000)
    fill(tmp_path, DAY, 3, 5, 1_764_000_900_000)
    once = compaction.compact_day(Vanishing(tmp_path, 1), DAY)
    assert not once.gave_way and once.segments_in == 6 and len(once.written) == 1
    assert segments_of(tmp_path) == once.written
    fill(tmp_path, DAY, 4, 5, 1_764_001_000_000)
    before = segments_of(tmp_path)
    always = compaction.compact_day(Vanishing(tmp_path, 99), DAY)
    assert always.gave_way and always.written == [] and always.deleted == 0
    assert len(segments_of(tmp_path)) == len(before) - compaction.ATTEMPTS


def test_segments_of_older_and_newer_formats_merge_with_every_column(tmp_path: Path) -> None:
    put(tmp_path, DAY, "current", 1_764_000_000_000, ["now-1"])
    db = connect()
    for replica, select in (("older", "'old-1' AS stored_as, 'diverged' AS verdict"),
                            ("newer", "'new-1' AS stored_as, 'equal' AS verdict,"
                                      " 42 AS tokens_total")):
        key = layout.segment(DAY, replica, 1_763_000_000_000, "s1").key
        db.execute(f"COPY (SELECT '{DAY}' AS day, {select}) TO '{tmp_path / key}'"
                   " (FORMAT parquet)")
    db.close()
    pairs.calltap("index", "compact", str(tmp_path), "--day", DAY)
    (merged,) = segments_of(tmp_path)
    db = connect()
    found = db.execute("SELECT stored_as, verdict, model, tokens_total FROM read_parquet(?)"
                       " ORDER BY stored_as", [str(tmp_path / merged)]).fetchall()
    db.close()
    assert found == [("new-1", "equal", None, 42), ("now-1", "equal", "model-2", None),
                     ("old-1", "diverged", None, None)]
