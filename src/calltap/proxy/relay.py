"""The byte pump: one request relayed to an upstream, its response streamed back as it arrives.

Bytes are the wire's: `auto_decompress=False` on both sides, no re-encoding. Each chunk read
from upstream is handed to the leg's sink (one buffered file write) and written to the client
at once; `await write` gives backpressure, so a slow client slows the upstream read. Nothing
else runs per chunk.

How a leg ends is recorded, never papered over: a client that goes away cancels the upstream
request (`client_aborted`); an upstream that resets mid-body gets the client connection aborted
the same way, with no terminator fabricated (`upstream_reset`); silence past the read timeout
does the same (`timeout`). An upstream that cannot be reached gets a small JSON 502 (504 on a
connect timeout) that is recorded like any other response.

What calltap refuses before relaying is `calltap.proxy.guard`'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from calltap.proxy.capture import Sink
from calltap.proxy.guard import RequestTooLarge, error_body
from calltap.recordings import (
    CLIENT_ABORTED,
    COMPLETE,
    REQUEST_TOO_LARGE,
    TIMEOUT,
    UPSTREAM_RESET,
    UPSTREAM_UNREACHABLE,
)

if TYPE_CHECKING:
    from calltap.proxy.hooks import Recording

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
     "upgrade", "host", "expect"}
)
"""RFC 9110 §7.6.1 hop-by-hop headers, plus Host (rewritten for the upstream) and Expect (the
listener answers `100-continue` itself, so the next hop must not wait to do it again)."""
AUTO_HEADERS = ("User-Agent", "Accept", "Accept-Encoding", "Content-Type")
"""Headers aiohttp's client would invent; skipped unless the caller sent them."""


MAX_HEADER_LINE = 64 * 1024
"""Response header lines up to 64 KiB pass (aiohttp's default is 8 KiB)."""

Headers = list[tuple[str, str]]


@dataclass(slots=True, eq=False)
class Leg:
    """One relayed exchange, as pair.json describes it. Filled in while it runs."""

    side: str
    method: str
    path: str
    request_headers: Headers
    started: float
    status: int | None = None
    response_headers: Headers = field(default_factory=list)
    first_byte_at: float | None = None
    finished: float | None = None
    bytes: int = 0
    ended: str | None = None
    error: str | None = None
    content_type: str = ""
    content_encoding: str | None = None
    sink: Sink | None = None
    request_sink: Sink | None = None
    attempt: int | None = None
    """The upstream attempt number (1-based) when the leg belongs to a pair."""
    file: str | None = None
    """The recorded response body's file name, once the leg ended and the file is complete."""
    request_file: str | None = None
    cancel_reason: str | None = None
    """Set before the proxy cancels the leg itself (shutdown), so the leg says why it ended."""
    key: str = ""
    """The request id the leg is relayed and recorded under (its capture's key)."""
    minted: bool = False
    """`key` was minted by calltap (unique: its directory needs no check before relaying)."""
    compared: bool = False
    """The request path is one calltap compares (a chat-like endpoint)."""
    body_prefix: bytes = b""
    """The request body's first bytes, read before relaying (all of it when `body_whole`)."""
    body_whole: bool = True
    query: str = ""
    """The request's query string as it arrived (`api-version=…`), without the `?`."""
    trace_id: str | None = None
    traceparent: str | None = None
    """The `traceparent` the front minted and forwarded because the client sent none."""
    fingerprint: str | None = None
    """What the request asks, for pairing by content (a compared front leg's)."""
    recording: Recording | None = None
    """The capture the leg is recorded into, if any."""


def forwardable(headers: Iterable[tuple[str, str]]) -> Headers:
    """Headers without the hop-by-hop ones (and those `Connection` names)."""
    pairs = list(headers)
    named = {
        token.strip().lower()
        for name, value in pairs
        if name.lower() == "connection"
        for token in value.split(",")
    }
    return [(name, value) for name, value in pairs
            if name.lower() not in HOP_BY_HOP and name.lower() not in named]


class Upstream:
    """One pooled client session to one base URL, decompression off."""

    def __init__(self, base_url: str, *, connections: int, connect_timeout: float,
                 read_timeout: float) -> None:
        self.base_url = base_url
        self._connections = connections
        self._timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout,
                                              sock_read=read_timeout)
        self.session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self._connections, limit_per_host=0),
            timeout=self._timeout,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            raise_for_status=False,
            max_line_size=MAX_HEADER_LINE,
            max_field_size=MAX_HEADER_LINE,
        )

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None

    def url_for(self, raw_path: str) -> URL:
        return URL(self.base_url + raw_path, encoded=True)


async def relay(
    request: web.BaseRequest,
    upstream: Upstream,
    leg: Leg,
    *,
    headers: Headers,
    body: bytes | AsyncIterator[bytes] | None,
    on_response: Callable[[Leg], Sink | None],
    extra_response_headers: Headers | None = None,
) -> web.StreamResponse:
    """Relay `request` to `upstream` and stream the answer back; fills `leg` as it goes.

    `on_response(leg)` runs once the status and headers are known and returns the sink that
    records the body (or None). The caller finalizes the leg when this returns or raises.
    """
    session = upstream.session
    assert session is not None, "upstream not started"
    sent_names = {name.lower() for name, _ in headers}
    skip = [name for name in AUTO_HEADERS if name.lower() not in sent_names]
    try:
        upstream_response = await session.request(
            leg.method, upstream.url_for(request.raw_path), headers=CIMultiDict(headers),
            data=body, allow_redirects=False, skip_auto_headers=skip,
        )
    except asyncio.CancelledError:
        leg.ended = leg.cancel_reason or CLIENT_ABORTED
        raise
    except TimeoutError:
        return await _local_error(request, leg, 504, TIMEOUT, "upstream_timeout",
                                  "the upstream did not answer in time", on_response,
                                  extra_response_headers or [])
    except aiohttp.ClientConnectorError as exc:
        return await _local_error(request, leg, 502, UPSTREAM_UNREACHABLE,
                                  "upstream_unreachable",
                                  f"cannot connect to upstream: {exc.strerror}",
                                  on_response, extra_response_headers or [])
    except (aiohttp.ClientError, OSError) as exc:
        if isinstance(exc.__cause__, RequestTooLarge):
            return await _local_error(request, leg, 413, REQUEST_TOO_LARGE,
                                      "invalid_request_error", str(exc.__cause__),
                                      on_response, extra_response_headers or [],
                                      code=REQUEST_TOO_LARGE)
        return await _local_error(request, leg, 502, UPSTREAM_RESET, "upstream_reset",
                                  f"upstream closed the connection: {type(exc).__name__}",
                                  on_response, extra_response_headers or [])
    async with upstream_response:
        return await _stream(request, upstream_response, leg, on_response,
                             extra_response_headers or [])


def _response_for(upstream_response: aiohttp.ClientResponse, leg: Leg,
                  extra_response_headers: Headers) -> web.StreamResponse:
    """The client's response head, from the upstream's: hop-by-hop headers dropped, calltap's
    own (`X-Request-ID`) in place of the upstream's; the leg learns status and headers."""
    leg.first_byte_at = time.time()
    leg.status = upstream_response.status
    raw = [(name.decode("latin-1"), value.decode("latin-1"))
           for name, value in upstream_response.raw_headers]
    response_headers = forwardable(raw)
    if extra_response_headers:
        replaced = {name.lower() for name, _ in extra_response_headers}
        response_headers = [(n, v) for n, v in response_headers if n.lower() not in replaced]
        response_headers.extend(extra_response_headers)
    leg.response_headers = response_headers
    leg.content_type = upstream_response.headers.get("Content-Type", "")
    leg.content_encoding = upstream_response.headers.get("Content-Encoding")
    return web.StreamResponse(status=upstream_response.status, reason=upstream_response.reason,
                              headers=CIMultiDict(response_headers))


async def _stream(
    request: web.BaseRequest,
    upstream_response: aiohttp.ClientResponse,
    leg: Leg,
    on_response: Callable[[Leg], Sink | None],
    extra_response_headers: Headers,
) -> web.StreamResponse:
    response = _response_for(upstream_response, leg, extra_response_headers)
    sink = leg.sink = on_response(leg)
    try:
        await response.prepare(request)
        await _pump(upstream_response.content, response, leg, sink)
        if leg.ended is None:
            try:
                await response.write_eof()
                leg.ended = COMPLETE
            except ConnectionError:
                leg.ended = CLIENT_ABORTED
    except ConnectionError:
        leg.ended = CLIENT_ABORTED
    except asyncio.CancelledError:
        leg.ended = leg.cancel_reason or CLIENT_ABORTED
        upstream_response.close()
        raise
    if leg.ended != COMPLETE:
        upstream_response.close()
        if request.transport is not None:
            request.transport.abort()
    return response


async def _pump(content: aiohttp.StreamReader, response: web.StreamResponse, leg: Leg,
                sink: Sink | None) -> None:
    """Each chunk as it arrives: to the sink, then to the client. Sets `leg.bytes` to what
    reached the client, and `leg.ended` when the upstream or the client broke off."""
    record = sink.write if sink is not None else None
    relayed = 0
    try:
        while True:
            try:
                chunk = await content.readany()
            except TimeoutError:
                leg.ended = TIMEOUT
                return
            except (aiohttp.ClientError, OSError) as exc:
                leg.ended = UPSTREAM_RESET
                leg.error = type(exc).__name__
                return
            if not chunk:
                return
            if record is not None:
                record(chunk)
            try:
                await response.write(chunk)
            except ConnectionError:
                leg.ended = CLIENT_ABORTED
                return
            relayed += len(chunk)
    finally:
        leg.bytes = relayed


async def _local_error(
    request: web.BaseRequest,
    leg: Leg,
    status: int,
    ended: str,
    kind: str,
    message: str,
    on_response: Callable[[Leg], Sink | None],
    extra_response_headers: Headers,
    *,
    code: str | None = None,
) -> web.StreamResponse:
    """Answer for an upstream that never responded (or a body refused on its way there);
    recorded like a relayed response."""
    payload = error_body(kind, message, code or kind)
    leg.first_byte_at = time.time()
    leg.status = status
    leg.error = message
    leg.content_type = "application/json"
    leg.response_headers = [("Content-Type", "application/json"),
                            ("Content-Length", str(len(payload))), *extra_response_headers]
    response = web.StreamResponse(status=status, headers=CIMultiDict(leg.response_headers))
    sink = leg.sink = on_response(leg)
    if sink is not None:
        sink.write(payload)
    try:
        await response.prepare(request)
        await response.write(payload)
        await response.write_eof()
        leg.bytes = len(payload)
        leg.ended = ended
    except ConnectionError:
        leg.ended = CLIENT_ABORTED
    return response
