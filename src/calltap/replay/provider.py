"""The cassette provider: an aiohttp server on loopback that answers a gateway with recorded
answers, byte for byte, at the recorded pace or at once.

It stands where the provider stood (behind calltap's back listener, so the replay is recorded
and compared like any pair). Each answer is the recorded status, headers and body; an attempt
that was recorded as cut (`upstream_reset`, `timeout`) is cut again after its last recorded
byte. A request the cassette cannot answer gets a 502 with an OpenAI-shaped error that says why,
and is kept as a miss; a request without a body off the chat endpoints gets a 404.
"""

from __future__ import annotations

import asyncio

import orjson
from aiohttp import web

from calltap import recordings
from calltap.fakes.server import LoopbackServer
from calltap.replay.cassette import Answer
from calltap.replay.matching import Miss, Player
from calltap.replay.pacing import Pace, schedule

MISS_STATUS = 502
CUT_ENDINGS = frozenset({recordings.UPSTREAM_RESET, recordings.TIMEOUT})


class CassetteProvider(LoopbackServer):
    """Serves one cassette at a time: `play(cassette)` loads it and returns its Player."""

    def __init__(self, pace: Pace = "recorded", *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.pace = pace
        self.player = Player(())

    def play(self, cassette: tuple[Answer, ...]) -> Player:
        self.player = Player(cassette)
        return self.player

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._answer)
        return app

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        found = self.player.answer(request.method, request.path, body)
        if found is None:
            return _error(404, f"calltap replay: {request.method} {request.path} is not part of"
                          " the recorded pair", "not_found")
        if isinstance(found, Miss):
            return _error(MISS_STATUS, f"calltap replay: no recorded answer for {found}",
                          "cassette_miss")
        return await self._send(request, found)

    async def _send(self, request: web.Request, answer: Answer) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        pieces = schedule(answer, self.pace)
        response = web.StreamResponse(status=answer.status)
        for name, value in answer.headers:
            response.headers.add(name, value)
        if pieces:
            await asyncio.sleep(max(0.0, arrived + pieces[0][0] - loop.time()))
        await response.prepare(request)
        try:
            for at, piece in pieces:
                await asyncio.sleep(max(0.0, arrived + at - loop.time()))
                await response.write(piece)
        except ConnectionError:
            return response
        if answer.ended in CUT_ENDINGS and request.transport is not None:
            request.transport.abort()
            return response
        await response.write_eof()
        return response


def _error(status: int, message: str, code: str) -> web.Response:
    body = {"error": {"message": message, "type": "calltap_replay", "param": None, "code": code,
                      "source": "calltap"}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")
