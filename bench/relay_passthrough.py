"""The baseline calltap is measured against: a bare aiohttp pass-through proxy, nothing recorded.

It does what calltap's relay does for the bytes and nothing else: one process with two
listeners (front -> gateway, back -> provider), `auto_decompress=False` on both sides, the
request body read whole and forwarded, hop-by-hop headers dropped, the response streamed back
chunk by chunk with `iter_any()` and `write` (so the client's backpressure reaches upstream).
No ids, no pairing, no files, no comparison: what is left is the cost of relaying.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from calltap.proxy.relay import AUTO_HEADERS
from calltap.proxy.relay import forwardable as end_to_end


def forwardable(headers: Iterable[tuple[str, str]]) -> CIMultiDict[str]:
    """The end-to-end headers, by calltap's own rule (a pure function, no recording)."""
    return CIMultiDict(end_to_end(headers))


RELABEL = (b'"id":"chatcmpl-', b'"id":"gatewayx-')
"""What the re-labelling gateway rewrites in every chunk: the completion id's prefix, for one of
the same length, as real gateways re-label the provider's ids. The bodies on the two legs then
differ, so calltap's comparator reads and compares both instead of noticing they are the same."""


def relabelled(body: bytes) -> bytes:
    """`body` as the re-labelling gateway hands it on."""
    return body.replace(*RELABEL)


def partial_match(data: bytes) -> int:
    """The length of the longest end of `data` that begins `RELABEL`'s pattern without being all
    of it: an occurrence the next chunk could complete."""
    pattern = RELABEL[0]
    for size in range(min(len(pattern) - 1, len(data)), 0, -1):
        if data.endswith(pattern[:size]):
            return size
    return 0


class Relabeller:
    """Rewrites `RELABEL` in a stream cut anywhere: a chunk's last bytes, when they could start
    an occurrence the next chunk ends, wait for that next chunk. Only those wait, so an event's
    end (and the paced provider's send time there) goes on at once, as a real gateway's would."""

    def __init__(self) -> None:
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = relabelled(self._held + chunk)
        keep = len(data) - partial_match(data)
        self._held = data[keep:]
        return data[:keep]

    def close(self) -> bytes:
        held, self._held = self._held, b""
        return held


class PassThrough:
    """Relays every request to `base_url` through one pooled client session; with `relabel`,
    rewrites each response's completion ids on the way (the benchmark's gateway)."""

    def __init__(self, base_url: str, *, relabel: bool = False) -> None:
        self.base_url = base_url.rstrip("/")
        self.relabel = relabel
        self.session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=0)
        app.router.add_route("*", "/{tail:.*}", self.relay)
        app.cleanup_ctx.append(self._session)
        return app

    async def _session(self, _app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(limit=512, limit_per_host=0)
        timeout = aiohttp.ClientTimeout(total=None, sock_read=300)
        async with aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
        ) as session:
            self.session = session
            yield

    async def relay(self, request: web.Request) -> web.StreamResponse:
        assert self.session is not None
        body = await request.read() if request.body_exists else None
        headers = forwardable(request.headers.items())
        headers.popall("Content-Length", None)
        sent = {name.lower() for name in headers}
        skip = [name for name in AUTO_HEADERS if name.lower() not in sent]
        url = URL(self.base_url + request.raw_path, encoded=True)
        async with self.session.request(
            request.method,
            url,
            headers=headers,
            data=body,
            allow_redirects=False,
            skip_auto_headers=skip,
        ) as upstream:
            raw = (
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in upstream.raw_headers
            )
            response = web.StreamResponse(
                status=upstream.status, reason=upstream.reason, headers=forwardable(raw)
            )
            await response.prepare(request)
            relabeller = Relabeller() if self.relabel else None
            async for chunk in upstream.content.iter_any():
                await response.write(relabeller.feed(chunk) if relabeller else chunk)
            if relabeller is not None:
                await response.write(relabeller.close())
            await response.write_eof()
            return response


async def start_listener(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Serve `app` the way calltap serves its relay listeners; the runner and its URL."""
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        handler_cancellation=True,
        auto_decompress=False,
        shutdown_timeout=1.0,
    )
    await runner.setup()
    await web.TCPSite(runner, host, port, reuse_address=True).start()
    bound_host, bound_port = runner.addresses[0][:2]
    return runner, f"http://{bound_host}:{bound_port}"
