"""What calltap refuses before relaying, and how it says so.

A request aiohttp's parser cannot read (400), a head past the header limits (431), a transfer
coding other than chunked (501) or a body past `max_request_body` (413, also when a streamed body
crosses it on its way upstream: the upstream request is then cut, never completed) gets
calltap's own answer, in the shape OpenAI's SDKs parse (`{"error": {"message", "type", "param",
"code"}}` plus `"source": "calltap"`). `GuardedServer` puts that answer in place of aiohttp's
plain-text one, which would echo the request's raw bytes (its secret headers included) into the
response and the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import HttpVersion11, web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

from calltap.config import Config
from calltap.recordings import REQUEST_TOO_LARGE

MAX_HEADER_COUNT = 128
LISTEN_BACKLOG = 4096
"""Connections the kernel holds for each listener until calltap accepts them (it caps this at
`net.core.somaxconn`). aiohttp's 128 overflows when a busy loop accepts late: the kernel then
drops new connections' handshakes, the clients retry after a second or more, and a gateway's
connect timeout turns that into failed requests."""
"""Request headers past this count get 431 (aiohttp's parser stops there)."""
TOO_MANY_HEADERS = "Too many headers received"
"""How aiohttp's parsers word that refusal (its only trace: the exception is a plain
BadHttpMessage)."""

Refused = Callable[[int, str, BaseException | None], None]
"""Told (status, code, the parser's exception) each time a request is refused before it
reached a handler; it must not log the exception's text, which quotes the request's bytes."""


class RequestTooLarge(Exception):
    """The request body crossed `max_request_body` while it was being read or streamed."""


def error_body(kind: str, message: str, code: str) -> bytes:
    """An error in the shape OpenAI's API and SDKs use, marked as calltap's own answer."""
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None,
                                   "code": code, "source": "calltap"}})


def refusal(status: int, code: str, message: str) -> web.Response:
    """calltap's own answer to a request it will not relay."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return web.Response(status=status, body=error_body(kind, message, code),
                        content_type="application/json")


def classify_parse_error(status: int, exc: BaseException | None, *, max_line: int,
                         max_headers: int) -> tuple[int, str, str]:
    """(status, code, message) for a request aiohttp's parser or a handler failed on. The
    message is fixed text: never the exception's, which quotes the request."""
    if isinstance(exc, LineTooLong) or (
            isinstance(exc, BadHttpMessage) and exc.message == TOO_MANY_HEADERS):
        return (431, "request_header_fields_too_large",
                f"a request header line is longer than {max_line} bytes or there are more than"
                f" {max_headers} headers")
    if status >= 500:
        return status, "internal_error", "calltap failed while handling the request"
    return status, "invalid_http_request", "calltap could not parse the request as HTTP/1.1"


class GuardedProtocol(web.RequestHandler):
    """aiohttp's connection handler, answering a request it cannot parse (or a handler
    failure) with calltap's JSON error and one safe log line instead of echoing the bytes."""

    def __init__(self, manager: web.Server, *, on_refused: Refused, **options: Any) -> None:
        super().__init__(manager, **options)
        self.on_refused = on_refused

    def handle_error(self, request: web.BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if request.writer.output_size > 0:
            raise ConnectionError("the response had started; the connection is cut instead")
        status, code, text = classify_parse_error(status, exc, max_line=self.max_field_size,
                                                  max_headers=self.max_headers)
        self.on_refused(status, code, exc)
        response = refusal(status, code, text)
        response.force_close()
        return response


class _ServerLogBridge(logging.Handler):
    """aiohttp's own error records as calltap log lines: the exception's type and aiohttp's
    message template, never the formatted text (it can quote request bytes)."""

    def __init__(self, log: Any, listener: str) -> None:
        super().__init__(logging.WARNING)
        self._log = log
        self._listener = listener

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        self._log.warning("http.error", listener=self._listener, what=str(record.msg),
                          error=type(error).__name__ if error is not None else None)


def server_logger(log: Any, listener: str) -> logging.Logger:
    """A private stdlib logger for one listener's aiohttp machinery, bridged to `log`."""
    logger = logging.Logger(f"calltap.http.{listener}", logging.WARNING)
    logger.propagate = False
    logger.addHandler(_ServerLogBridge(log, listener))
    return logger


def protocol_options(config: Config, log: Any, listener: str) -> dict[str, Any]:
    """aiohttp connection settings for every listener: the header limits, no decompression, and
    aiohttp's own error log routed to calltap's log without the request bytes it would quote."""
    return {"access_log": None, "auto_decompress": False,
            "max_line_size": config.max_header_line, "max_field_size": config.max_header_line,
            "max_headers": MAX_HEADER_COUNT, "logger": server_logger(log, listener)}


async def listen(runner: web.BaseRunner, address: tuple[str, int]) -> str:
    """Start `runner` on `address`; the URL it listens on (the port the system picked for 0)."""
    await runner.setup()
    site = web.TCPSite(runner, address[0], address[1], reuse_address=True,
                       backlog=LISTEN_BACKLOG)
    await site.start()
    host, port = runner.addresses[0][:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


class GuardedServer(web.Server):
    """aiohttp's low-level server (one handler for every method and path) whose connections
    are `GuardedProtocol`s with the given parser limits."""

    def __init__(self, handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], *,
                 on_refused: Refused, **options: Any) -> None:
        super().__init__(handler, handler_cancellation=True, **options)
        self.protocol_options = options
        self.on_refused = on_refused

    def __call__(self) -> web.RequestHandler:
        return GuardedProtocol(self, loop=asyncio.get_running_loop(),
                               on_refused=self.on_refused, **self.protocol_options)


def head_size(request: web.BaseRequest) -> int:
    """The request line and header lines as they came on the wire, CRLFs included."""
    line = len(f"{request.method} {request.raw_path} HTTP/1.1\r\n")
    return line + sum(len(name) + len(value) + 4 for name, value in request.raw_headers)


def too_large(limit: int) -> str:
    return f"the request body is larger than {limit} bytes (max_request_body)"


async def read_prefix(request: web.BaseRequest, limit: int,
                      max_body: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of the request body, and whether that is the whole body. Raises
    RequestTooLarge when the body crosses `max_body` (0: no limit) meanwhile."""
    if not request.body_exists:
        return b"", True
    chunks: list[bytes] = []
    size = 0
    content = request.content
    while size <= limit:
        chunk = await content.readany()
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
        if max_body and size > max_body:
            raise RequestTooLarge(too_large(max_body))
    return b"".join(chunks), False


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why calltap answers a request itself instead of relaying it."""

    status: int
    code: str
    message: str


async def admit(request: web.BaseRequest, config: Config) -> tuple[bytes, bool] | Refusal:
    """The body's first `max_fingerprint_body` bytes and whether that is all of it, once the
    request is within the limits; else why it is refused (nothing was forwarded). aiohttp's
    parser already refused most oversized heads; its per-field count is looser than
    `max_header_line` (a name and its value together), which is checked here.

    A transfer coding other than chunked (`gzip, chunked`) is refused with 501: aiohttp only
    removes the chunking, and Transfer-Encoding is hop-by-hop, so the gateway would get gzip
    bytes it has no way to recognize."""
    longest = max((len(name) + len(value) for name, value in request.raw_headers), default=0)
    if longest > config.max_header_line:
        return Refusal(431, "request_header_fields_too_large",
                       f"a request header's name and value take {longest} bytes,"
                       f" more than {config.max_header_line}")
    head = head_size(request)
    if head > config.max_header_bytes:
        return Refusal(431, "request_header_fields_too_large",
                       f"the request line and headers take {head} bytes, more than"
                       f" {config.max_header_bytes}")
    codings = [token.strip().lower() for value in request.headers.getall(
        "Transfer-Encoding", ()) for token in value.split(",")]
    if codings and codings != ["chunked"]:
        return Refusal(501, "unsupported_transfer_encoding",
                       "only Transfer-Encoding: chunked is relayed")
    limit = config.max_request_body
    declared = request.content_length
    if limit and declared is not None and declared > limit:
        return Refusal(413, REQUEST_TOO_LARGE, too_large(limit))
    if (request.version == HttpVersion11
            and request.headers.get("Expect", "").lower() == "100-continue"):
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0
    try:
        return await read_prefix(request, config.max_fingerprint_body, limit)
    except RequestTooLarge as exc:
        return Refusal(413, REQUEST_TOO_LARGE, str(exc))
