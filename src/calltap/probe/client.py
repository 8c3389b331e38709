"""The probe's HTTP client: one POST at a time, bounded in every direction a hostile or broken
server could push.

Redirects are never followed (the answer is judged as the 3xx it is), a request body over the
limit is not sent, a response body is read in a loop that stops at the byte limit, and every
socket read and connect has its own timeout. The wall-clock limit of a probe, which a server that
trickles one byte at a time would otherwise dodge, is the runner's `asyncio.timeout` around the
whole exchange. The key goes out as `Authorization: Bearer` only; what the trace keeps is masked.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import aiohttp
import orjson

from calltap.probe.judge import Reply
from calltap.probe.masking import Masker

KIB = 1024
TRACE_BODY_LIMIT = 16 * KIB
"""How much of each body the trace keeps."""
MAX_HEADER_LINE = 8190
OVERALL_LIMIT = 180.0
"""Seconds for a whole run by default: every probe at its wall limit, and some to spare."""


class ProbeFailure(Exception):
    """An exchange that could not be completed; its message is the probe's reason."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds of a run: bytes each way, the socket timeout, the wall-clock limits."""

    request_bytes: int = 64 * KIB
    response_bytes: int = 256 * KIB
    socket_timeout: float = 15.0
    probe_wall: float = 20.0
    round_trip_wall: float = 40.0
    overall: float = OVERALL_LIMIT


def decoded(body: bytes, content_encoding: str | None, limits: Limits) -> bytes:
    """The body with its Content-Encoding undone (the probe asks for identity, but clients accept
    gzip and deflate), each layer inflated only up to the response limit: 256 KiB of gzip can
    hold gigabytes."""
    codings = [coding.strip().lower() for coding in (content_encoding or "").split(",")]
    for coding in reversed(codings):
        if coding in ("", "identity"):
            continue
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise ProbeFailure(f"response with Content-Encoding {coding!r}, which is not decoded")
        wbits = 16 + zlib.MAX_WBITS if coding != "deflate" else _deflate_wbits(body)
        try:
            body = zlib.decompressobj(wbits).decompress(body, limits.response_bytes + 1)
        except zlib.error as error:
            raise ProbeFailure(f"response body is not valid {coding}: {error}") from error
        if len(body) > limits.response_bytes:
            raise ProbeFailure(
                f"response body over the limit of {limits.response_bytes} bytes once decoded"
            )
    return body


def _deflate_wbits(body: bytes) -> int:
    """Deflate is zlib-wrapped by the standard, raw from some servers: the header tells."""
    wrapped = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
    return zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS


class BoundedClient:
    """An aiohttp session that sends probe requests within `Limits`, recording a sanitized trace
    of every exchange in `trace`."""

    def __init__(self, key: str | None, limits: Limits, masker: Masker) -> None:
        self.key = key
        self.limits = limits
        self.masker = masker
        self.trace: list[dict[str, Any]] = []
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=self.limits.socket_timeout,
            sock_read=self.limits.socket_timeout,
        )
        self._session = aiohttp.ClientSession(
            timeout=timeout,
            auto_decompress=False,
            max_line_size=MAX_HEADER_LINE,
            max_field_size=MAX_HEADER_LINE,
        )
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(
        self, url: str, body: dict[str, Any], headers: dict[str, str], label: str
    ) -> Reply:
        """POST a JSON body; the reply read within the byte limit. ProbeFailure says why not."""
        data = orjson.dumps(body)
        headers = {
            "Content-Type": "application/json",
            "Accept-Encoding": "identity",
            **headers,
        }
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        entry: dict[str, Any] = {
            "label": label,
            "request": {
                "method": "POST",
                "url": url,
                "headers": self.masker.headers(headers),
                **self._excerpt(data),
            },
        }
        self.trace.append(entry)
        try:
            if len(data) > self.limits.request_bytes:
                raise ProbeFailure(
                    f"request of {len(data)} bytes is over the limit of"
                    f" {self.limits.request_bytes} bytes; not sent"
                )
            reply = await self._exchange(url, data, headers, entry)
        except ProbeFailure as failure:
            entry["error"] = self.masker.text(str(failure))
            raise
        except asyncio.CancelledError:
            entry["error"] = "stopped at the wall-clock limit"
            raise
        return reply

    async def _exchange(
        self, url: str, data: bytes, headers: dict[str, str], entry: dict[str, Any]
    ) -> Reply:
        assert self._session is not None, "use BoundedClient as an async context manager"
        try:
            async with self._session.post(
                url, data=data, headers=headers, allow_redirects=False
            ) as response:
                entry["response"] = {
                    "status": response.status,
                    "headers": self.masker.headers(response.headers),
                }
                body = await self._read(response, entry)
                return Reply(
                    response.status,
                    decoded(body, response.headers.get("Content-Encoding"), self.limits),
                    content_type=response.headers.get("Content-Type"),
                    location=response.headers.get("Location"),
                    request_id=response.headers.get("X-Request-ID"),
                )
        except TimeoutError as error:
            raise ProbeFailure(
                f"no data for {self.limits.socket_timeout:g} s (socket timeout)"
            ) from error
        except aiohttp.ClientError as error:
            raise ProbeFailure(f"HTTP exchange failed: {error}") from error

    async def _read(self, response: aiohttp.ClientResponse, entry: dict[str, Any]) -> bytes:
        """The body, refused once it passes the limit (whatever Content-Length claimed)."""
        limit = self.limits.response_bytes
        body = bytearray()
        try:
            async for chunk in response.content.iter_any():
                body += chunk
                if len(body) > limit:
                    raise ProbeFailure(f"response body over the limit of {limit} bytes")
        finally:
            entry["response"].update(self._excerpt(bytes(body[: limit + 1])))
        return bytes(body)

    def _excerpt(self, data: bytes) -> dict[str, Any]:
        """A body for the trace: its size and its first bytes as masked text."""
        text = data[:TRACE_BODY_LIMIT].decode("utf-8", "replace")
        return {
            "bytes": len(data),
            "body": self.masker.text(text),
            "body_truncated": len(data) > TRACE_BODY_LIMIT,
        }
