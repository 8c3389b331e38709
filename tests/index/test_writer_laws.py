"""The writer's law: whatever happens between appending a row and its segment — seals, flushes,
a store failing part way through a flush, a process killed mid-line (its spool dropped unclosed,
a torn last line left), killed after a segment was stored but before its sealed file was
deleted — every row appended is read exactly once by a Catalog, no segment holds a row twice,
and the rows appended since the last flush are still in the spool."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.store.index_checks import catalog_rows, normal, segment_rows

from calltap.index.parquet import row_line
from calltap.index.pending import CURRENT, Pending
from calltap.index.rows import row_of
from calltap.index.writer import SegmentWriter
from calltap.storage import Storage, StoreError

DAYS = ("2026-03-01", "2026-03-02", "2026-03-03")
REPLICA = "writer-1"

OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.sampled_from(DAYS)),
    st.tuples(st.just("seal"), st.none()),
    st.tuples(st.just("flush"), st.none()),
    st.tuples(st.just("crash"), st.floats(0.0, 1.0)),
    st.tuples(st.just("crash-before-unlink"), st.none()),
    st.tuples(st.just("store-fails"), st.integers(0, 3)),
), max_size=16)


def row(number: int, day: str) -> dict[str, Any]:
    started = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(seconds=number)
    legs = {"downstream": {"path": "/v1/chat/completions", "bytes": number,
                           "started_at": started.isoformat(),
                           "finished_at": (started + timedelta(seconds=1)).isoformat()}}
    document = {"request_id": f"req-{number}", "capture_id": f"cap-{number}", "legs": legs,
                "comparison": {"verdict": "diverged" if number % 3 else "equal",
                               "findings": [{"code": "DONE_MISSING", "severity": "fatal",
                                             "side": "downstream"}] if number % 3 else []}}
    return row_of(document, None, day=day, stored_as=f"req-{number}", replica=REPLICA)


class Writer:
    """One writer's spool and segment writer over a local tree, and what was appended."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.storage = Storage(root)
        self.directory = root / "_index" / "pending"
        self.appended: dict[tuple[str, str], dict[str, Any]] = {}
        self.unflushed: set[tuple[str, str]] = set()
        self.start()

    def start(self) -> None:
        """A process (re)started: a new spool object on the same directory."""
        self.pending = Pending(self.directory)
        self.writer = SegmentWriter(self.storage, self.pending, REPLICA)

    def append(self, day: str) -> None:
        new = row(len(self.appended), day)
        self.pending.append(new)
        key = (day, new["stored_as"])
        self.appended[key] = normal(new)
        self.unflushed.add(key)

    def flush(self) -> None:
        asyncio.run(self.writer.flush())
        self.unflushed.clear()

    def crash(self, torn: float) -> None:
        """Killed while writing a row: part of its line is in the file, the spool never closed
        (its descriptor dies with the process)."""
        line = row_line(row(10_000, DAYS[0]))
        cut = int(torn * (len(line) - 2))
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / CURRENT).open("ab") as current:
            current.write(line[:cut])
        if self.pending._fd is not None:
            os.close(self.pending._fd)
        self.start()

    def store_fails(self, after: int) -> None:
        """A flush whose store takes `after` segments, then fails: the rest stay sealed."""
        self.writer.storage = FailingStorage(self.root, after)
        with contextlib.suppress(StoreError):
            asyncio.run(self.writer.flush())
        self.unflushed.clear()
        self.writer.storage = self.storage

    def crash_before_unlink(self) -> None:
        """Killed after its segments were stored, before the sealed files were deleted."""
        self.pending.seal()
        kept = {path.name: path.read_bytes() for path in self.pending.sealed()}
        self.flush()
        for name, data in kept.items():
            (self.directory / name).write_bytes(data)
        self.start()


class FailingStorage(Storage):
    """A store that takes `after` objects, then answers every write with an error."""

    def __init__(self, root: Path, after: int) -> None:
        super().__init__(root)
        self.after = after

    async def put_new(self, key: str, data: bytes) -> bool:
        if self.after == 0:
            raise StoreError("store unreachable or not answering")
        self.after -= 1
        return await super().put_new(key, data)


@settings(max_examples=30)
@given(operations=OPERATIONS)
@example(operations=[("append", DAYS[0]), ("seal", None), ("crash", 1.0)])
@example(operations=[("crash", 1.0), ("append", DAYS[0])])
def test_every_row_appended_is_read_once(operations: list[tuple[str, Any]]) -> None:
    with tempfile.TemporaryDirectory(prefix="calltap-writer-law-") as scratch:
        root = Path(scratch, "recordings")
        writer = Writer(root)
        try:
            for name, argument in operations:
                if name == "append":
                    writer.append(argument)
                elif name == "seal":
                    writer.pending.seal()
                elif name == "flush":
                    writer.flush()
                elif name == "crash":
                    writer.crash(argument)
                elif name == "store-fails":
                    writer.store_fails(argument)
                else:
                    writer.crash_before_unlink()
            read = catalog_rows(root, Path(scratch, "cache"))
            assert read == writer.appended
            stored = segment_rows(root)
            keys = [(r["day"], r["stored_as"]) for r in stored]
            assert len(keys) == len(set(keys)), "a row stored twice"
            assert set(keys) | spooled(writer.directory) == set(writer.appended)
            assert spooled(writer.directory) >= writer.unflushed
            writer.flush()
            assert sorted(keys_of(segment_rows(root))) == sorted(writer.appended)
            assert spooled(writer.directory) == set()
        finally:
            writer.pending.close()
            shutil.rmtree(root, ignore_errors=True)


def keys_of(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["day"], r["stored_as"]) for r in rows]


def spooled(directory: Path) -> set[tuple[str, str]]:
    """The whole rows in the spool's files, by pair."""
    found = set()
    for path in directory.glob("*.jsonl"):
        for line in path.read_bytes().split(b"\n"):
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            found.add((value["day"], value["stored_as"]))
    return found


def test_rows_appended_while_segments_are_written_are_each_stored(tmp_path: Path) -> None:
    """The relay's thread appends while the loop seals and writes segments, as in serve: no row
    lands in a file already sealed and made a segment (and then deleted under it)."""
    root = tmp_path / "recordings"
    pending = Pending(root / "_index" / "pending")
    writer = SegmentWriter(Storage(root), pending, REPLICA)
    count = 3000

    def append() -> None:
        for number in range(count):
            pending.append(row(number, DAYS[number % 2]))
            time.sleep(0.0002)

    async def flush_while_appending() -> None:
        appender = threading.Thread(target=append)
        appender.start()
        while appender.is_alive():
            await writer.flush()
        appender.join()
        await writer.flush()

    asyncio.run(flush_while_appending())
    pending.close()
    assert sorted(keys_of(segment_rows(root))) == sorted(
        (DAYS[number % 2], f"req-{number}") for number in range(count))
