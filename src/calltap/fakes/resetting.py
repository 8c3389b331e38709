"""A provider whose connection drops in the middle of a streamed answer.

`ResettingProvider` answers as `FakeProvider` does, except that a streamed request carrying
`X-Fake-Provider-Reset: N` gets the first N events of its answer and then, after a short stall,
the connection is closed under it: no `finish_reason`, no `data: [DONE]`, and no last chunk of
the chunked body, so the HTTP client reading it sees a body that never ended. That is the
transport fault litellm #33404 reports (an upstream reset after some chunks), which a gateway
must pass on as a failure, never as a completed answer. The header reaches the provider from
the client only through a gateway that forwards `x-` headers (LiteLLM's
`forward_client_headers_to_llm_api`).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from calltap.fakes.provider import Dialect, Exchange, FakeProvider

RESET_HEADER = "X-Fake-Provider-Reset"
STALL = 0.2
"""Seconds the connection stays silent before it drops, as a stalled upstream does: what was
sent has reached the reader by then."""


class ResettingProvider(FakeProvider):
    """FakeProvider that cuts the streams whose request asks for it (see the module docstring)."""

    async def _stream(
        self, request: web.Request, exchange: Exchange, dialect: Dialect, events: list[bytes]
    ) -> web.StreamResponse:
        cut = request.headers.get(RESET_HEADER)
        kept = events if cut is None else events[: int(cut)]
        return await super()._stream(request, exchange, dialect, kept)

    async def _end(self, request: web.Request, response: web.StreamResponse) -> bool:
        if RESET_HEADER not in request.headers:
            return await super()._end(request, response)
        assert request.transport is not None
        await asyncio.sleep(STALL)
        request.transport.close()
        return False
