"""`Calltap`: the relay core — the front and back listeners, the legs they relay, and the addons.

Front: clients call it instead of the gateway. It settles the request id (the client's
`X-Request-ID` when safe, else a minted one; a capture key never reuses a directory), forwards
that key and a `traceparent` to the gateway, and returns the key to the client.
Back: the gateway calls it instead of the provider; the pairing addon finds the front leg an
attempt belongs to (header, traceparent, fingerprint).

Everything beyond relaying is an addon (`hooks.py`): recording, pairing, comparison, the log,
metrics, admin. They are started in order through one `AsyncExitStack` and stopped in reverse;
the core raises their events once per leg (never per chunk; `relay.py` is the byte pump).
Request bodies up to `max_fingerprint_body` are read whole before forwarding (chat requests
are small and the fingerprint needs them); larger ones are streamed through as they arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TextIO

from aiohttp import web
from aiohttp.streams import StreamReader

from calltap.config import Config, describe, public_url
from calltap.proxy.admin import Admin
from calltap.proxy.browser_view import BrowserView
from calltap.proxy.capture import Opener, Sink
from calltap.proxy.comparison import Comparisons
from calltap.proxy.flights import InFlight
from calltap.proxy.guard import (
    GuardedServer,
    Refusal,
    RequestTooLarge,
    admit,
    listen,
    protocol_options,
    refusal,
    too_large,
)
from calltap.proxy.hooks import (
    Addon,
    CaptureFailed,
    Hooks,
    LegArrived,
    LegEnded,
    LegStarted,
    Refused,
    ResponseStarted,
    merge_health,
)
from calltap.proxy.ids import accept_client_id, new_request_id, new_traceparent, parse_traceparent
from calltap.proxy.index_rows import IndexRows
from calltap.proxy.keeping import Keeping
from calltap.proxy.logs import make_logger
from calltap.proxy.metrics import Metrics
from calltap.proxy.outcomes import DivergenceLog
from calltap.proxy.pairs import Pairs
from calltap.proxy.recording import RecordingAddon
from calltap.proxy.relay import Headers, Leg, Upstream, forwardable, relay
from calltap.proxy.uploads import Uploads

REQUEST_ID = "X-Request-ID"
HOUSEKEEPING_INTERVAL = 1.0


class Calltap:
    """The recording proxy. `async with Calltap(config) as tap:` or `start()` / `stop()`.
    `addons` are started after calltap's own and get every event."""

    def __init__(self, config: Config, *, log_stream: TextIO | None = None,
                 logger: Any = None, opener: Opener | None = None,
                 addons: list[Addon] | None = None) -> None:
        self.config = config.validate()
        self.log = logger if logger is not None else make_logger(log_stream, config.log_level)
        self.recordings = config.recordings
        self.addons: list[Addon] = []
        self.hooks = Hooks(self.addons, config.recordings)
        self.recording = RecordingAddon(config, self.hooks, self.log, opener)
        self.comparisons = Comparisons(config, self.hooks, self.recording.recorder)
        self.pairs = Pairs(config, self.hooks)
        self.metrics = Metrics(lambda: self.pairs.pending, tuple(config.compared_paths),
                               lambda: len(self.comparisons.backlog),
                               lambda: self.recording.governor.lag)
        self.keeping = Keeping(config, self.recording.recorder, self.metrics.registry)
        if config.otel is not None:  # first in, last out: it flushes the spans of every pair
            from calltap.otel.export import OtelExport  # loaded only when export is on

            self.addons.append(OtelExport(config.otel, self.log, self.metrics.registry))
        # The index stops after the comparisons: the pairs they finish on the way out (streams
        # that ended within the grace) get their rows into its last segment.
        self.index = IndexRows(config, self.keeping, self.log, self.metrics.registry)
        self.addons += [self.metrics, DivergenceLog(self.log), self.index, self.recording,
                        self.comparisons, self.pairs, self.keeping]
        if config.bucket is not None:
            self.addons.append(Uploads(config, self.recording.recorder, self.keeping, self.log,
                                       self.metrics.registry, self.index))
        if config.admin is not None:
            self.admin: Admin | None = Admin(config.admin, self.health, self.metrics,
                                             protocol_options(config, self.log, "admin"))
            self.addons.append(self.admin)
            self.addons.append(BrowserView(self.admin, config))
        else:
            self.admin = None
        self.addons += addons or []
        self.gateway = self._upstream(config.gateway)
        self.provider = self._upstream(config.provider)
        self.front_url: str | None = None
        self.back_url: str | None = None
        self._stack = contextlib.AsyncExitStack()
        self._runners: list[web.BaseRunner] = []
        self.in_flight = InFlight()
        self._compared = tuple(config.compared_paths)
        self._stopping = False

    @property
    def admin_url(self) -> str | None:
        return self.admin.url if self.admin is not None else None

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
        """Start the addons in order, then listen. Raises ConfigError (recordings not
        writable) or OSError (an address in use) with nothing left running."""
        try:
            for addon in self.addons:
                await self._stack.enter_async_context(addon.running())
            for upstream in (self.gateway, self.provider):
                if upstream is not None:
                    await upstream.start()
                    self._stack.push_async_callback(upstream.close)
            await self._listen()
            self._stack.enter_context(_task(self._housekeep()))
        except BaseException:
            await self._stack.aclose()
            raise
        self.log.info("serve.started", front=self.front_url, back=self.back_url,
                      admin=self.admin_url, pid=os.getpid(), config=describe(self.config))

    async def _listen(self) -> None:
        relays = {"front": (self.config.front, self._front, "downstream"),
                  "back": (self.config.back, self._back, "upstream")}
        for name, (address, handler, side) in relays.items():
            if address is not None:
                server = GuardedServer(handler, on_refused=self._refused_by_parser(side),
                                       **protocol_options(self.config, self.log, name))
                runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=1.0)
                self._stack.push_async_callback(runner.cleanup)
                self._runners.append(runner)
                setattr(self, f"{name}_url", await listen(runner, address))

    def _refused_by_parser(self, side: str) -> Any:
        def refused(status: int, code: str, exc: BaseException | None) -> None:
            self.hooks.emit(Refused(side, status, code, type(exc).__name__ if exc else None))
        return refused

    async def stop(self, grace: float | None = None) -> None:
        """Stop accepting, give in-flight streams `grace` seconds (default: the config's),
        cut the rest, then stop the addons: every capture is closed and its pair.json
        written."""
        if self._stopping:
            return
        self._stopping = True
        grace = self.config.grace_period if grace is None else grace
        self.log.info("serve.stopping", in_flight=len(self.in_flight), grace=grace)
        for runner in self._runners:
            for site in list(runner.sites):
                await site.stop()
        cut = await self.in_flight.settle(grace)
        await self._stack.aclose()
        self.log.info("serve.stopped", cut=cut)

    async def wait_compared(self, request_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """The pair.json of `request_id` once it has been compared (or checked) and written."""
        return await self.comparisons.wait(request_id, timeout)

    def health(self) -> dict[str, Any]:
        health: dict[str, Any] = {
            "status": "stopping" if self._stopping else "ok",
            "listeners": {"front": self.front_url, "back": self.back_url,
                          "admin": self.admin_url},
            "upstreams": {"gateway": public_url(self.config.gateway),
                          "provider": public_url(self.config.provider)},
            "in_flight": len(self.in_flight),
        }
        return merge_health(health, self.addons)

    async def _housekeep(self) -> None:
        """Once a second, each addon's periodic work (expiring pairs, rescanning the quota)."""
        chores = [addon.housekeep for addon in self.addons if hasattr(addon, "housekeep")]
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL)
            for chore in chores:
                try:
                    await chore()
                except Exception as exc:
                    self.hooks.emit(CaptureFailed("housekeeping", exc, self.recordings))

    # -- the two relay listeners ---------------------------------------------------------------

    def _is_compared(self, path: str) -> bool:
        """A path is compared when it ends with one of `compared_paths` (a gateway may mount
        the provider's API under a prefix)."""
        return path.endswith(self._compared)

    async def _arrive(self, request: web.BaseRequest, side: str) -> Leg | web.StreamResponse:
        """The leg for an admitted request (its body's prefix read), or calltap's refusal."""
        started = time.time()
        admitted = await admit(request, self.config)
        if isinstance(admitted, Refusal):
            self.hooks.emit(Refused(side, admitted.status, admitted.code))
            return refusal(admitted.status, admitted.code, admitted.message)
        leg = Leg(side, request.method, request.path, list(request.headers.items()), started)
        leg.body_prefix, leg.body_whole = admitted
        leg.query = request.raw_path.partition("?")[2]
        leg.compared = self._is_compared(request.path)
        client_id = accept_client_id(request.headers.get(REQUEST_ID))
        leg.key = client_id or new_request_id(started)
        leg.minted = client_id is None
        leg.trace_id = parse_traceparent(request.headers.get("traceparent"))
        await self.hooks.emit_async(LegArrived(leg))
        return leg

    async def _front(self, request: web.BaseRequest) -> web.StreamResponse:
        assert self.gateway is not None
        leg = await self._arrive(request, "downstream")
        if not isinstance(leg, Leg):
            return leg
        traceparent = None
        if request.headers.get("traceparent") is None:
            traceparent, leg.trace_id = new_traceparent()
            leg.traceparent = traceparent
        await self.hooks.emit_async(LegStarted(leg))
        headers = [(n, v) for n, v in forwardable(request.headers.items())
                   if n.lower() != "x-request-id"]
        headers.append((REQUEST_ID, leg.key))
        if traceparent is not None:
            headers.append(("traceparent", traceparent))
        return await self._run(request, self.gateway, leg, headers, [(REQUEST_ID, leg.key)])

    async def _back(self, request: web.BaseRequest) -> web.StreamResponse:
        assert self.provider is not None
        leg = await self._arrive(request, "upstream")
        if not isinstance(leg, Leg):
            return leg
        await self.hooks.emit_async(LegStarted(leg))
        return await self._run(request, self.provider, leg, forwardable(request.headers.items()),
                               None)

    async def _run(self, request: web.BaseRequest, upstream: Upstream, leg: Leg,
                   headers: Headers, extra_response_headers: Headers | None) -> web.StreamResponse:
        """Relay one leg, then (whatever happened) close its files and hand it on."""
        try:
            with self.in_flight.relaying(leg):
                body = _request_body(request, leg, headers, self.config.max_request_body)
                return await relay(request, upstream, leg, headers=headers, body=body,
                                   on_response=self._response_started,
                                   extra_response_headers=extra_response_headers)
        finally:
            leg.finished = time.time()
            self.hooks.emit(LegEnded(leg))

    def _response_started(self, leg: Leg) -> Sink | None:
        self.hooks.emit(ResponseStarted(leg))
        return leg.sink


@contextlib.contextmanager
def _task(coroutine: Any) -> Any:
    """Run `coroutine` as a task while the context is open; cancel it on the way out."""
    task = asyncio.get_running_loop().create_task(coroutine)
    try:
        yield task
    finally:
        task.cancel()


def _request_body(request: web.BaseRequest, leg: Leg, headers: Headers,
                  max_body: int) -> bytes | AsyncIterator[bytes] | None:
    """What to send upstream: the body already read, or that prefix and then the rest as it
    arrives (keeping the client's Content-Length so the framing matches)."""
    if leg.body_whole:
        headers[:] = [(n, v) for n, v in headers if n.lower() != "content-length"]
        return leg.body_prefix if request.body_exists else None
    return _stream_rest(leg.body_prefix, request.content, leg.request_sink, max_body)


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
