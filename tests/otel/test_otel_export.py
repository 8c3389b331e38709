"""calltap exporting to a real OTLP/HTTP receiver on loopback (aiohttp, decoding the protobuf):
the span's place on the client's trace, its status and events as they arrive on the wire, the
log-record twins; a receiver that is down or hangs costs spans (counted, said once), never
traffic; `calltap serve` flushes its spans on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.proxy.test_serve import read_event
from tests.support.logs import LogLines
from tests.support.otlp import otlp_receiver

from calltap.demo import loopback
from calltap.fakes import DEFECT_HEADER, FakeProvider
from calltap.fakes.provider import CHAT_PATH, TOOLS_REQUEST
from calltap.otel.export import FLUSH_TIMEOUT
from calltap.otel.settings import read_otel
from calltap.proxy.app import Calltap

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
SPAN_KIND_CLIENT = 3
STATUS_ERROR = 2


@asynccontextmanager
async def exporting(recordings: Path, endpoint: str,
                    **otel: Any) -> AsyncIterator[tuple[Calltap, LogLines]]:
    log = LogLines()
    settings = read_otel({"endpoint": endpoint, **otel}, {})
    async with loopback(FakeProvider(), recordings, log, compare_workers=1,
                        otel=settings) as (_gateway, calltap):
        yield calltap, log


async def send(calltap: Calltap, client: aiohttp.ClientSession,
               headers: dict[str, str] | None = None) -> tuple[bytes, Path, dict[str, str]]:
    """A streamed chat through the front; the bytes the client got, its capture and what the
    gateway was sent."""
    async with client.post(f"{calltap.front_url}{CHAT_PATH}", json=TOOLS_REQUEST,
                           headers=headers or {}) as response:
        assert response.status == 200
        body = await response.read()
        request_id = response.headers["X-Request-ID"]
    pair = await calltap.wait_compared(request_id)
    (directory,) = calltap.recordings.glob(f"*/{request_id}")
    sent = dict(pair["legs"]["upstream"]["request_headers"])
    return body, directory, sent


async def test_the_span_arrives_on_the_clients_trace_with_its_finding(
        tmp_path: Path, client: aiohttp.ClientSession) -> None:
    async with otlp_receiver() as receiver:
        async with exporting(tmp_path, receiver.url, logs=True) as (calltap, _log):
            await send(calltap, client, {"traceparent": TRACEPARENT,
                                         DEFECT_HEADER: "drop-second-call"})
        (span,) = receiver.spans
        assert (span.trace_id, span.parent_span_id) == (CLIENT_TRACE, CLIENT_SPAN)
        assert span.kind == SPAN_KIND_CLIENT
        assert span.name == "chat gpt-4o-mini"
        assert (span.status_code, span.status_message) == (
            STATUS_ERROR, "TOOL_CALLS_DROPPED, TOOL_CALL_SET_CHANGED")
        assert span.resource["service.name"] == "calltap"
        assert span.start < span.end
        labels = [attributes["gen_ai.evaluation.score.label"] for name, attributes in span.events
                  if name == "gen_ai.evaluation.result"]
        assert labels == ["TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED"]
        twins = [(log.event_name, log.trace_id, log.span_id,
                  log.attributes["gen_ai.evaluation.score.label"]) for log in receiver.logs]
        assert twins == [("gen_ai.evaluation.result", CLIENT_TRACE, span.span_id, label)
                         for label in labels]


async def test_a_minted_traceparent_is_the_span_the_gateways_spans_hang_from(
        tmp_path: Path, client: aiohttp.ClientSession) -> None:
    async with otlp_receiver() as receiver:
        async with exporting(tmp_path, receiver.url) as (calltap, _log):
            _body, _directory, sent = await send(calltap, client)
        (span,) = receiver.spans
        _version, trace_id, parent, _flags = sent["traceparent"].split("-")
        assert (span.trace_id, span.span_id, span.parent_span_id) == (trace_id, parent, "")
        assert span.status_code == 0 and span.events == []
        assert receiver.logs == []


async def test_export_sends_the_configured_headers(tmp_path: Path,
                                                   client: aiohttp.ClientSession) -> None:
    async with otlp_receiver() as receiver:
        async with exporting(tmp_path, receiver.url,
                             headers={"Authorization": "Basic c2VjcmV0"}) as (calltap, log):
            await send(calltap, client)
        assert receiver.headers[0]["Authorization"] == "Basic c2VjcmV0"
        (started,) = log.lines("serve.started")
        assert "c2VjcmV0" not in json.dumps(started)
        assert started["config"]["otel"]["headers"] == ["authorization"]


async def dropped_spans(calltap: Calltap, client: aiohttp.ClientSession) -> dict[str, float]:
    async with client.get(f"{calltap.admin_url}/metrics") as response:
        text = (await response.read()).decode()
    return {line.split('reason="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("calltap_otel_dropped_total{") and 'signal="spans"' in line}


@pytest.mark.parametrize("mode", ["closed", "fail"])
async def test_a_dead_receiver_costs_counted_spans_and_no_traffic(
        tmp_path: Path, client: aiohttp.ClientSession, mode: str) -> None:
    async with otlp_receiver("fail") as failing:
        endpoint = failing.url if mode == "fail" else "http://127.0.0.1:9"
        async with exporting(tmp_path, endpoint, timeout=1.0) as (calltap, log):
            sent = [await send(calltap, client, {"traceparent": TRACEPARENT}) for _ in range(3)]
            for body, directory, _headers in sent:
                assert body == (directory / "upstream.sse").read_bytes()
                assert body == (directory / "downstream.sse").read_bytes()
            for _ in range(40):
                if (await dropped_spans(calltap, client))["export_failed"] >= 3:
                    break
                await asyncio.sleep(0.25)
            assert (await dropped_spans(calltap, client))["export_failed"] == 3
            assert calltap.health()["otel"] == {"exported": 0, "dropped": 3, "queued": 0}
            for _ in range(20):
                if log.lines("otel.unavailable"):
                    break
                await asyncio.sleep(0.25)
            (said,) = log.lines("otel.unavailable")
            assert said["dropped"] == 3 and said["level"] == "warning"


async def test_a_hanging_receiver_neither_slows_traffic_nor_holds_up_shutdown(
        tmp_path: Path, client: aiohttp.ClientSession) -> None:
    async with (otlp_receiver("hang") as hanging,
                exporting(tmp_path, hanging.url, timeout=30.0) as (calltap, _log)):
        for _ in range(3):
            body, directory, _headers = await send(calltap, client)
            assert body == (directory / "upstream.sse").read_bytes()
        for _ in range(40):
            if hanging.requests:
                break
            await asyncio.sleep(0.1)
        assert hanging.requests == 1
        await send(calltap, client)
        stopping = time.monotonic()
        await calltap.stop(grace=0.5)
        assert time.monotonic() - stopping < FLUSH_TIMEOUT + 3
        assert calltap.health()["otel"]["dropped"] == 1


async def test_serve_flushes_its_spans_on_sigterm(tmp_path: Path,
                                                  client: aiohttp.ClientSession) -> None:
    """`calltap serve` (the back alone, in front of the fake provider) sent SIGTERM right after
    a leg was checked: the span is at the receiver by the time the process has exited 0."""
    async with otlp_receiver() as receiver, FakeProvider() as provider:
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("CALLTAP_", "OTEL_"))}
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="calltap-test",
                   PYTHONUNBUFFERED="1")
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "calltap", "serve", "--provider", provider.url, "--back",
            "127.0.0.1:0", "--admin", "off", "--recordings", str(tmp_path / "rec"),
            cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE)
        assert process.stdout is not None
        started = await read_event(process.stdout, "serve.started")
        async with client.post(started["back"] + CHAT_PATH, json=TOOLS_REQUEST,
                               headers={"traceparent": TRACEPARENT}) as response:
            await response.read()
        await read_event(process.stdout, "leg.checked")
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
        (span,) = receiver.spans
        assert (span.trace_id, span.parent_span_id) == (CLIENT_TRACE, CLIENT_SPAN)
        assert span.resource["service.name"] == "calltap-test"
        assert span.attributes["calltap.mode"] == "check"
