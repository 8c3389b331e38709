"""A bounded queue and one thread that exports it in batches: what keeps the relay's loop from
ever waiting for a trace receiver.

The loop only appends to a deque (or counts a drop when it is full); a daemon thread wakes once
a second, or as soon as a batch is ready, and hands batches to the exporter. A receiver that is
down or hangs costs the batches it fails (counted by `on_drop`), never a wait on the loop.
Closing flushes what is queued within a deadline; what is still queued then is dropped and
counted, so a dead receiver cannot hold up a shutdown.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

BATCH = 512
INTERVAL = 1.0
QUEUE_FULL = "queue_full"
EXPORT_FAILED = "export_failed"
SHUTDOWN = "shutdown"


class Shipper:
    """Items in on the loop's thread (`put`), batches out on the shipper's own."""

    def __init__(self, name: str, export: Callable[[list[Any]], bool], max_queue: int,
                 on_drop: Callable[[int, str, str | None], None], *, batch: int = BATCH,
                 interval: float = INTERVAL) -> None:
        self.name = name
        self._export = export
        self.max_queue = max_queue
        self._on_drop = on_drop
        self.batch = batch
        self.interval = interval
        self._queue: deque[Any] = deque()
        self._wake = threading.Event()
        self._stopping = False
        self._lock = threading.Lock()
        self.exported = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name=f"calltap-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def put(self, item: Any) -> None:
        """Queue one item, or count it dropped when the queue is full. Never blocks."""
        if self._stopping or len(self._queue) >= self.max_queue:
            self._dropped(1, SHUTDOWN if self._stopping else QUEUE_FULL, None)
            return
        self._queue.append(item)
        if len(self._queue) >= self.batch:
            self._wake.set()

    def wake(self) -> None:
        """Export what is queued now rather than at the next interval."""
        self._wake.set()

    def close(self, timeout: float) -> None:
        """Export what is queued, waiting at most `timeout` seconds; drop the rest."""
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive() or not self._thread.ident:
            left = len(self._queue)
            self._queue.clear()
            if left:
                self._dropped(left, SHUTDOWN, None)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            self._drain()
            if self._stopping:
                return

    def _drain(self) -> None:
        while self._queue:
            batch: list[Any] = []
            while self._queue and len(batch) < self.batch:
                batch.append(self._queue.popleft())
            try:
                ok, error = self._export(batch), None
            except Exception as exc:  # an exporter bug must not end the thread
                ok, error = False, type(exc).__name__
            if ok:
                with self._lock:
                    self.exported += len(batch)
            else:
                self._dropped(len(batch), EXPORT_FAILED, error)

    def _dropped(self, count: int, reason: str, error: str | None) -> None:
        with self._lock:
            self.dropped += count
        self._on_drop(count, reason, error)
