"""The OpenTelemetry addon: each compared pair's span (and, with a logs endpoint, each finding's
log record) sent over OTLP/HTTP, batched on a thread of its own, bounded and fail-open.

`span.py` decides what the span says; this module turns that into the SDK's span and log-record
objects and hands them to the OTLP/HTTP exporters through a `Shipper` each. Imported only when
export is on, so a calltap that does not export never loads the SDK. A receiver that is down
costs spans, counted in `calltap_otel_dropped_total` and said at most once a minute
(`otel.unavailable`); never traffic. Leaving `running()` (SIGTERM) flushes what is queued,
within `FLUSH_TIMEOUT` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)
from prometheus_client import CollectorRegistry, Counter

from calltap.otel.settings import OtelSettings
from calltap.otel.shipper import EXPORT_FAILED, QUEUE_FULL, SHUTDOWN, Shipper
from calltap.otel.span import PairSpan, pair_span
from calltap.proxy.hooks import Addon, PairCompared

FLUSH_TIMEOUT = 5.0
"""Seconds shutdown waits for the last spans to reach the receiver."""
SAID_EVERY = 60.0
"""Seconds between two `otel.unavailable` lines while spans keep being dropped."""
SCOPE = InstrumentationScope("calltap")
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
SEVERITIES = {"fatal": SeverityNumber.ERROR, "negotiable": SeverityNumber.WARN}


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
        self.resource = Resource.create({"service.name": settings.service_name})
        self._quiet_sdk_logs()
        self.spans = Shipper("otel-spans", self._span_exporter(), settings.max_queue,
                             self._on_drop("spans"))
        self.logs = (Shipper("otel-logs", self._log_exporter(), settings.max_queue,
                             self._on_drop("logs"))
                     if settings.logs_endpoint else None)
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
            for shipper in shippers:
                await asyncio.to_thread(shipper.close, FLUSH_TIMEOUT)
            await self.housekeep(force=True)

    def health(self) -> dict[str, Any]:
        return {"otel": {"exported": self.spans.exported, "dropped": self.spans.dropped,
                         "queued": self.spans.queued}}

    def pair_compared(self, event: PairCompared) -> None:
        span = pair_span(event, content=self.settings.content)
        if span is None:
            return
        self.spans.put(self._readable(span))
        if self.logs is not None:
            for record in self._records(span):
                self.logs.put(record)

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

    # -- the SDK's objects ---------------------------------------------------------------------

    def _readable(self, span: PairSpan) -> ReadableSpan:
        context = SpanContext(span.trace_id, span.span_id, False, SAMPLED)
        parent = (SpanContext(span.trace_id, span.parent_span_id, True, SAMPLED)
                  if span.parent_span_id is not None else None)
        status = (Status(StatusCode.ERROR, span.error) if span.error is not None
                  else Status(StatusCode.UNSET))
        return ReadableSpan(
            span.name, context=context, parent=parent, resource=self.resource,
            attributes=span.attributes, kind=SpanKind.CLIENT, status=status,
            events=[Event(item.name, item.attributes, item.timestamp) for item in span.events],
            start_time=span.start, end_time=span.end, instrumentation_scope=SCOPE)

    def _records(self, span: PairSpan) -> list[ReadableLogRecord]:
        """Each finding event again as an OTLP log record in the span's context: where
        OpenTelemetry is moving events, for receivers that read them there."""
        context = set_span_in_context(NonRecordingSpan(
            SpanContext(span.trace_id, span.span_id, False, SAMPLED)))
        return [ReadableLogRecord(LogRecord(
            timestamp=item.timestamp, observed_timestamp=item.timestamp, context=context,
            event_name=item.name, attributes=item.attributes,
            body=item.attributes["gen_ai.evaluation.explanation"],
            severity_number=SEVERITIES.get(item.attributes["calltap.severity"],
                                           SeverityNumber.WARN),
            severity_text=item.attributes["calltap.severity"]),
            resource=self.resource, instrumentation_scope=SCOPE) for item in span.events]

    def _span_exporter(self) -> Any:
        exporter = OTLPSpanExporter(endpoint=self.settings.traces_endpoint,
                                    headers=self.settings.headers, timeout=self.settings.timeout)
        return lambda batch: exporter.export(batch) is SpanExportResult.SUCCESS

    def _log_exporter(self) -> Any:
        exporter = OTLPLogExporter(endpoint=self.settings.logs_endpoint,
                                   headers=self.settings.headers, timeout=self.settings.timeout)
        return lambda batch: exporter.export(batch) is LogRecordExportResult.SUCCESS

    def _on_drop(self, signal: str) -> Any:
        def dropped(count: int, reason: str, error: str | None) -> None:
            self.dropped.labels(signal, reason).inc(count)
            if signal == "spans":
                self._unsaid += count
                self._last_error = error or reason
        return dropped

    @staticmethod
    def _quiet_sdk_logs() -> None:
        """The exporters log each failed batch through `logging` (stderr, unstructured);
        calltap says it once a minute in its own log instead."""
        for name in ("opentelemetry.exporter", "opentelemetry.sdk"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
