"""The upload addon: finalized pairs go from the local spool to the bucket, off the relay path.

A pair is queued when its pair.json is written (and the keep addon keeps it), and at start for
every finalized pair an earlier run left in the spool (at least once). Uploading a pair claims its
key with a create-only `.claim` object holding the pair's `capture_id` (its own claim: a resumed
upload; another's: the next key, `<id>+2`, `<id>+3`, …), writes the bodies create-only, then
pair.json last, so a reader that lists pair.json finds the whole pair; only then is the spool copy
deleted. A store that fails is retried with backoff, forever: the spool holds the pairs up to the
recordings quota, then recording pauses, and the traffic never waits on the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from calltap import recordings
from calltap.config import Config, ConfigError
from calltap.proxy.capture import Recorder
from calltap.proxy.hooks import Addon, PairCompared
from calltap.proxy.index_rows import IndexRows
from calltap.proxy.keeping import Keeping
from calltap.storage import Storage, StoreError

UPLOADERS = 4
"""Pairs uploaded at once."""
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
UNAVAILABLE_LOG_INTERVAL = 60.0
"""At most one `store.unavailable` line a minute, however many uploads fail."""
CLAIM = ".claim"


class Uploads(Addon):
    """Owns the bucket's `Storage`, the queue of finalized pairs and the uploaders."""

    def __init__(self, config: Config, recorder: Recorder, keeping: Keeping, logger: Any,
                 registry: CollectorRegistry, index: IndexRows | None = None) -> None:
        assert config.bucket is not None
        self.url = config.bucket
        self.spool = config.recordings
        self.recorder = recorder
        self.keeping = keeping
        self.log = logger
        self.storage = Storage(config.bucket)
        self.index = index
        """Told of each pair once its last object is stored, for the pair's index row."""
        self.queue: asyncio.Queue[Path] = asyncio.Queue()
        self.pending: dict[Path, float] = {}
        """Pairs waiting or being uploaded, with when they were queued."""
        self.reachable: bool | None = None
        self._last_unavailable = -UNAVAILABLE_LOG_INTERVAL
        self.backlog = Gauge("calltap_store_backlog_pairs",
                             "Finalized pairs in the spool not yet stored", registry=registry)
        self.uploads = Counter("calltap_store_uploads", "Pair uploads by result",
                               ["result"], registry=registry)
        self.seconds = Histogram("calltap_store_upload_seconds",
                                 "Seconds to store one pair's objects", registry=registry)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Check the bucket (a missing one or refused credentials: ConfigError; unreachable: go
        on and spool), queue what the spool still holds, run the uploaders."""
        try:
            await self.storage.check()
            self.reachable = True
        except StoreError as error:
            if error.refused:
                raise ConfigError(f"recordings: {self.url}: {error}") from None
            self._unavailable(error)
        for directory in await asyncio.to_thread(finalized_pairs, self.spool):
            self._enqueue(directory)
        workers = [asyncio.create_task(self._uploader()) for _ in range(UPLOADERS)]
        try:
            yield
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    def pair_compared(self, event: PairCompared) -> None:
        if event.path is not None and self.keeping.kept(event):
            self._enqueue(event.recording.directory)

    def health(self) -> dict[str, Any]:
        oldest = min(self.pending.values(), default=None)
        return {"store": {"url": self.url, "reachable": self.reachable,
                          "backlog_pairs": len(self.pending),
                          "oldest_pending_s": round(time.monotonic() - oldest, 3)
                          if oldest is not None else None}}

    def _enqueue(self, directory: Path) -> None:
        if directory not in self.pending:
            self.pending[directory] = time.monotonic()
            self.backlog.set(len(self.pending))
            self.queue.put_nowait(directory)

    async def _uploader(self) -> None:
        while True:
            directory = await self.queue.get()
            await self._upload_until_stored(directory)
            self.pending.pop(directory, None)
            self.backlog.set(len(self.pending))

    async def _upload_until_stored(self, directory: Path) -> None:
        backoff = FIRST_BACKOFF
        while True:
            started = time.monotonic()
            try:
                freed = await self._upload(directory)
            except StoreError as error:
                self.uploads.labels(result="retried").inc()
                self._unavailable(error)
                await asyncio.sleep(backoff * random.uniform(0.5, 1.0))
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            except (OSError, ValueError) as error:
                self.uploads.labels(result="unreadable").inc()
                self.log.error("store.unreadable", capture=str(directory),
                               error=type(error).__name__)
                return
            self.seconds.observe(time.monotonic() - started)
            self.uploads.labels(result="stored").inc()
            self.recorder.account(-freed)
            if self.reachable is False:
                self.log.info("store.recovered", url=self.url)
            self.reachable = True
            return

    async def _upload(self, directory: Path) -> int:
        """Store one pair from the spool and delete it there; the bytes freed."""
        files, document = await asyncio.to_thread(read_pair_files, directory)
        day, key = directory.parent.name, directory.name
        capture_id = str(document.get("capture_id") or f"{day}/{key}")
        stored = await self._claim(day, key, capture_id)
        await asyncio.gather(*(self.storage.put_new(f"{day}/{stored}/{name}", data)
                               for name, data in files.items()))
        if stored != key:
            document["stored_as"] = stored
        pair_json = recordings.encode_pair(document)
        await self.storage.put_new(f"{day}/{stored}/{recordings.PAIR_JSON}", pair_json)
        if self.index is not None:
            self.index.stored(document, files.get(recordings.request_name("downstream")), day,
                              stored)
        await asyncio.to_thread(shutil.rmtree, directory, True)
        return sum(len(data) for data in files.values()) + len(pair_json)

    async def _claim(self, day: str, key: str, capture_id: str) -> str:
        """The key this capture is stored under: the first whose claim is free or its own."""
        base, _, suffix = key.partition("+")
        for number in range(int(suffix) if suffix.isdigit() else 1, 1_000_000):
            candidate = base if number == 1 else f"{base}+{number}"
            claim = f"{day}/{candidate}/{CLAIM}"
            if await self.storage.put_new(claim, capture_id.encode()):
                return candidate
            if await self.storage.read(claim) == capture_id.encode():
                return candidate
        raise StoreError("no free key")

    def _unavailable(self, error: StoreError) -> None:
        self.reachable = False
        now = time.monotonic()
        if now - self._last_unavailable >= UNAVAILABLE_LOG_INTERVAL:
            self._last_unavailable = now
            self.log.warning("store.unavailable", url=self.url, error=str(error),
                             backlog_pairs=len(self.pending))


def finalized_pairs(spool: Path) -> list[Path]:
    """Capture directories in the spool whose pair.json is written, oldest day first."""
    try:
        days = sorted(entry for entry in spool.iterdir() if recordings.is_day(entry.name))
    except OSError:
        return []
    return [directory for day in days for directory in sorted(day.iterdir())
            if (directory / recordings.PAIR_JSON).is_file()]


def read_pair_files(directory: Path) -> tuple[dict[str, bytes], dict[str, Any]]:
    """A finalized pair's body and request files by name, and its pair.json."""
    files = {name: (directory / name).read_bytes()
             for name in recordings.capture_files(directory)}
    document = orjson.loads((directory / recordings.PAIR_JSON).read_bytes())
    if not isinstance(document, dict):
        raise ValueError("pair.json is not an object")
    return files, document
