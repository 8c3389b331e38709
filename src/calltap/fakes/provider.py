"""A fake LLM provider: deterministic answers in three API dialects, streamed or whole.

It answers `POST /v1/chat/completions` the way OpenAI does (see its API reference): chunk
envelopes with `id/object/created/model/system_fingerprint/choices`, a first tool-call delta with
index, id, type, name and `arguments: ""`, later deltas carrying only
`{"index": N, "function": {"arguments": "…"}}`, the fragments of parallel calls interleaved,
`usage: null` on every chunk and a final `choices: []` usage chunk when
`stream_options.include_usage` is set, and `data: [DONE]`.

It answers `POST /v1/messages` as Anthropic Messages (`calltap.fakes.anthropic_messages`: `event:`
lines, a text block, then one `tool_use` block per call, `ping`, `message_delta`, `message_stop`;
Anthropic's `x-api-key` and `anthropic-version` headers are accepted like any other) and
`POST /v1/responses` as OpenAI Responses (`calltap.fakes.openai_responses`: `response.*` events,
one `function_call` item per call, `response.completed`). A request with `"stream": true` gets a
stream, any other a JSON body.

It answers `POST /api/chat` as Ollama (`calltap.fakes.ollama_chat`: NDJSON lines, each call whole,
a `done: true` line; it streams unless `"stream": false`); `POST /model/{id}/converse-stream`
and `/model/{id}/converse` as Bedrock Converse (`calltap.fakes.bedrock_converse`: AWS event stream
messages, or the whole JSON body; the path says which);
`POST /model/{id}/invoke-with-response-stream` and `/model/{id}/invoke` as Anthropic on Bedrock
(`calltap.fakes.bedrock_anthropic`: Messages events in base64 `chunk` messages, or the Messages
body); and the Gemini API's and Vertex AI's
`…/models/{model}:streamGenerateContent` and `:generateContent` as Google Gemini
(`calltap.fakes.gemini`: SSE with `?alt=sse`, a JSON array written progressively without it, or
one object). A model named in the path is the model the answer names.

What the model says comes from `calltap.fakes.model`: one parallel call per offered tool with
arguments built from the tool's schema, else a text answer; the same question asked in any dialect
gets the same calls with the same arguments, so a faithful translating gateway compares `equal`.

The bytes are a function of the request body and the options alone: ids derive from the body's
sha256, `created` is fixed. Only the optional timestamps (for latency benchmarks: the send time
in an `obfuscation` field at the end of each SSE event's JSON object, see `stamped`) vary. Every
answer's bytes are kept in `exchanges`, so a test can check that a client received exactly what
the provider sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler
from multidict import CIMultiDict, CIMultiDictProxy

from calltap.fakes import (
    anthropic_messages,
    bedrock_anthropic,
    bedrock_converse,
    gemini,
    ollama_chat,
    openai_responses,
)
from calltap.fakes.model import (
    CREATED,
    DEFAULT_MODEL,
    Answer,
    answer,
    fragments,
    sample_arguments,
)
from calltap.fakes.server import LoopbackServer

__all__ = [
    "CHAT_PATH",
    "CLOCK_TOOL",
    "CONVERSE_PATH",
    "CONVERSE_STREAM_PATH",
    "CREATED",
    "DEFAULT_MODEL",
    "DIALECTS",
    "GEMINI_PATHS",
    "INVOKE_PATH",
    "INVOKE_STREAM_PATH",
    "MESSAGES_PATH",
    "MODELS_PATH",
    "OLLAMA_PATH",
    "QUESTION",
    "RESPONSES_PATH",
    "TEXT_REQUEST",
    "TOOLS_REQUEST",
    "WEATHER_TOOL",
    "Answer",
    "Exchange",
    "FakeProvider",
    "answer",
    "error_body",
    "fragments",
    "json_body",
    "sample_arguments",
    "stream_events",
]
"""The model's names (`answer`, `fragments`, `sample_arguments`, …) are re-exported: callers
written before the dialects were split out import them from here."""

CHAT_PATH = "/v1/chat/completions"
MESSAGES_PATH = anthropic_messages.PATH
RESPONSES_PATH = openai_responses.PATH
OLLAMA_PATH = ollama_chat.PATH
CONVERSE_STREAM_PATH = bedrock_converse.STREAM_PATH
CONVERSE_PATH = bedrock_converse.PATH
"""The Converse routes, `{model}` standing for the model id."""
INVOKE_STREAM_PATH = bedrock_anthropic.STREAM_PATH
INVOKE_PATH = bedrock_anthropic.PATH
GEMINI_PATHS = gemini.PATHS
SSE_TYPE = "text/event-stream; charset=utf-8"
MODELS_PATH = "/v1/models"
SYSTEM_FINGERPRINT = "fp_c0ffee0a11"
DONE = b"data: [DONE]\n\n"
STAMP = b',"obfuscation":"t%016x"}'
"""The send time as the last field of an event's JSON object: `time.time_ns()` in 16 lowercase
hex digits (fixed length, and never the 19 decimal digits in a row that make the comparator look
for an integer orjson reads as a float)."""

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
CLOCK_TOOL = {
    "type": "function",
    "function": {
        "name": "clock",
        "description": "Current time in a time zone",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
    },
}
QUESTION = [{"role": "user", "content": "What is the weather in Taipei, and the time in UTC?"}]
TOOLS_REQUEST: dict[str, Any] = {
    "model": DEFAULT_MODEL,
    "messages": QUESTION,
    "tools": [WEATHER_TOOL, CLOCK_TOOL],
    "stream": True,
    "stream_options": {"include_usage": True},
}
"""A streamed request offering two tools: answered with weather({"city":"Taipei"}) and
clock({"zone":"UTC"}) as parallel calls, then usage and [DONE]."""
TEXT_REQUEST: dict[str, Any] = {"model": DEFAULT_MODEL, "messages": QUESTION, "stream": True}
"""A streamed request without tools: answered with text, no usage chunk."""


@dataclass(slots=True)
class Exchange:
    """One answer as the provider saw it: the request (any dialect) and every byte it answered."""

    path: str
    request_headers: CIMultiDictProxy[str]
    request_body: bytes
    status: int = 0
    response_headers: CIMultiDict[str] = field(default_factory=CIMultiDict)
    response_body: bytearray = field(default_factory=bytearray)
    complete: bool = False
    """False when the client went away before the last byte was written."""

    @property
    def request_id(self) -> str | None:
        return self.request_headers.get("X-Request-ID")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.response_body).hexdigest()


def stream_events(reply: Answer, *, include_usage: bool) -> list[bytes]:
    """The answer as SSE events, `data: [DONE]` last; each item is one whole event."""
    envelope: dict[str, Any] = {
        "id": reply.id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": reply.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    steps = [(delta, None) for delta in reply.deltas] + [({}, reply.finish_reason)]
    chunks = []
    for delta, finish_reason in steps:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk = {**envelope, "choices": [choice]}
        if include_usage:
            chunk["usage"] = None
        chunks.append(chunk)
    if include_usage:
        chunks.append({**envelope, "choices": [], "usage": reply.usage})
    return [b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks] + [DONE]


def stamped(event: bytes, ns: int) -> bytes:
    """`event` with the send time `ns` in a last `obfuscation` field of its JSON object, where
    OpenAI puts the random padding of every chunk: the body stays plain `data:` blocks, as real
    streams are. The event's other bytes are kept as they are; an event that does not end in an
    object (`data: [DONE]`) is left unstamped."""
    if not event.endswith(b"}\n\n"):
        return event
    return event[:-3] + STAMP % ns + b"\n\n"


def json_body(reply: Answer) -> bytes:
    """The answer as a non-streaming `chat.completion` body."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": reply.finish_reason,
    }
    body = {
        "id": reply.id,
        "object": "chat.completion",
        "created": CREATED,
        "model": reply.model,
        "choices": [choice],
        "usage": reply.usage,
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    return orjson.dumps(body)


def provider_request_id(body: bytes) -> str:
    """The provider's own `x-request-id` response header, derived from the request body."""
    return "req_" + hashlib.sha256(body).hexdigest()[:24]


def error_body(message: str, kind: str = "invalid_request_error") -> bytes:
    """An error body in OpenAI's shape."""
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}})


def asks_to_stream(request: dict[str, Any]) -> bool:
    """The OpenAI and Anthropic rule: a stream only for `"stream": true`."""
    return request.get("stream") is True


def request_id_headers(body: bytes) -> dict[str, str]:
    """The provider's own request id header, as OpenAI and Anthropic send one."""
    return {"x-request-id": provider_request_id(body)}


def amazon_request_id_headers(body: bytes) -> dict[str, str]:
    """Bedrock's request id header: a UUID, derived from the request body."""
    return {"x-amzn-RequestId": str(uuid.UUID(hashlib.sha256(body).hexdigest()[:32]))}


def no_headers(body: bytes) -> dict[str, str]:
    """Ollama sends no request id."""
    return {}


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one endpoint reads a request and frames the model's answer."""

    path: str
    """The route; `{model}` in it matches the model id of a Bedrock path."""
    chat_view: Callable[[dict[str, Any]], dict[str, Any]]
    """The request in the model's Chat Completions terms; ValueError when the API rejects it."""
    stream: Callable[[Answer, dict[str, Any]], list[bytes]]
    whole: Callable[[Answer, dict[str, Any]], bytes]
    error: Callable[[str], bytes]
    streams: Callable[[dict[str, Any]], bool] = asks_to_stream
    """Whether a request gets a stream (from its body; a Bedrock route decides by path)."""
    media_type: str | Callable[[Mapping[str, str]], str] = SSE_TYPE
    """The Content-Type of a stream, or how the request's query decides it (Gemini's `alt`)."""
    headers: Callable[[bytes], dict[str, str]] = request_id_headers
    """The provider's own response headers, from the request body."""

    def stream_type(self, query: Mapping[str, str]) -> str:
        media_type = self.media_type
        return media_type if isinstance(media_type, str) else media_type(query)


def _chat_stream(reply: Answer, request: dict[str, Any]) -> list[bytes]:
    options = request.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return stream_events(reply, include_usage=include_usage)


def _by_path(path: str) -> Callable[[dict[str, Any]], bool]:
    """A route that streams or not by its path, whatever the body says."""
    streaming = path.endswith(("-stream", gemini.STREAM_SUFFIX))
    return lambda request: streaming


def _invoke(path: str) -> Dialect:
    return Dialect(
        path,
        bedrock_anthropic.chat_view,
        bedrock_anthropic.stream_events,
        bedrock_anthropic.json_body,
        bedrock_converse.error_body,
        _by_path(path),
        bedrock_anthropic.MEDIA_TYPE,
        amazon_request_id_headers,
    )


def _gemini(path: str) -> Dialect:
    return Dialect(
        path,
        gemini.chat_view,
        gemini.stream_events,
        gemini.json_body,
        gemini.error_body,
        _by_path(path),
        gemini.media_type,
        no_headers,
    )


def _converse(path: str, streams: Callable[[dict[str, Any]], bool]) -> Dialect:
    return Dialect(
        path,
        bedrock_converse.chat_view,
        bedrock_converse.stream_events,
        bedrock_converse.json_body,
        bedrock_converse.error_body,
        streams,
        bedrock_converse.MEDIA_TYPE,
        amazon_request_id_headers,
    )


DIALECTS = {
    dialect.path: dialect
    for dialect in (
        Dialect(CHAT_PATH, dict, _chat_stream, lambda reply, _: json_body(reply), error_body),
        Dialect(
            MESSAGES_PATH,
            anthropic_messages.chat_view,
            anthropic_messages.stream_events,
            anthropic_messages.json_body,
            anthropic_messages.error_body,
        ),
        Dialect(
            RESPONSES_PATH,
            openai_responses.chat_view,
            openai_responses.stream_events,
            openai_responses.json_body,
            error_body,
        ),
        Dialect(
            OLLAMA_PATH,
            ollama_chat.chat_view,
            ollama_chat.stream_events,
            ollama_chat.json_body,
            ollama_chat.error_body,
            ollama_chat.streams,
            ollama_chat.MEDIA_TYPE,
            no_headers,
        ),
        _converse(CONVERSE_STREAM_PATH, bedrock_converse.streams_always),
        _converse(CONVERSE_PATH, bedrock_converse.streams_never),
        _invoke(INVOKE_STREAM_PATH),
        _invoke(INVOKE_PATH),
        *(_gemini(path) for path in GEMINI_PATHS),
    )
}
"""Every endpoint the provider answers, by route."""


class FakeProvider(LoopbackServer):
    """The fake provider as a real aiohttp server on loopback.

    `events_delay` paces the stream (seconds between events); `text_events` is the number of text
    chunks of a plain answer; `timestamps` puts the send time in each SSE event's JSON object (see
    `stamped`). The latest `keep` exchanges are kept with their bytes, so a long benchmark stays
    bounded. `follow_const=False` makes a provider that answers wrongly: it ignores the `const`
    values of a tool schema (see `calltap.fakes.model`).
    """

    def __init__(
        self,
        *,
        events_delay: float = 0.0,
        text_events: int = 8,
        timestamps: bool = False,
        keep: int = 1000,
        follow_const: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(host, port)
        self.events_delay = events_delay
        self.text_events = text_events
        self.timestamps = timestamps
        self.follow_const = follow_const
        self.requests_received = 0
        self.exchanges: deque[Exchange] = deque(maxlen=keep)

    def app(self) -> web.Application:
        app = web.Application()
        for path, dialect in DIALECTS.items():
            app.router.add_post(path, partial(self._answer, dialect))
        app.router.add_get(MODELS_PATH, self._models)
        app.middlewares.append(self._count)
        return app

    def exchange_for(self, request_id: str) -> Exchange:
        """The latest answer to a request that arrived with this `X-Request-ID`."""
        for exchange in reversed(self.exchanges):
            if exchange.request_id == request_id:
                return exchange
        raise LookupError(f"no request arrived with X-Request-ID {request_id!r}")

    @web.middleware
    async def _count(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.requests_received += 1
        return await handler(request)

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": DEFAULT_MODEL, "object": "model", "created": CREATED, "owned_by": "fake"}
        return web.json_response({"object": "list", "data": [model]})

    async def _answer(self, dialect: Dialect, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        exchange = Exchange(request.path, request.headers, body)
        self.exchanges.append(exchange)
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return self._whole(
                dialect, exchange, 400, dialect.error("the body is not a JSON object")
            )
        try:
            view = dialect.chat_view(parsed)
        except ValueError as error:
            return self._whole(dialect, exchange, 400, dialect.error(str(error)))
        view["query"] = dict(request.query)
        if view.get("model") is None and "model" in request.match_info:
            view["model"] = request.match_info["model"]
        reply = answer(body, view, text_events=self.text_events, follow_const=self.follow_const)
        if not dialect.streams(parsed):
            return self._whole(dialect, exchange, 200, dialect.whole(reply, view))
        return await self._stream(request, exchange, dialect, dialect.stream(reply, view))

    def _whole(
        self, dialect: Dialect, exchange: Exchange, status: int, body: bytes
    ) -> web.Response:
        response = web.Response(status=status, body=body, content_type="application/json")
        response.headers.update(dialect.headers(exchange.request_body))
        exchange.status = status
        exchange.response_headers = CIMultiDict(response.headers)
        exchange.response_body += body
        exchange.complete = True
        return response

    async def _stream(
        self, request: web.Request, exchange: Exchange, dialect: Dialect, events: list[bytes],
        *, pause: float | None = None,
    ) -> web.StreamResponse:
        """Write each item of `events` at once, `pause` seconds apart (`events_delay` unless
        a subclass paces one answer otherwise)."""
        delay = self.events_delay if pause is None else pause
        media_type = dialect.stream_type(request.query)
        response = web.StreamResponse(status=200)
        response.headers["Content-Type"] = media_type
        response.headers["Cache-Control"] = "no-cache"
        response.headers.update(dialect.headers(exchange.request_body))
        timestamps = self.timestamps and media_type == SSE_TYPE
        exchange.status = 200
        exchange.response_headers = CIMultiDict(response.headers)
        await response.prepare(request)
        try:
            for number, event in enumerate(events):
                if number and delay:
                    await asyncio.sleep(delay)
                if timestamps:
                    event = stamped(event, time.time_ns())
                await response.write(event)
                exchange.response_body += event
            if not await self._end(request, response):
                return response
        except ConnectionError:
            return response
        exchange.complete = True
        return response

    async def _end(self, request: web.Request, response: web.StreamResponse) -> bool:
        """End a streamed answer; False when it was cut instead (the exchange is incomplete)."""
        await response.write_eof()
        return True
