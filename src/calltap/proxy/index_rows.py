"""The index addon: a row for every stored pair, written to segments about once a minute.

A pair is stored when its pair.json is written and kept (a local tree) or when its last object
is in the bucket (the uploader says so). Its row is appended to the spool of rows at once, so a
crash loses none; every `index_interval` seconds, and on the way out (SIGTERM), the rows are
sealed into segments in the recordings location. A store that fails keeps the rows for the next
round; traffic never waits on any of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from calltap import recordings
from calltap.config import Config, ConfigError
from calltap.index import layout
from calltap.index.pending import Pending
from calltap.index.rows import model_of, row_of
from calltap.index.writer import SegmentWriter
from calltap.proxy.hooks import Addon, PairCompared
from calltap.proxy.keeping import UNREMARKABLE, Keeping
from calltap.storage import Storage, StoreError

PENDING = "pending"
UNAVAILABLE_LOG_INTERVAL = 60.0
LAST_ROUND_SECONDS = 5.0
"""How long the way out waits for the last round: a store that does not answer then keeps the
rows spooled for the next start, and never holds a SIGTERM past a pod's grace period."""


def replica_of(config: Config, environ: dict[str, str] | None = None) -> str:
    """The writer's name: `replica`, else HOSTNAME (a pod's name), else the host name."""
    environ = os.environ if environ is None else environ  # type: ignore[assignment]
    return layout.replica_name(config.replica or environ.get("HOSTNAME")
                               or socket.gethostname())


def pending_directory(spool: Path) -> Path:
    """Where a writer spools its rows: beside the pairs of its local tree or spool."""
    return spool / layout.INDEX / PENDING


def kept_because(keep: str, row: dict[str, Any]) -> str:
    """Why a stored pair was kept: `all` (keep = all), `diverged` (worth a look), or `sampled`
    (an equal pair kept at keep_equal_sample's rate)."""
    if keep == "all":
        return "all"
    unremarkable = row["verdict"] in UNREMARKABLE and "fatal" not in row["severities"]
    return "sampled" if unremarkable else "diverged"


class IndexRows(Addon):
    """Owns the spool of rows and the segment writer of one replica."""

    def __init__(self, config: Config, keeping: Keeping, logger: Any,
                 registry: CollectorRegistry) -> None:
        self.config = config
        self.keeping = keeping
        self.log = logger
        self.replica = replica_of(config)
        self.pending = Pending(pending_directory(config.recordings))
        self.writer: SegmentWriter | None = None
        """Made on start: opening a local tree creates it, which can fail (a ConfigError)."""
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="calltap-index")
        self._last_unavailable = -UNAVAILABLE_LOG_INTERVAL
        self._last_merge_failed = -UNAVAILABLE_LOG_INTERVAL
        self.segments = Counter("calltap_index_segments", "Index segments written by result",
                                ["result"], registry=registry)
        self.rows = Counter("calltap_index_rows", "Index rows spooled", registry=registry)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Store what an earlier run left, then a round every `index_interval`; on the way out
        a last round, so a SIGTERM leaves no row behind when the store answers."""
        self.writer = SegmentWriter(self._storage(), self.pending, self.replica)
        task = asyncio.create_task(self._rounds())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await asyncio.get_running_loop().run_in_executor(self._thread, lambda: None)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LAST_ROUND_SECONDS):
                    await self._flush()
            self.pending.close()
            self._thread.shutdown(wait=True)

    def pair_compared(self, event: PairCompared) -> None:
        """A local tree's pair is stored once its pair.json is written and kept."""
        if self.config.bucket is None and event.path is not None and self.keeping.kept(event):
            directory = event.recording.directory
            self._thread.submit(self._append, dict(event.document), directory.parent.name,
                                directory.name, directory)

    def stored(self, document: dict[str, Any], request: bytes | None, day: str,
               stored_as: str) -> None:
        """A bucket's pair is stored once its last object is (the uploader calls this)."""
        self._thread.submit(self._append, document, day, stored_as, None, request)

    def _append(self, document: dict[str, Any], day: str, key: str, directory: Path | None,
                request: bytes | None = None) -> None:
        row = row_of(document, request, day=day, stored_as=key, replica=self.replica)
        if row["model"] is None and directory is not None:
            row["model"] = model_of(recordings.request_body(
                directory, (document.get("legs") or {}).get("downstream")), row["route"])
        row["kept"] = kept_because(self.config.keep, row)
        try:
            self.pending.append(row)
        except OSError as error:
            self.log.error("index.unwritable", error=error.strerror or str(error))
            return
        self.rows.inc()

    async def _rounds(self) -> None:
        """The first round at once (what an earlier run left), in the background: a store that
        does not answer at start delays no listener."""
        while True:
            await self._flush()
            await asyncio.sleep(self.config.index_interval)

    def _storage(self) -> Storage:
        try:
            return Storage(self.config.bucket or self.config.recordings)
        except OSError as exc:
            raise ConfigError(f"recordings: cannot write to {self.config.recordings}:"
                              f" {exc.strerror or exc}") from None

    async def _flush(self) -> None:
        assert self.writer is not None
        try:
            done = await self.writer.flush()
        except StoreError as error:
            self.segments.labels(result="retried").inc()
            now = asyncio.get_running_loop().time()
            if now - self._last_unavailable >= UNAVAILABLE_LOG_INTERVAL:
                self._last_unavailable = now
                self.log.warning("index.unavailable", error=str(error))
            return
        except OSError as error:
            self.log.error("index.unwritable", error=error.strerror or str(error))
            return
        if done.segments:
            self.segments.labels(result="stored").inc(done.segments)
        if done.merged:
            self.segments.labels(result="merged").inc(done.merged)
        if done.merge_failed is not None:
            self.segments.labels(result="merge_failed").inc()
            now = asyncio.get_running_loop().time()
            if now - self._last_merge_failed >= UNAVAILABLE_LOG_INTERVAL:
                self._last_merge_failed = now
                self.log.warning("index.merge_failed", error=done.merge_failed)
        for name, why in done.rejected:
            self.segments.labels(result="rejected").inc()
            self.log.error("index.rejected", file=name, error=why)
