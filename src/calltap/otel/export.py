"""The OpenTelemetry addon: each compared pair's span (and, with a logs endpoint, each finding's
log record) sent over OTLP/HTTP, batched on a thread of its own, bounded and fail-open.

`span.py` decides what the span says, `wire.py` writes it as OTLP's protobuf, `transport.py`
posts it; a `Shipper` per signal holds the queue and the thread. On the relay's loop a pair costs
building its span and an append; encoding and posting happen on the shipper's thread. A receiver
that is down costs spans, counted in `calltap_otel_dropped_total` and said at most once a minute
(`otel.unavailable`); never traffic. Leaving `running()` (SIGTERM) flushes what is queued,
within `FLUSH_TIMEOUT` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from calltap.otel import wire
from calltap.otel.settings import OtelSettings
from calltap.otel.shipper import EXPORT_FAILED, QUEUE_FULL, SHUTDOWN, Shipper
from calltap.otel.span import PairSpan, pair_span
from calltap.otel.transport import Poster
from calltap.proxy.hooks import Addon, PairCompared

FLUSH_TIMEOUT = 5.0
"""Seconds shutdown waits for the last spans to reach the receiver."""
SAID_EVERY = 60.0
"""Seconds between two `otel.unavailable` lines while spans keep being dropped."""


class OtelExport(Addon):
    """Ships a span per compared pair; `health()` says how many went out and were dropped."""

    def __init__(self, settings: OtelSettings, logger: Any, registry: CollectorRegistry) -> None:
        self.settings = settings
        self.log = logger
        self.dropped = Counter(
            "calltap_otel_dropped",
            "Spans and log records not exported (the receiver down or slow, the queue full, or"
            " shutdown's flush deadline passed), by signal and reason; traffic is unaffected",
            ["signal", "reason"], registry=registry)
        for signal in ("spans", "logs"):
            for reason in (QUEUE_FULL, EXPORT_FAILED, SHUTDOWN):
                self.dropped.labels(signal, reason)
        self.posters = [Poster.to(settings.traces_endpoint, settings)]
        self.spans = Shipper("otel-spans", self._exporter(self.posters[0], wire.span_message),
                             settings.max_queue, self._on_drop("spans"))
        self.logs: Shipper | None = None
        if settings.logs_endpoint is not None:
            self.posters.append(Poster.to(settings.logs_endpoint, settings))
            self.logs = Shipper("otel-logs", self._exporter(self.posters[1], wire.log_messages),
                                settings.max_queue, self._on_drop("logs"))
        self._unsaid = 0
        self._last_error: str | None = None
        self._said_at = float("-inf")

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        shippers = [shipper for shipper in (self.spans, self.logs) if shipper is not None]
        for shipper in shippers:
            shipper.start()
        try:
            yield
        finally:
            await asyncio.gather(*(asyncio.to_thread(shipper.close, FLUSH_TIMEOUT)
                                   for shipper in shippers))
            await self.housekeep(force=True)
            for poster in self.posters:
                poster.close()

    def health(self) -> dict[str, Any]:
        return {"otel": {"exported": self.spans.exported, "dropped": self.spans.dropped,
                         "queued": self.spans.queued}}

    def pair_compared(self, event: PairCompared) -> None:
        span = pair_span(event, content=self.settings.content)
        if span is None:
            return
        self.spans.put(span)
        if self.logs is not None and span.events:
            self.logs.put(span)

    async def housekeep(self, *, force: bool = False) -> None:
        """`otel.unavailable` at most once a minute while spans are being dropped (and once
        more on the way out for what the last minute dropped)."""
        now = time.monotonic()
        if self._unsaid and (force or now - self._said_at >= SAID_EVERY):
            self._said_at = now
            dropped, self._unsaid = self._unsaid, 0
            self.log.warning("otel.unavailable", dropped=dropped, error=self._last_error,
                             endpoint=self.settings.describe()["traces_endpoint"],
                             dropped_total=self.spans.dropped)

    def _exporter(self, poster: Poster, encode: Callable[[PairSpan], Any]
                  ) -> Callable[[list[PairSpan]], bool]:
        """A batch of spans as one export request of the shipper's signal: its spans, or each
        span's findings as log records."""
        resource = self.settings.resource

        def export(batch: list[PairSpan]) -> bool:
            messages: list[bytes] = []
            for span in batch:
                encoded = encode(span)
                if isinstance(encoded, bytes):
                    messages.append(encoded)
                else:
                    messages.extend(encoded)
            return poster.post(wire.export_request(resource, messages))
        return export

    def _on_drop(self, signal: str) -> Any:
        def dropped(count: int, reason: str, error: str | None) -> None:
            self.dropped.labels(signal, reason).inc(count)
            if signal == "spans":
                self._unsaid += count
                failure = self.posters[0].last_error if reason == EXPORT_FAILED else None
                self._last_error = error or failure or reason
        return dropped
