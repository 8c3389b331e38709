"""`Calltap`: the front, back and admin listeners in one asyncio loop, and their lifecycle.

Front: clients call it instead of the gateway. It settles the request id (the client's
`X-Request-ID` when safe, else a minted one; a capture key never reuses a directory), forwards
that key and a `traceparent` to the gateway, and returns the key to the client.
Back: the gateway calls it instead of the provider. It finds the front leg an attempt belongs to
(header, traceparent, fingerprint) and records the attempt into that capture.

Request bodies up to `max_fingerprint_body` are read whole before forwarding (they are small for
chat requests and the fingerprint needs them); larger ones are streamed through as they arrive.
Response bodies are always streamed. See relay.py for the byte pump, pairs.py for what happens
when a capture's legs have ended.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from aiohttp import HttpVersion11, web
from aiohttp.streams import StreamReader

from calltap import recordings
from calltap.config import Config, ConfigError, describe, public_url
from calltap.proxy.admin import admin_app
from calltap.proxy.analysis import Workers
from calltap.proxy.capture import Claim, Opener, Recorder, Sink
from calltap.proxy.fingerprint import request_fingerprint
from calltap.proxy.guard import (
    MAX_HEADER_COUNT,
    GuardedServer,
    Refused,
    RequestTooLarge,
    head_size,
    read_prefix,
    refusal,
    server_logger,
    too_large,
)
from calltap.proxy.ids import accept_client_id, new_request_id, new_traceparent, parse_traceparent
from calltap.proxy.logs import make_logger
from calltap.proxy.metrics import Metrics
from calltap.proxy.pairing import PairingBook
from calltap.proxy.pairs import Pairs, Recording
from calltap.proxy.relay import (
    Headers,
    Leg,
    Upstream,
    forwardable,
    relay,
)
from calltap.recordings import COMPLETE, REQUEST_TOO_LARGE, SHUTDOWN

REQUEST_ID = "X-Request-ID"
FINGERPRINT_INLINE_BYTES = 256 * 1024
HOUSEKEEPING_INTERVAL = 1.0
QUOTA_RESCAN_INTERVAL = 30.0
SHUTDOWN_CANCEL_WAIT = 5.0

Finish = Callable[[Leg], None]


class Calltap:
    """The recording proxy. `async with Calltap(config) as tap:` or `start()` / `stop()`."""

    def __init__(self, config: Config, *, log_stream: TextIO | None = None,
                 logger: Any = None, opener: Opener | None = None) -> None:
        self.config = config.validate()
        self.log = logger if logger is not None else make_logger(log_stream, config.log_level)
        self.recordings: Path = config.recordings
        self.book = (PairingBook(config.pairing_window, config.max_pending_pairs)
                     if config.front is not None and config.back is not None else None)
        self.workers = Workers(config.compare_workers, config.compare_niceness)
        self.metrics = Metrics(lambda: self.book.pending if self.book is not None else 0)
        self.recorder = Recorder(config.recordings, max_capture_bytes=config.max_capture_bytes,
                                 quota_bytes=config.disk_quota_bytes,
                                 on_failure=self._capture_failed, opener=opener)
        self.pairs = Pairs(recorder=self.recorder, book=self.book, metrics=self.metrics,
                           logger=self.log, workers=self.workers,
                           mask_patterns=config.mask_body_patterns,
                           redact_extra=config.redact_headers,
                           single_leg=self.book is None)
        self.gateway = self._upstream(config.gateway)
        self.provider = self._upstream(config.provider)
        self.front_url: str | None = None
        self.back_url: str | None = None
        self.admin_url: str | None = None
        self._runners: dict[str, web.BaseRunner] = {}
        self._legs: dict[asyncio.Task[Any], Leg] = {}
        self._housekeeping: asyncio.Task[None] | None = None
        self._compared = frozenset(config.compared_paths)
        self._stopping = False
        self._last_rescan = 0.0

    def _upstream(self, url: str | None) -> Upstream | None:
        if url is None:
            return None
        return Upstream(url, connections=self.config.upstream_connections,
                        connect_timeout=self.config.connect_timeout,
                        read_timeout=self.config.read_timeout)

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> Calltap:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    async def start(self) -> None:
        """Prepare the recordings tree, start the workers, then listen. Raises ConfigError
        (recordings not writable) or OSError (an address in use) with nothing left running.

        Everything alive once listening (modules, the comparator's tables, the apps) lives as
        long as the process, so it is moved out of the garbage collector's reach: a full
        collection then scans only what traffic created, instead of stalling every stream for
        tens of milliseconds now and then."""
        try:
            leftovers = await asyncio.to_thread(self.recorder.prepare)
        except OSError as exc:
            raise ConfigError(
                f"recordings: cannot write to {self.recordings}: {exc.strerror or exc}") from None
        self.recorder.start(asyncio.get_running_loop())
        try:
            await asyncio.to_thread(self.workers.warm)
            for upstream in (self.gateway, self.provider):
                if upstream is not None:
                    await upstream.start()
            await self._listen()
        except BaseException:
            await self._close_everything()
            await self.workers.stop()
            await self.recorder.stop()
            raise
        if leftovers:
            self.log.warning("recording.leftovers", count=len(leftovers), files=leftovers[:50])
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())
        self.log.info("serve.started", front=self.front_url, back=self.back_url,
                      admin=self.admin_url, pid=os.getpid(), config=describe(self.config))

    async def _listen(self) -> None:
        relays = {"front": (self.config.front, self._front, "downstream"),
                  "back": (self.config.back, self._back, "upstream")}
        for name, (address, handler, side) in relays.items():
            if address is not None:
                server = GuardedServer(handler, on_refused=self._refused_by_parser(side),
                                       **self._protocol_options(name))
                await self._serve(name, address, web.ServerRunner(
                    server, handle_signals=False, shutdown_timeout=1.0))
        if self.config.admin is not None:
            await self._serve("admin", self.config.admin, web.AppRunner(
                admin_app(self.health, self.metrics), handle_signals=False,
                handler_cancellation=True, shutdown_timeout=1.0,
                **self._protocol_options("admin")))

    def _protocol_options(self, listener: str) -> dict[str, Any]:
        """aiohttp connection settings: the header limits, no decompression, and aiohttp's own
        error log routed to calltap's log without the request bytes it would quote."""
        return {"access_log": None, "auto_decompress": False,
                "max_line_size": self.config.max_header_line,
                "max_field_size": self.config.max_header_line,
                "max_headers": MAX_HEADER_COUNT, "logger": server_logger(self.log, listener)}

    async def _serve(self, name: str, address: tuple[str, int], runner: web.BaseRunner) -> None:
        await runner.setup()
        self._runners[name] = runner
        site = web.TCPSite(runner, address[0], address[1], reuse_address=True)
        await site.start()
        host, port = runner.addresses[0][:2]
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        setattr(self, f"{name}_url", url)

    def _refused_by_parser(self, side: str) -> Refused:
        def refused(status: int, code: str, exc: BaseException | None) -> None:
            self._log_refusal(side, status, code, type(exc).__name__ if exc else None)
        return refused

    def _log_refusal(self, side: str, status: int, code: str, error: str | None) -> None:
        self.metrics.requests.labels(side, str(status)).inc()
        self.log.warning("request.refused", side=side, status=status, code=code, error=error)

    async def stop(self, grace: float | None = None) -> None:
        """Stop accepting, give in-flight streams `grace` seconds (default: the config's),
        cut the rest, then close every capture and write its pair.json."""
        if self._stopping:
            return
        self._stopping = True
        grace = self.config.grace_period if grace is None else grace
        self.log.info("serve.stopping", in_flight=len(self._legs), grace=grace)
        for runner in self._runners.values():
            for site in list(runner.sites):
                await site.stop()
        if self._legs:
            await asyncio.wait(list(self._legs), timeout=grace)
        remaining = list(self._legs.items())
        for task, leg in remaining:
            leg.cancel_reason = SHUTDOWN
            task.cancel()
        if remaining:
            await asyncio.wait([task for task, _ in remaining], timeout=SHUTDOWN_CANCEL_WAIT)
        await self._close_everything()
        self.pairs.close_all()
        await self.pairs.drain()
        await self.workers.stop()
        await self.recorder.stop()
        self.log.info("serve.stopped", cut=len(remaining))

    async def _close_everything(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            self._housekeeping = None
        for runner in self._runners.values():
            await runner.cleanup()
        self._runners.clear()
        for upstream in (self.gateway, self.provider):
            if upstream is not None:
                await upstream.close()

    async def wait_compared(self, request_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """The pair.json of `request_id` once it has been compared (or checked) and written."""
        return await self.pairs.wait(request_id, timeout)

    def health(self) -> dict[str, Any]:
        return {
            "status": "stopping" if self._stopping else "ok",
            "listeners": {"front": self.front_url, "back": self.back_url,
                          "admin": self.admin_url},
            "upstreams": {"gateway": public_url(self.config.gateway),
                          "provider": public_url(self.config.provider)},
            "recorder": {
                "recordings": str(self.recordings),
                "recording": not self.recorder.paused,
                "paused": self.recorder.paused,
                "used_bytes": self.recorder.used_bytes,
                "quota_bytes": self.recorder.quota_bytes,
                "open_captures": len(self.pairs.open),
            },
            "in_flight": len(self._legs),
            "pending_pairs": self.book.pending if self.book is not None else 0,
        }

    # -- housekeeping --------------------------------------------------------------------------

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL)
            try:
                self.pairs.expire(time.monotonic())
                await self._rescan_quota()
            except Exception as exc:
                self._capture_failed("housekeeping", exc, self.recordings)

    async def _rescan_quota(self) -> None:
        now = time.monotonic()
        if not self.recorder.paused or now - self._last_rescan < QUOTA_RESCAN_INTERVAL:
            return
        self._last_rescan = now
        self.recorder.used_bytes = await asyncio.to_thread(self.recorder.measure)
        if not self.recorder.over_quota():
            self.recorder.paused = False
            self.metrics.recording_paused.set(0)
            self.log.info("recording.resumed", used_bytes=self.recorder.used_bytes,
                          quota_bytes=self.recorder.quota_bytes)

    def _recording_allowed(self) -> bool:
        if self.recorder.paused:
            return False
        if self.recorder.over_quota():
            self.recorder.paused = True
            self._last_rescan = time.monotonic()
            self.metrics.recording_paused.set(1)
            self.log.warning("recording.paused", used_bytes=self.recorder.used_bytes,
                             quota_bytes=self.recorder.quota_bytes)
            return False
        return True

    def _capture_failed(self, stage: str, exc: BaseException, path: Path) -> None:
        self.pairs.capture_failed(stage, exc, path)

    # -- the two relay listeners ---------------------------------------------------------------

    def _is_compared(self, path: str) -> bool:
        return any(path == p or path.endswith(p) for p in self._compared)

    async def _admit(self, request: web.BaseRequest,
                     side: str) -> tuple[bytes, bool] | web.StreamResponse:
        """The body's first `max_fingerprint_body` bytes and whether that is all of it, once
        the request is within the limits; else calltap's refusal (nothing was forwarded).
        aiohttp's parser already refused most oversized heads; its per-field count is looser
        than `max_header_line` (a name and its value together), which is checked here.

        A transfer coding other than chunked (`gzip, chunked`) is refused with 501: aiohttp
        only removes the chunking, and Transfer-Encoding is hop-by-hop, so the gateway would
        get gzip bytes it has no way to recognize."""
        longest = max((len(name) + len(value) for name, value in request.raw_headers),
                      default=0)
        if longest > self.config.max_header_line:
            return self._refuse(side, 431, "request_header_fields_too_large",
                                f"a request header's name and value take {longest} bytes,"
                                f" more than {self.config.max_header_line}")
        head = head_size(request)
        if head > self.config.max_header_bytes:
            return self._refuse(side, 431, "request_header_fields_too_large",
                                f"the request line and headers take {head} bytes, more than"
                                f" {self.config.max_header_bytes}")
        codings = [token.strip().lower() for value in request.headers.getall(
            "Transfer-Encoding", ()) for token in value.split(",")]
        if codings and codings != ["chunked"]:
            return self._refuse(side, 501, "unsupported_transfer_encoding",
                                "only Transfer-Encoding: chunked is relayed")
        limit = self.config.max_request_body
        declared = request.content_length
        if limit and declared is not None and declared > limit:
            return self._refuse(side, 413, REQUEST_TOO_LARGE, too_large(limit))
        if (request.version == HttpVersion11
                and request.headers.get("Expect", "").lower() == "100-continue"):
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0
        try:
            return await read_prefix(request, self.config.max_fingerprint_body, limit)
        except RequestTooLarge as exc:
            return self._refuse(side, 413, REQUEST_TOO_LARGE, str(exc))

    def _refuse(self, side: str, status: int, code: str, message: str) -> web.StreamResponse:
        self._log_refusal(side, status, code, None)
        return refusal(status, code, message)

    async def _front(self, request: web.BaseRequest) -> web.StreamResponse:
        assert self.gateway is not None
        started = time.time()
        admitted = await self._admit(request, "downstream")
        if isinstance(admitted, web.StreamResponse):
            return admitted
        prefix, whole = admitted
        compared = self._is_compared(request.path)
        client_id = accept_client_id(request.headers.get(REQUEST_ID))
        request_id = client_id or new_request_id(started)
        paired = compared and self.book is not None
        fingerprint = await _fingerprint(prefix, whole, request.path) if paired else None
        recording: Recording | None = None
        key = request_id
        if (compared or self.config.record_other) and self._recording_allowed():
            reserved = await self._reserve(request_id, client_id is None, started)
            if reserved is not None:
                key, claim = reserved
                kind = "other" if not compared else ("pair" if paired else "single")
                recording = self.pairs.open_recording(key, claim, kind)
        headers = [(n, v) for n, v in forwardable(request.headers.items())
                   if n.lower() != "x-request-id"]
        headers.append((REQUEST_ID, key))
        traceparent = request.headers.get("traceparent")
        if traceparent is None:
            traceparent, trace_id = new_traceparent()
            headers.append(("traceparent", traceparent))
        else:
            trace_id = parse_traceparent(traceparent)
        leg = Leg("downstream", request.method, request.path, list(request.headers.items()),
                  started)
        finish: Finish | None = None
        if recording is not None:
            if recording.kind == "pair":
                self.pairs.add_front(recording, trace_id, fingerprint, time.monotonic())
                finish = self._front_finisher(recording)
            else:
                finish = self._single_finisher(recording)
            leg.request_sink = self._request_sink(
                recording.claim, recordings.request_name("downstream"), prefix, whole)
        return await self._run(request, self.gateway, leg, key, prefix, whole, headers,
                               _response_sink(self.recorder, recording, "downstream"), finish,
                               [(REQUEST_ID, key)])

    async def _back(self, request: web.BaseRequest) -> web.StreamResponse:
        assert self.provider is not None
        started = time.time()
        admitted = await self._admit(request, "upstream")
        if isinstance(admitted, web.StreamResponse):
            return admitted
        prefix, whole = admitted
        compared = self._is_compared(request.path)
        headers = forwardable(request.headers.items())
        leg = Leg("upstream", request.method, request.path, list(request.headers.items()),
                  started)
        key = accept_client_id(request.headers.get(REQUEST_ID)) or ""
        if not (compared or self.config.record_other) or not self._recording_allowed():
            return await self._run(request, self.provider, leg, key, prefix, whole, headers,
                                   None, None, None)
        found = None
        if compared and self.book is not None:
            fingerprint = await _fingerprint(prefix, whole, request.path)
            found = self.pairs.match_back(
                request.headers.get(REQUEST_ID),
                parse_traceparent(request.headers.get("traceparent")),
                fingerprint, time.monotonic())
        if found is not None:
            recording, match = found
            leg.attempt = match.attempt
            stem = recordings.stem("upstream", match.attempt)
            leg.request_sink = self._request_sink(recording.claim, recordings.request_name(stem),
                                                  prefix, whole)
            pairs = self.pairs
            return await self._run(request, self.provider, leg, recording.key, prefix, whole,
                                   headers, _response_sink(self.recorder, recording, stem),
                                   lambda done: pairs.attempt_ended(recording, done), None)
        client_id = accept_client_id(request.headers.get(REQUEST_ID))
        own_id = client_id or new_request_id(started)
        reserved = await self._reserve(own_id, client_id is None, started)
        if reserved is None:
            return await self._run(request, self.provider, leg, own_id, prefix, whole, headers,
                                   None, None, None)
        recording = self.pairs.open_recording(*reserved, "single" if compared else "other")
        recording.orphan = compared and self.book is not None
        leg.request_sink = self._request_sink(recording.claim, recordings.request_name("upstream"),
                                              prefix, whole)
        return await self._run(request, self.provider, leg, recording.key, prefix, whole,
                               headers, _response_sink(self.recorder, recording, "upstream"),
                               self._single_finisher(recording), None)

    def _front_finisher(self, recording: Recording) -> Finish:
        """A front leg waits for its upstream attempts, unless its body was refused on the way
        (the gateway never got it whole, so no attempt will come): then it is checked alone."""
        def finish(leg: Leg) -> None:
            if leg.ended == REQUEST_TOO_LARGE:
                self.pairs.single_ended(recording, leg)
            else:
                self.pairs.front_ended(recording, leg, time.monotonic())
        return finish

    def _single_finisher(self, recording: Recording) -> Finish:
        return lambda leg: self.pairs.single_ended(recording, leg)

    async def _reserve(self, request_id: str, minted: bool,
                       started: float) -> tuple[str, Claim] | None:
        """The capture key and directory. A minted id is unique, so its directory is created
        on the disk thread while the request goes on; a client's id may need a `+N` suffix,
        which must be known before the request is forwarded."""
        if minted:
            return self.recorder.claim(request_id, started)
        return await self.recorder.reserve(request_id, started)

    def _request_sink(self, claim: Claim, name: str, prefix: bytes, whole: bool) -> Sink:
        """A body read whole is complete: written to its final name at once. A streamed one
        is written as it arrives, to a `.partial` renamed when the leg ends."""
        sink = self.recorder.sink(claim, name, partial=not whole)
        if prefix:
            sink.write(prefix)
        if whole:
            sink.close()
        return sink

    async def _run(self, request: web.BaseRequest, upstream: Upstream, leg: Leg, key: str,
                   prefix: bytes, whole: bool, headers: Headers,
                   on_response: Callable[[Leg], Sink | None] | None, finish: Finish | None,
                   extra_response_headers: Headers | None) -> web.StreamResponse:
        """Relay one leg, then (whatever happened) close its files and hand it on."""
        task = asyncio.current_task()
        assert task is not None
        self._legs[task] = leg
        gauge = self.metrics.in_flight.labels(leg.side)
        gauge.inc()
        try:
            body = _request_body(request, prefix, whole, leg.request_sink, headers,
                                 self.config.max_request_body)
            return await relay(request, upstream, leg, headers=headers, body=body,
                               on_response=on_response or _no_sink,
                               extra_response_headers=extra_response_headers)
        finally:
            gauge.dec()
            del self._legs[task]
            leg.finished = time.time()
            self._leg_ended(leg, key, finish)

    def _leg_ended(self, leg: Leg, key: str, finish: Finish | None) -> None:
        """Fail-open bookkeeping at the end of a leg; never raises into the handler."""
        try:
            self.metrics.requests.labels(leg.side, str(leg.status or 0)).inc()
            self.metrics.bytes_relayed.labels(leg.side).inc(leg.bytes)
            if leg.ended != COMPLETE and finish is None:
                self.log.warning("leg.aborted", request_id=key, side=leg.side, ended=leg.ended,
                                 status=leg.status, bytes=leg.bytes, error=leg.error)
            for sink, attribute in ((leg.sink, "file"), (leg.request_sink, "request_file")):
                if sink is not None:
                    name = sink.close()
                    setattr(leg, attribute, name)
                    if name is not None:
                        self.recorder.account(sink.recorded)
            if finish is not None:
                finish(leg)
        except Exception as exc:
            self._capture_failed("leg_end", exc, self.recordings)


async def _fingerprint(body: bytes, whole: bool, path: str) -> str | None:
    """The request's fingerprint; parsed in a thread when the body is big enough to stall."""
    if not whole:
        return None
    if len(body) > FINGERPRINT_INLINE_BYTES:
        return await asyncio.to_thread(request_fingerprint, body, path)
    return request_fingerprint(body, path)


def _no_sink(_leg: Leg) -> None:
    return None


def _response_sink(recorder: Recorder, recording: Recording | None,
                   stem: str) -> Callable[[Leg], Sink | None] | None:
    if recording is None:
        return None
    claim = recording.claim
    return lambda leg: recorder.sink(
        claim, recordings.body_name(stem, recordings.body_extension(leg.content_type)))


def _request_body(request: web.BaseRequest, prefix: bytes, whole: bool, sink: Sink | None,
                  headers: Headers, max_body: int) -> bytes | AsyncIterator[bytes] | None:
    """What to send upstream: the body already read, or that prefix and then the rest as it
    arrives (keeping the client's Content-Length so the framing matches)."""
    if whole:
        headers[:] = [(n, v) for n, v in headers if n.lower() != "content-length"]
        return prefix if request.body_exists else None
    return _stream_rest(prefix, request.content, sink, max_body)


async def _stream_rest(prefix: bytes, content: StreamReader, sink: Sink | None,
                       max_body: int) -> AsyncIterator[bytes]:
    """The body for the upstream, as it arrives. Crossing `max_body` raises RequestTooLarge
    before that chunk is sent: the upstream request is cut, never completed."""
    yield prefix
    size = len(prefix)
    async for chunk in content.iter_any():
        size += len(chunk)
        if max_body and size > max_body:
            raise RequestTooLarge(too_large(max_body))
        if sink is not None:
            sink.write(chunk)
        yield chunk
