"""A provider whose answer a request can vary by header: a stream cut by an error event,
Gemini's parallel calls streamed one per chunk, or every event split across two network reads.

`VariantProvider` answers as `FakeProvider` does, except:

- a streamed request carrying `X-Fake-Provider-Error: N` gets the first N events of its answer,
  then the error its API sends in a stream that already started, and then the response ends
  cleanly (HTTP 200, the chunked body finished): no finish reason, no terminal marker. The error
  is the one each API documents:
  - Anthropic Messages: `event: error` with `{"type": "error", "error": {"type":
    "overloaded_error", "message": "Overloaded"}}` (Anthropic's streaming documentation: errors
    may arrive in the event stream, `overloaded_error` its example);
  - Chat Completions: a `data:` payload with an `error` object (as OpenRouter documents for
    errors after HTTP 200, and as the openai SDK raises on);
  - Bedrock ConverseStream: an exception message (`:message-type: exception`,
    `:exception-type: serviceUnavailableException`, `{"message": …}`), a member of botocore's
    `ConverseStreamOutput`.
  Other dialects ignore the header.
- a Gemini stream request carrying `X-Fake-Provider-Gemini-Calls: apart` gets each parallel call
  in a chunk of its own (`calltap.fakes.gemini.stream_calls_apart`), as Gemini also streams them.
- a streamed request carrying `X-Fake-Provider-Split: K` gets each event in two writes, its first
  K bytes then the rest, `SPLIT_PAUSE` apart (as every write): the reader sees a read boundary K
  bytes into every event, as a TLS record or TCP segment boundary may fall anywhere. The bytes
  are the same; only where reads end differs.

The headers reach the provider from a client only through a gateway that forwards them
(Portkey's `x-portkey-forward-headers`, LiteLLM's `forward_client_headers_to_llm_api`).
"""

from __future__ import annotations

import dataclasses

import orjson
from aiohttp import web

from calltap.fakes import anthropic_messages, bedrock_converse, eventstream, gemini
from calltap.fakes.provider import CHAT_PATH, Dialect, Exchange, FakeProvider

ERROR_HEADER = "X-Fake-Provider-Error"
GEMINI_CALLS_HEADER = "X-Fake-Provider-Gemini-Calls"
SPLIT_HEADER = "X-Fake-Provider-Split"
SPLIT_PAUSE = 0.02
"""Seconds between two writes of a split answer: long enough for each to reach the reader (and
each relay between) as a read of its own."""
OVERLOADED = "Overloaded"
ERROR_EVENTS = {
    anthropic_messages.PATH: anthropic_messages.event(
        {"type": "error", "error": {"type": "overloaded_error", "message": OVERLOADED}}),
    CHAT_PATH: b"data: " + orjson.dumps(
        {"error": {"message": OVERLOADED, "type": "server_error", "param": None,
                   "code": "overloaded"}}) + b"\n\n",
    bedrock_converse.STREAM_PATH: eventstream.exception("serviceUnavailableException",
                                                        OVERLOADED),
}
"""The error each streamed dialect sends after its first N events, by route."""


class VariantProvider(FakeProvider):
    """FakeProvider that varies the answers whose request asks for it (see the module
    docstring)."""

    async def _answer(self, dialect: Dialect, request: web.Request) -> web.StreamResponse:
        apart = request.headers.get(GEMINI_CALLS_HEADER) == "apart"
        if apart and dialect.path in gemini.PATHS:
            dialect = dataclasses.replace(dialect, stream=gemini.stream_calls_apart)
        return await super()._answer(dialect, request)

    async def _stream(
        self, request: web.Request, exchange: Exchange, dialect: Dialect, events: list[bytes],
        *, pause: float | None = None,
    ) -> web.StreamResponse:
        cut = request.headers.get(ERROR_HEADER)
        error = ERROR_EVENTS.get(dialect.path)
        if cut is not None and error is not None:
            events = [*events[: int(cut)], error]
        split = request.headers.get(SPLIT_HEADER)
        if split is None:
            return await super()._stream(request, exchange, dialect, events, pause=pause)
        at = int(split)
        pieces = [piece for event in events for piece in (event[:at], event[at:]) if piece]
        return await super()._stream(request, exchange, dialect, pieces, pause=SPLIT_PAUSE)
