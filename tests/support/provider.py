"""The one scripted provider of the proxy and reliability suites: a real aiohttp server on
loopback whose answer a test sets and changes between requests.

It answers every path (`GET /v1/models` with a model list) with `script.body` cut into
`chunk_sizes` then `chunk_size` pieces, or, when `script.events` is set, with the events that
function builds from the request's JSON, one write each (a long answer then costs no memory).
It can pause between writes (`delay`), reset the connection or hold it open after some bytes,
hold every stream after its first write until `gate` streams are open at once (the only way to
be sure they overlapped), and it keeps every request it saw and the sha256 of every answer it
finished, by `X-Request-ID`. `calltap.fakes.FakeProvider` is the other provider: it speaks every
dialect from a fake model; this one writes exactly the bytes a test scripts.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from tests.support.streams import chat_stream

from calltap.fakes.provider import CREATED, DONE
from calltap.fakes.server import LoopbackServer

Events = Callable[[dict[str, Any]], Iterable[bytes]]


@dataclass
class ProviderScript:
    """What the provider answers; tests change it between requests."""

    body: bytes = field(default_factory=chat_stream)
    content_type: str = "text/event-stream"
    chunk_size: int = 97
    chunk_sizes: list[int] = field(default_factory=list)
    """Explicit sizes of the first chunks (then `chunk_size`), each flushed on its own."""
    events: Events | None = None
    """Build the answer from the request's JSON instead, one write per event."""
    delay: float = 0.0
    """Seconds between writes."""
    reset_after: int | None = None
    """Close the connection abruptly after this many body bytes."""
    hold_after: int | None = None
    """Stop sending after this many bytes and wait (until cancelled) instead of finishing;
    a request's `?hold=N` query does the same for that request alone."""
    gate: int | None = None
    """Hold each stream after its first write until this many are open at once."""
    status: int = 200
    content_length: bool = False
    reply_with_request: bool = False
    """Answer with the request content's own text (so concurrent requests differ)."""
    seen: list[dict[str, Any]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    """The paths of the answers cut by the other side."""


@dataclass
class Sent:
    """One answer as the provider wrote it."""

    bytes: int = 0
    sha256: str | None = None
    """Set once the last byte was written."""


class ScriptedProvider(LoopbackServer):
    """Serves `script` (see the module docstring)."""

    handler_cancellation = True

    def __init__(self, script: ProviderScript | None = None) -> None:
        super().__init__()
        self.script = script if script is not None else ProviderScript()
        self.sent: dict[str, Sent] = {}
        self.open_streams = 0
        self.most_open = 0
        self.all_open = asyncio.Event()
        self.release = asyncio.Event()

    @property
    def cancelled(self) -> int:
        return len(self.script.cancelled)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.answer)
        return app

    async def answer(self, request: web.Request) -> web.StreamResponse:
        script = self.script
        raw = await request.read()
        script.seen.append({"method": request.method, "path": request.path_qs,
                            "headers": dict(request.headers), "body": raw})
        if request.path == "/v1/models":
            return web.json_response({"object": "list", "data": [{"id": "gpt-test"}]})
        headers = {"Content-Type": script.content_type, "X-Provider": "fake"}
        pieces = self._pieces(raw, headers)
        response = web.StreamResponse(status=script.status, headers=headers)
        await response.prepare(request)
        hold = int(request.query["hold"]) if "hold" in request.query else script.hold_after
        sent = self.sent[request.headers.get("X-Request-ID", "")] = Sent()
        self.open_streams += 1
        self.most_open = max(self.most_open, self.open_streams)
        try:
            digest = await self._write(request, response, pieces, sent, hold)
        except (asyncio.CancelledError, ConnectionError):
            script.cancelled.append(request.path)
            raise
        finally:
            self.open_streams -= 1
        if digest is not None:
            await response.write_eof()
            sent.sha256 = digest
        return response

    def _pieces(self, raw: bytes, headers: dict[str, str]) -> Iterator[bytes]:
        script = self.script
        if script.events is not None:
            return iter(script.events(orjson.loads(raw)))
        body = script.body
        if script.reply_with_request:
            content = orjson.loads(raw)["messages"][-1]["content"]
            body = chat_stream(content, marker=content.replace(" ", "-"))
        if script.content_length:
            headers["Content-Length"] = str(len(body))
        return _cut(body, script.chunk_sizes, script.chunk_size)

    async def _write(self, request: web.Request, response: web.StreamResponse,
                     pieces: Iterator[bytes], sent: Sent, hold: int | None) -> str | None:
        """Write the pieces as scripted; the answer's sha256, or None when it was reset."""
        script = self.script
        digest = hashlib.sha256()
        for number, piece in enumerate(pieces):
            if script.reset_after is not None and sent.bytes >= script.reset_after:
                assert request.transport is not None
                request.transport.abort()
                return None
            if hold is not None and sent.bytes >= hold:
                await asyncio.sleep(3600)
            await response.write(piece)
            digest.update(piece)
            sent.bytes += len(piece)
            if number == 0 and script.gate is not None:
                if self.open_streams >= script.gate:
                    self.all_open.set()
                await self.release.wait()
            elif script.delay:
                await asyncio.sleep(script.delay)
        return digest.hexdigest()


def _cut(body: bytes, sizes: list[int], size: int) -> Iterator[bytes]:
    """`body` in pieces of `sizes`, then of `size`."""
    start = number = 0
    while start < len(body):
        width = sizes[number] if number < len(sizes) else size
        yield body[start:start + width]
        start += width
        number += 1


def text_events(request: dict[str, Any]) -> Iterator[bytes]:
    """`ProviderScript.events` for the load tests: an OpenAI chat stream of `max_tokens` text
    deltas between the role delta and the finish reason, then `[DONE]`; its id derives from the
    last message, so each request's answer differs."""
    marker = hashlib.sha256(request["messages"][-1]["content"].encode()).hexdigest()[:16]
    return answer_events(marker, request["max_tokens"])


def answer_events(marker: str, events: int) -> Iterator[bytes]:
    """The provider's answer, one SSE event at a time: `events` text deltas between the role
    delta and the finish reason, then `[DONE]`."""
    envelope = {"id": f"chatcmpl-{marker}", "object": "chat.completion.chunk",
                "created": CREATED, "model": "gpt-test"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return b"data: " + orjson.dumps({**envelope, "choices": [choice]}) + b"\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for number in range(events):
        yield chunk({"content": f"word{number} "})
    yield chunk({}, "stop")
    yield DONE
