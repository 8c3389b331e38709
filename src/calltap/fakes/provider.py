"""A fake OpenAI-compatible provider: deterministic Chat Completions answers, streamed or whole.

It answers `POST /v1/chat/completions` the way the real service does (see FIELD-NOTES.md): chunk
envelopes with `id/object/created/model/system_fingerprint/choices`, a first tool-call delta with
index, id, type, name and `arguments: ""`, later deltas carrying only
`{"index": N, "function": {"arguments": "…"}}`, the fragments of parallel calls interleaved,
`usage: null` on every chunk and a final `choices: []` usage chunk when
`stream_options.include_usage` is set, and `data: [DONE]`.

The scenario comes from the request:
- `tools` offered (and `tool_choice` not "none"): one parallel call per tool, arguments built from
  each tool's parameter schema (`city` -> "Taipei", `zone` -> "UTC", ...) and split into fragments
  the way a tokenizer would cut them; finish_reason `tool_calls`.
- otherwise a plain text answer in `text_events` chunks; finish_reason `stop`, cut short by a
  `stop` sequence (the sequence itself is never sent), or `length` when `max_tokens` is smaller.

The bytes are a function of the request body and the options alone: ids derive from the body's
sha256, `created` is fixed. Only the optional timestamp comments (`: t=<time.time_ns()>` before
each event, for latency benchmarks) vary. Every answer's bytes are kept in `exchanges`, so a test
can check that a client received exactly what the provider sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler
from multidict import CIMultiDict, CIMultiDictProxy

from calltap.fakes.server import LoopbackServer

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
CREATED = 1764460800
"""A fixed `created` (2025-11-30T00:00:00Z): the same request always gets the same bytes."""
SYSTEM_FINGERPRINT = "fp_c0ffee0a11"
DEFAULT_MODEL = "gpt-4o-mini"
DONE = b"data: [DONE]\n\n"

WORDS = (
    "calltap", "records", "both", "legs", "of", "every", "request", "and", "compares", "them",
    "by", "meaning:", "tool", "calls,", "arguments,", "finish", "reasons,", "text", "and", "usage.",
)  # fmt: skip
SAMPLE_STRINGS = {
    "city": "Taipei",
    "location": "Taipei, Taiwan",
    "zone": "UTC",
    "timezone": "UTC",
    "unit": "celsius",
    "query": "parallel tool calls",
    "language": "en",
}
SAMPLE_BY_TYPE: dict[str, Any] = {
    "integer": 3,
    "number": 21.5,
    "boolean": True,
    "array": [],
    "object": {},
    "null": None,
}
_TOKEN = re.compile(r"\w+|\W+")

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
    """One chat completion as the provider saw it: the request and every byte it answered."""

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


@dataclass(frozen=True, slots=True)
class Answer:
    """What the fake model says to one request, before it is framed as a stream or a body."""

    id: str
    model: str
    deltas: list[dict[str, Any]]
    """Streamed deltas in order; the first carries the role."""
    content: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    usage: dict[str, Any]


def sample_arguments(parameters: Any) -> dict[str, Any]:
    """Plausible arguments for a JSON-schema `parameters` object: one value per property."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return {}
    arguments: dict[str, Any] = {}
    for name, schema in properties.items():
        schema = schema if isinstance(schema, dict) else {}
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            arguments[name] = enum[0]
        elif schema.get("type", "string") == "string":
            arguments[name] = SAMPLE_STRINGS.get(name, f"{name}-1")
        else:
            arguments[name] = SAMPLE_BY_TYPE.get(schema.get("type"))
    return arguments


def fragments(text: str) -> list[str]:
    """Cut argument text where a tokenizer would: words and runs of punctuation apart."""
    return _TOKEN.findall(text) or [text]


def offered_functions(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The `function` objects of the request's tools, unless `tool_choice` is "none"."""
    tools = request.get("tools")
    if not isinstance(tools, list) or request.get("tool_choice") == "none":
        return []
    return [
        tool["function"]
        for tool in tools
        if isinstance(tool, dict)
        and isinstance(tool.get("function"), dict)
        and isinstance(tool["function"].get("name"), str)
    ]


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _tool_answer(digest: str, functions: list[dict[str, Any]]) -> tuple[list, list, int]:
    """Interleaved deltas of one parallel call per function, the whole calls, the token count."""
    calls: list[dict[str, Any]] = []
    pieces: list[list[str]] = []
    for index, function in enumerate(functions):
        arguments = orjson.dumps(sample_arguments(function.get("parameters"))).decode()
        call_id = "call_" + hashlib.sha256(f"{digest}:{index}".encode()).hexdigest()[:24]
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
        pieces.append(fragments(arguments))
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        header = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        deltas.append({"tool_calls": [header]})
    for round_ in range(max(len(parts) for parts in pieces)):
        for index, parts in enumerate(pieces):
            if round_ < len(parts):
                fragment = {"index": index, "function": {"arguments": parts[round_]}}
                deltas.append({"tool_calls": [fragment]})
    deltas[0] = {"role": "assistant", "content": None, **deltas[0], "refusal": None}
    return deltas, calls, sum(len(parts) for parts in pieces)


def _text_answer(digest: str, request: dict[str, Any], text_events: int) -> tuple[list, str, str]:
    """Text deltas, the whole text and the finish reason, honouring `stop` and `max_tokens`."""
    count, finish_reason = text_events, "stop"
    limit = request.get("max_completion_tokens", request.get("max_tokens"))
    if request.get("stop"):
        count = max(1, text_events // 2)
    elif isinstance(limit, int) and 0 < limit < text_events:
        count, finish_reason = limit, "length"
    start = int(digest[:8], 16) % len(WORDS)
    tokens = [WORDS[(start + n) % len(WORDS)] for n in range(count)]
    tokens = [tokens[0], *(" " + token for token in tokens[1:])]
    deltas = [{"role": "assistant", "content": "", "refusal": None}]
    deltas += [{"content": token} for token in tokens]
    return deltas, "".join(tokens), finish_reason


def answer(body: bytes, request: dict[str, Any], *, text_events: int) -> Answer:
    """The deterministic answer to one request body (already decoded as `request`)."""
    digest = hashlib.sha256(body).hexdigest()
    model = request.get("model") if isinstance(request.get("model"), str) else DEFAULT_MODEL
    prompt_tokens = max(1, len(body) // 4)
    functions = offered_functions(request)
    if functions:
        deltas, calls, completion_tokens = _tool_answer(digest, functions)
        content, finish_reason = None, "tool_calls"
    else:
        deltas, content, finish_reason = _text_answer(digest, request, text_events)
        calls, completion_tokens = [], len(deltas) - 1
    return Answer(
        id="chatcmpl-" + digest[:24],
        model=model,
        deltas=deltas,
        content=content,
        tool_calls=calls,
        finish_reason=finish_reason,
        usage=_usage(prompt_tokens, completion_tokens),
    )


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


class FakeProvider(LoopbackServer):
    """The fake provider as a real aiohttp server on loopback.

    `events_delay` paces the stream (seconds between events); `text_events` is the number of text
    chunks of a plain answer; `timestamps` puts `: t=<time.time_ns()>` before each event. The
    latest `keep` exchanges are kept with their bytes, so a long benchmark stays bounded.
    """

    def __init__(
        self,
        *,
        events_delay: float = 0.0,
        text_events: int = 8,
        timestamps: bool = False,
        keep: int = 1000,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(host, port)
        self.events_delay = events_delay
        self.text_events = text_events
        self.timestamps = timestamps
        self.requests_received = 0
        self.exchanges: deque[Exchange] = deque(maxlen=keep)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(CHAT_PATH, self._chat)
        app.router.add_get(MODELS_PATH, self._models)
        app.middlewares.append(self._count)
        return app

    def exchange_for(self, request_id: str) -> Exchange:
        """The latest chat completion that arrived with this `X-Request-ID`."""
        for exchange in reversed(self.exchanges):
            if exchange.request_id == request_id:
                return exchange
        raise LookupError(f"no chat completion arrived with X-Request-ID {request_id!r}")

    @web.middleware
    async def _count(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.requests_received += 1
        return await handler(request)

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": DEFAULT_MODEL, "object": "model", "created": CREATED, "owned_by": "fake"}
        return web.json_response({"object": "list", "data": [model]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        exchange = Exchange(CHAT_PATH, request.headers, body)
        self.exchanges.append(exchange)
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return self._whole(exchange, 400, error_body("the body is not a JSON object"))
        reply = answer(body, parsed, text_events=self.text_events)
        if parsed.get("stream") is not True:
            return self._whole(exchange, 200, json_body(reply))
        options = parsed.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        return await self._stream(request, exchange, reply, include_usage)

    def _whole(self, exchange: Exchange, status: int, body: bytes) -> web.Response:
        response = web.Response(status=status, body=body, content_type="application/json")
        response.headers["x-request-id"] = provider_request_id(exchange.request_body)
        exchange.status = status
        exchange.response_headers = CIMultiDict(response.headers)
        exchange.response_body += body
        exchange.complete = True
        return response

    async def _stream(
        self, request: web.Request, exchange: Exchange, reply: Answer, include_usage: bool
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=200)
        response.headers["Content-Type"] = "text/event-stream; charset=utf-8"
        response.headers["Cache-Control"] = "no-cache"
        response.headers["x-request-id"] = provider_request_id(exchange.request_body)
        exchange.status = 200
        exchange.response_headers = CIMultiDict(response.headers)
        await response.prepare(request)
        try:
            for number, event in enumerate(stream_events(reply, include_usage=include_usage)):
                if number and self.events_delay:
                    await asyncio.sleep(self.events_delay)
                if self.timestamps:
                    event = b": t=%d\n" % time.time_ns() + event
                await response.write(event)
                exchange.response_body += event
            await response.write_eof()
        except ConnectionError:
            return response
        exchange.complete = True
        return response
