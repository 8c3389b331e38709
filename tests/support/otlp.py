"""A real OTLP/HTTP receiver on loopback (aiohttp), decoding what it gets with opentelemetry-proto:
the spans and log records calltap exports, as plain data a test can assert on.

`mode` makes it a receiver in trouble: `hang` reads the request and never answers, `fail`
answers 503 to everything.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

Mode = Literal["ok", "hang", "fail"]


def value(any_value: AnyValue) -> Any:
    """An OTLP AnyValue as the Python value it holds."""
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(item) for item in any_value.array_value.values]
    return getattr(any_value, kind) if kind is not None else None


def attributes(items: Any) -> dict[str, Any]:
    return {item.key: value(item.value) for item in items}


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    status_code: int
    status_message: str
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]


@dataclass
class ReceivedLog:
    event_name: str
    trace_id: str
    span_id: str
    severity_text: str
    body: Any
    attributes: dict[str, Any]


@dataclass
class Receiver:
    url: str = ""
    mode: Mode = "ok"
    spans: list[ReceivedSpan] = field(default_factory=list)
    logs: list[ReceivedLog] = field(default_factory=list)
    requests: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_spans(self, count: int, timeout: float = 10.0) -> list[ReceivedSpan]:
        async with asyncio.timeout(timeout):
            while len(self.spans) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.spans

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests += 1
        self.headers.append(dict(request.headers))
        if self.mode == "hang":
            await asyncio.Event().wait()
        if self.mode == "fail":
            return web.Response(status=503)
        if request.path.endswith("/v1/traces"):
            self._spans(body)
        elif request.path.endswith("/v1/logs"):
            self._logs(body)
        else:
            return web.Response(status=404)
        self.arrived.set()
        return web.Response(body=b"", content_type="application/x-protobuf")

    def _spans(self, body: bytes) -> None:
        message = ExportTraceServiceRequest.FromString(body)
        for resource_spans in message.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(ReceivedSpan(
                        span.name, span.trace_id.hex(), span.span_id.hex(),
                        span.parent_span_id.hex(), span.kind, span.status.code,
                        span.status.message, span.start_time_unix_nano,
                        span.end_time_unix_nano, attributes(span.attributes),
                        [(event.name, attributes(event.attributes)) for event in span.events],
                        resource))

    def _logs(self, body: bytes) -> None:
        message = ExportLogsServiceRequest.FromString(body)
        for resource_logs in message.resource_logs:
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    self.logs.append(ReceivedLog(
                        record.event_name, record.trace_id.hex(), record.span_id.hex(),
                        record.severity_text, value(record.body),
                        attributes(record.attributes)))


@asynccontextmanager
async def otlp_receiver(mode: Mode = "ok") -> AsyncIterator[Receiver]:
    """A receiver listening on a loopback port the system picks; `url` is its base URL."""
    receiver = Receiver(mode=mode)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/{tail:.*}", receiver.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    receiver.url = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        await runner.cleanup()
