"""Hostile HTTP on the wire, through raw sockets: header and body limits, lying Content-Length,
Transfer-Encoding tricks, HTTP/1.0 clients, and providers that lie or compress.

Each refused request gets calltap's own JSON answer (or a closed connection), never reaches the
gateway (or, on the back, the provider), leaves nothing in the recordings tree, and the proxy
answers the next request normally.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.proxy.conftest import *  # noqa: F403  (its fixtures: provider, gateway, ...)
from tests.proxy.conftest import chat_request, chat_stream, post_chat

BODY = chat_request()


@dataclass
class Reply:
    """One HTTP response read off a raw socket."""

    version: bytes
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    chunked: bool

    def header(self, name: str) -> str | None:
        return next((v for n, v in self.headers if n.lower() == name.lower()), None)

    def error(self) -> dict[str, Any]:
        assert self.header("Content-Type") == "application/json"
        return json.loads(self.body)["error"]


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


async def read_reply(reader: asyncio.StreamReader) -> Reply:
    """The next final (non-1xx) response: framed by Content-Length, chunked, or by close."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        version, status = lines[0].split(" ")[:2]
        if not status.startswith("1"):
            break
    headers = [tuple(line.split(": ", 1)) for line in lines[1:] if line]
    reply = Reply(version.encode(), int(status), headers, b"", False)  # type: ignore[arg-type]
    length = reply.header("Content-Length")
    if reply.header("Transfer-Encoding") == "chunked":
        reply.chunked = True
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")
        reply.body = b"".join(parts)
    elif length is not None:
        reply.body = await reader.readexactly(int(length))
    else:
        reply.body = await reader.read()
    return reply


async def closed(reader: asyncio.StreamReader) -> bool:
    """True when the peer closes the connection (within a few seconds) without sending more."""
    try:
        return await asyncio.wait_for(reader.read(1), 3) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@dataclass
class Conversation:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def reply(self) -> Reply:
        return await asyncio.wait_for(read_reply(self.reader), 20)

    def close(self) -> None:
        self.writer.close()


async def connect(url: str) -> Conversation:
    return Conversation(*await asyncio.open_connection(*host_port(url)))


async def exchange(url: str, data: bytes) -> tuple[Reply, bool]:
    """Send raw bytes, read one response, and tell whether the server then closed."""
    talk = await connect(url)
    try:
        await talk.send(data)
        reply = await talk.reply()
        return reply, await closed(talk.reader)
    finally:
        talk.close()


def request(headers: list[tuple[str, str]] | None = None, body: bytes = BODY, *,
            path: str = "/v1/chat/completions", version: str = "HTTP/1.1",
            framing: str = "length") -> bytes:
    """A raw request that asks for the connection to close after it; `framing` is `length`
    (Content-Length), `chunked` or `none`."""
    lines = [f"POST {path} {version}", "Host: calltap.test", "Content-Type: application/json",
             "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers or []]
    if framing == "length":
        lines.append(f"Content-Length: {len(body)}")
    elif framing == "chunked":
        lines.append("Transfer-Encoding: chunked")
        body = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def capture_dirs(recordings: Path) -> list[str]:
    return sorted(p.name for p in recordings.glob("[0-9]*/*"))


async def healthy(tap: Any, client: aiohttp.ClientSession, expected: bytes) -> None:
    """The next ordinary request through the front is relayed and compared as equal."""
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200 and body == expected
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert pair["comparison"]["verdict"] == "equal"


# -- framing the parser must reject ---------------------------------------------------------------

POST_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: calltap.test\r\n"
MALFORMED = {
    "Transfer-Encoding with Content-Length": (
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400),
    "Transfer-Encoding chunked, gzip": (
        b"Transfer-Encoding: chunked, gzip\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400),
    "Transfer-Encoding gzip, chunked": (
        b"Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501),
    "obfuscated 'Transfer-Encoding : chunked'": (
        b"Transfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400),
    "Transfer-Encoding xchunked": (
        b"Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400),
    "two Transfer-Encoding headers": (
        b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        400),
    "chunk size not hex": (b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400),
    "negative chunk size": (b"Transfer-Encoding: chunked\r\n\r\n-1\r\nhello\r\n0\r\n\r\n", 400),
    "chunk size overflowing 64 bits": (
        b"Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\nhello\r\n0\r\n\r\n", 400),
    "chunk size with 0x prefix": (
        b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", 400),
    "chunk shorter than its size line": (
        b"Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n", 400),
    "two different Content-Lengths": (
        b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
    "Content-Length +5": (b"Content-Length: +5\r\n\r\nhello", 400),
    "Content-Length list '5, 5'": (b"Content-Length: 5, 5\r\n\r\nhello", 400),
    "NUL in a header value": (b"X-Note: a\x00b\r\nContent-Length: 5\r\n\r\nhello", 400),
    "obsolete line folding": (b"X-Note: a\r\n b\r\nContent-Length: 5\r\n\r\nhello", 400),
}


@pytest.mark.parametrize("listener", ["front", "back"])
@pytest.mark.parametrize("name", list(MALFORMED))
async def test_malformed_framing_is_refused_before_any_upstream(
    topology: dict[str, Any], client: aiohttp.ClientSession, tally: Any, name: str,
    listener: str,
) -> None:
    tap, provider_script = topology["tap"], topology["provider"]
    gateway_script = topology["gateway"]
    rest, status = MALFORMED[name]
    reply, was_closed = await exchange(getattr(tap, f"{listener}_url"), POST_HEAD + rest)
    assert reply.status == status
    error = reply.error()
    assert error["source"] == "calltap"
    assert error["code"] == ("invalid_http_request" if status == 400
                             else "unsupported_transfer_encoding")
    assert b"hello" not in reply.body
    if status == 400:
        assert was_closed
    assert gateway_script.calls == 0 and provider_script.seen == []
    assert capture_dirs(tap.recordings) == []
    await healthy(tap, client, provider_script.body)
    tally.hostile(f"HTTP framing: {name}")


# -- header and body limits -------------------------------------------------------------------

def head_with(extra: bytes, path: bytes = b"/v1/chat/completions") -> bytes:
    return (b"POST " + path + b" HTTP/1.1\r\nHost: calltap.test\r\n" + extra
            + b"Content-Type: application/json\r\nContent-Length: " + str(len(BODY)).encode()
            + b"\r\n\r\n" + BODY)


OVERSIZED_HEADS = {
    "one 20 KiB header line": head_with(b"X-Big: " + b"a" * 20_000 + b"\r\n"),
    "a 20 KiB request line": head_with(b"", b"/v1/chat/completions?q=" + b"a" * 20_000),
    "200 headers": head_with(b"".join(b"X-N%d: v\r\n" % i for i in range(200))),
    "75 KB of headers in 15 KB lines": head_with(
        b"".join(b"X-N%d: %s\r\n" % (i, b"v" * 15_000) for i in range(5))),
}


@pytest.mark.parametrize("listener", ["front", "back"])
@pytest.mark.parametrize("name", list(OVERSIZED_HEADS))
async def test_oversized_heads_get_431_from_calltap(
    topology: dict[str, Any], client: aiohttp.ClientSession, tally: Any, name: str,
    listener: str, log: Any,
) -> None:
    tap, provider_script = topology["tap"], topology["provider"]
    gateway_script = topology["gateway"]
    reply, _ = await exchange(getattr(tap, f"{listener}_url"), OVERSIZED_HEADS[name])
    assert reply.status == 431
    error = reply.error()
    assert (error["code"], error["type"]) == ("request_header_fields_too_large",
                                              "invalid_request_error")
    assert gateway_script.calls == 0 and provider_script.seen == []
    assert capture_dirs(tap.recordings) == []
    refused = log.lines("request.refused")
    side = "downstream" if listener == "front" else "upstream"
    assert [(r["side"], r["status"]) for r in refused] == [(side, 431)]
    await healthy(tap, client, provider_script.body)
    tally.hostile(f"request head: {name}")


@dataclass
class RawProvider:
    """A provider on a raw socket: it reads one request (headers and a Content-Length body),
    answers `response` byte for byte, then closes."""

    url: str = ""
    response: bytes = b""
    requests: list[bytes] = field(default_factory=list)


@asynccontextmanager
async def serve_raw() -> AsyncIterator[RawProvider]:
    """A `RawProvider` listening on loopback while the block runs."""
    script = RawProvider()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            script.requests.append(head + await reader.readexactly(length))
            writer.write(script.response)
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, limit=1 << 20)
    script.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield script
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def raw_provider() -> AsyncIterator[RawProvider]:
    async with serve_raw() as script:
        yield script


def sse_response(body: bytes, *headers: bytes) -> bytes:
    """An event-stream response carrying `body` as is (delimited by close, unless a header
    says otherwise)."""
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body)


def head_of_size(total: int, line: int) -> bytes:
    """A request whose request line and headers take exactly `total` bytes, one header of
    them `line` bytes of name and value."""
    fixed = [b"POST /v1/chat/completions HTTP/1.1", b"Host: calltap.test",
             b"Content-Length: " + str(len(BODY)).encode(), b"X-Big: " + b"a" * (line - 5)]
    remaining = total - sum(len(f) + 2 for f in fixed)
    count = -(-remaining // 8009)
    values = [(remaining - 9 * count) // count] * count
    values[0] += remaining - 9 * count - sum(values)
    fillers = [b"X-F%02d: " % i + b"f" * size for i, size in enumerate(values)]
    size = sum(len(f) + 2 for f in fixed + fillers)
    assert size == total, (size, total)
    return b"\r\n".join(fixed + fillers) + b"\r\n\r\n" + BODY


@pytest.mark.parametrize(("total", "line", "status"), [
    (64 * 1024, 16 * 1024, 200),
    (64 * 1024, 16 * 1024 + 1, 431),
    (64 * 1024 + 1, 16 * 1024, 431),
])
async def test_header_limits_are_exact(make_tap: Any, raw_provider: RawProvider, total: int,
                                       line: int, status: int) -> None:
    raw_provider.response = sse_response(chat_stream())
    tap = await make_tap(back=("127.0.0.1", 0), provider=raw_provider.url)
    reply, _ = await exchange(tap.back_url, head_of_size(total, line))
    assert reply.status == status
    assert len(raw_provider.requests) == (status == 200)
    if status == 200:
        assert reply.body == chat_stream()
        assert b"X-Big: " + b"a" * (line - 5) + b"\r\n" in raw_provider.requests[0]


LIMIT = 64 * 1024


@pytest.fixture
async def limited(provider: Any, gateway: Any, make_tap: Any) -> dict[str, Any]:
    """The topology with max_request_body = 64 KiB; bodies over 16 KiB stream through."""
    provider_script, provider_url = provider
    gateway_script, gateway_url = gateway
    tap = await make_tap(front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0),
                         provider=provider_url, max_request_body=LIMIT,
                         max_fingerprint_body=16 * 1024)
    gateway_script.target = tap.back_url
    return {"tap": tap, "provider": provider_script, "gateway": gateway_script}


def chunked(body: bytes, size: int) -> bytes:
    out = [f"{len(body[i:i + size]):x}\r\n".encode() + body[i:i + size] + b"\r\n"
           for i in range(0, len(body), size)]
    return b"".join(out) + b"0\r\n\r\n"


def padded_request(size: int) -> bytes:
    body = chat_request("p" * size)
    return chat_request("p" * (2 * size - len(body)))


async def test_declared_body_over_the_limit_gets_413_and_is_never_forwarded(
    limited: dict[str, Any], client: aiohttp.ClientSession, tally: Any, log: Any,
) -> None:
    tap = limited["tap"]
    body = padded_request(LIMIT + 1)
    assert len(body) == LIMIT + 1
    reply, _ = await exchange(tap.front_url, request(body=body))
    assert reply.status == 413
    assert reply.error()["code"] == "request_too_large"
    assert limited["gateway"].calls == 0 and limited["provider"].seen == []
    assert capture_dirs(tap.recordings) == []
    assert [r["status"] for r in log.lines("request.refused")] == [413]
    at_limit = padded_request(LIMIT)
    assert len(at_limit) == LIMIT
    reply, _ = await exchange(tap.front_url, request(body=at_limit))
    assert reply.status == 200
    assert limited["provider"].seen[-1]["body"] == at_limit
    tally.hostile("request body: Content-Length over max_request_body")


async def test_expect_continue_over_the_limit_is_refused_before_the_body(
    limited: dict[str, Any], tally: Any,
) -> None:
    tap = limited["tap"]
    talk = await connect(tap.front_url)
    try:
        await talk.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: calltap.test\r\n"
                        b"Expect: 100-continue\r\nContent-Length: 1000000000\r\n\r\n")
        head = await asyncio.wait_for(talk.reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 413 ")
    finally:
        talk.close()
    small = await connect(tap.front_url)
    try:
        await small.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: calltap.test\r\n"
                         b"Expect: 100-continue\r\nContent-Length: " + str(len(BODY)).encode()
                         + b"\r\n\r\n")
        interim = await asyncio.wait_for(small.reader.readuntil(b"\r\n\r\n"), 10)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        await small.send(BODY)
        reply = await small.reply()
        assert reply.status == 200 and reply.body == limited["provider"].body
    finally:
        small.close()
    assert limited["provider"].seen[-1]["body"] == BODY
    assert "Expect" not in limited["provider"].seen[-1]["headers"]
    tally.hostile("request body: Expect 100-continue with 1 GB declared")


async def test_chunked_body_crossing_the_limit_before_forwarding_gets_413(
    limited: dict[str, Any], client: aiohttp.ClientSession, tally: Any,
) -> None:
    tap = limited["tap"]
    head = request(framing="none", headers=[("Transfer-Encoding", "chunked")], body=b"")
    reply, _ = await exchange(tap.front_url, head + chunked(b"x" * (LIMIT + 10), 4096))
    assert reply.status == 413 and reply.error()["code"] == "request_too_large"
    assert limited["gateway"].calls == 0 and limited["provider"].seen == []
    assert capture_dirs(tap.recordings) == []
    await healthy(tap, client, limited["provider"].body)
    tally.hostile("request body: chunked, crossing the limit while read")


async def test_chunked_body_crossing_the_limit_while_streamed_is_cut_and_refused(
    limited: dict[str, Any], client: aiohttp.ClientSession, tally: Any,
) -> None:
    tap = limited["tap"]
    body = padded_request(LIMIT + 5000)
    talk = await connect(tap.front_url)
    try:
        await talk.send(request(framing="none", headers=[("Transfer-Encoding", "chunked"),
                                                         ("X-Request-ID", "too-big")], body=b""))
        for start in range(0, len(body), 8192):
            await talk.send(chunked(body[start:start + 8192], 8192)[:-5])
            await asyncio.sleep(0.01)
        await talk.send(b"0\r\n\r\n")
        reply = await talk.reply()
    finally:
        talk.close()
    assert reply.status == 413 and reply.error()["code"] == "request_too_large"
    assert reply.header("X-Request-ID") == "too-big"
    assert limited["gateway"].calls == 0 and limited["provider"].seen == []
    pair = await tap.wait_compared("too-big")
    leg = pair["legs"]["downstream"]
    assert (leg["status"], leg["ended"]) == (413, "request_too_large")
    directory = next(tap.recordings.glob("[0-9]*/too-big"))
    assert sorted(p.name for p in directory.iterdir()) == [
        "downstream.json", "downstream.request", "pair.json"]
    recorded = (directory / "downstream.request").read_bytes()
    assert len(recorded) <= LIMIT and body.startswith(recorded)
    assert json.loads((directory / "downstream.json").read_bytes())["error"]["code"] == (
        "request_too_large")
    await healthy(tap, client, limited["provider"].body)
    tally.hostile("request body: chunked, crossing the limit while streamed upstream")


# -- Content-Length that lies, HTTP/1.0, compressed streams ----------------------------------------

async def test_client_content_length_shorter_than_the_body(
    topology: dict[str, Any], tally: Any,
) -> None:
    """The declared length frames the body: the bytes after it are read as the next request on
    that connection (here a bad one, refused with 400), never as part of this one."""
    tap, provider_script = topology["tap"], topology["provider"]
    declared = BODY[:-10]
    talk = await connect(tap.front_url)
    try:
        await talk.send(request(body=declared).replace(b"Connection: close\r\n", b""))
        reply = await talk.reply()
        await talk.send(BODY[-10:] + b"\r\n\r\n")
        refused = await talk.reply()
        assert await closed(talk.reader)
    finally:
        talk.close()
    assert reply.status == 200 and reply.body == provider_script.body
    assert refused.status == 400 and refused.error()["code"] == "invalid_http_request"
    assert [seen["body"] for seen in provider_script.seen] == [declared]
    pair = await tap.wait_compared(reply.header("X-Request-ID") or "")
    directory = next(tap.recordings.glob(f"*/{pair['request_id']}"))
    assert (directory / "downstream.request").read_bytes() == declared
    assert (directory / "upstream.request").read_bytes() == declared
    tally.hostile("client Content-Length shorter than the body")


async def test_pipelined_garbage_refuses_the_whole_batch(
    topology: dict[str, Any], client: aiohttp.ClientSession, tally: Any,
) -> None:
    """A valid request followed, in the same packet, by bytes that cannot be a request: aiohttp
    refuses the batch with one 400 and closes; nothing of it is relayed or recorded."""
    tap, provider_script = topology["tap"], topology["provider"]
    reply, was_closed = await exchange(tap.front_url, request() + b"NOT HTTP AT ALL\r\n\r\n")
    assert reply.status == 400 and reply.error()["code"] == "invalid_http_request"
    assert was_closed
    assert topology["gateway"].calls == 0 and provider_script.seen == []
    assert capture_dirs(tap.recordings) == []
    await healthy(tap, client, provider_script.body)
    tally.hostile("pipelined garbage after a valid request")


async def test_client_content_length_longer_than_the_body(
    topology: dict[str, Any], client: aiohttp.ClientSession, tally: Any,
) -> None:
    """The client promises more than it sends and stops: nothing is forwarded or recorded."""
    tap, provider_script = topology["tap"], topology["provider"]
    talk = await connect(tap.front_url)
    try:
        await talk.send(request(body=BODY)[: -len(BODY)].replace(
            f"Content-Length: {len(BODY)}".encode(), f"Content-Length: {len(BODY) + 100}".encode())
            + BODY)
        talk.writer.write_eof()
        assert await closed(talk.reader)
    finally:
        talk.close()
    assert topology["gateway"].calls == 0 and provider_script.seen == []
    assert capture_dirs(tap.recordings) == []
    await healthy(tap, client, provider_script.body)
    tally.hostile("client Content-Length longer than the body")


async def test_http_1_0_client_gets_a_close_delimited_response(
    topology: dict[str, Any], tally: Any,
) -> None:
    tap, provider_script = topology["tap"], topology["provider"]
    reply, was_closed = await exchange(tap.front_url, request(version="HTTP/1.0"))
    assert reply.status == 200
    assert reply.version == b"HTTP/1.0" and not reply.chunked
    assert reply.header("Transfer-Encoding") is None
    assert reply.body == provider_script.body and was_closed
    pair = await tap.wait_compared(reply.header("X-Request-ID") or "")
    assert pair["comparison"]["verdict"] == "equal"
    tally.hostile("HTTP/1.0 client without keep-alive")


async def test_provider_content_length_shorter_than_the_body(
    make_tap: Any, raw_provider: RawProvider, client: aiohttp.ClientSession, tally: Any,
) -> None:
    """Bytes past the declared length cannot start a next response: aiohttp rejects the
    exchange, so the client gets calltap's 502 (recorded as the leg's answer), not a body of
    unknown length."""
    raw_provider.response = sse_response(chat_stream(), b"Content-Length: 100")
    tap = await make_tap(back=("127.0.0.1", 0), provider=raw_provider.url)
    async with client.post(tap.back_url + "/v1/chat/completions", data=BODY,
                           headers={"X-Request-ID": "short-length"}) as response:
        status, body = response.status, await response.read()
    assert status == 502 and json.loads(body)["error"]["code"] == "upstream_reset"
    pair = await tap.wait_compared("short-length")
    assert (pair["legs"]["upstream"]["status"], pair["legs"]["upstream"]["ended"]) == (
        502, "upstream_reset")
    recorded = (next(tap.recordings.glob("*/short-length")) / "upstream.json").read_bytes()
    assert recorded == body
    tally.bytes_lost(len(body) - len(recorded))
    tally.hostile("provider Content-Length shorter than the body")


async def test_provider_content_length_longer_than_the_body(
    make_tap: Any, raw_provider: RawProvider, client: aiohttp.ClientSession, tally: Any,
) -> None:
    stream = chat_stream()
    raw_provider.response = sse_response(stream, b"Content-Length: %d" % (len(stream) + 500))
    tap = await make_tap(back=("127.0.0.1", 0), provider=raw_provider.url)
    received = b""
    async with client.post(tap.back_url + "/v1/chat/completions", data=BODY,
                           headers={"X-Request-ID": "long-length"}) as response:
        with pytest.raises(aiohttp.ClientPayloadError):
            async for chunk in response.content.iter_any():
                received += chunk
    assert received == stream
    pair = await tap.wait_compared("long-length")
    leg = pair["legs"]["upstream"]
    assert (leg["ended"], leg["bytes"]) == ("upstream_reset", len(stream))
    recorded = (next(tap.recordings.glob("*/long-length")) / "upstream.sse").read_bytes()
    assert recorded == received
    tally.bytes_lost(len(received) - len(recorded))
    tally.hostile("provider Content-Length longer than the body")


async def test_gzip_event_stream_is_relayed_as_is_and_compared_decoded(
    gateway: Any, make_tap: Any, raw_provider: RawProvider, client: aiohttp.ClientSession,
    tally: Any,
) -> None:
    stream = chat_stream("compressed words " * 50)
    compressed = gzip.compress(stream)
    raw_provider.response = sse_response(compressed, b"Content-Encoding: gzip")
    gateway_script, gateway_url = gateway
    tap = await make_tap(front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0),
                         provider=raw_provider.url)
    gateway_script.target = tap.back_url
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert body == compressed
    pair = await tap.wait_compared(headers["X-Request-ID"])
    directory = next(tap.recordings.glob(f"*/{pair['request_id']}"))
    for side in ("downstream", "upstream"):
        assert (directory / f"{side}.sse").read_bytes() == compressed
    comparison = pair["comparison"]
    assert (comparison["verdict"], comparison["findings"]) == ("equal", [])
    assert comparison["upstream"]["tool_calls"] == 2
    tally.streams(1)
    tally.hostile("provider event stream with Content-Encoding: gzip")
