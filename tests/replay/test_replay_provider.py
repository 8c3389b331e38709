"""The cassette provider on loopback: recorded status, headers and bytes; a cut answer cut again;
a miss answered with why."""

from __future__ import annotations

from dataclasses import replace

import aiohttp
import orjson
import pytest
from multidict import CIMultiDict

from calltap.fakes.provider import TOOLS_REQUEST
from calltap.replay.cassette import Answer, Timing
from calltap.replay.provider import CassetteProvider

CHAT = "/v1/chat/completions"
STREAM = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n'
RECORDED = Answer(1, "POST", CHAT, orjson.dumps(TOOLS_REQUEST), 200,
                  (("content-type", "text/event-stream"), ("x-request-id", "req_1"),
                   ("x-ratelimit-remaining", "7")),
                  STREAM, Timing(), "complete", None)


async def post(url: str, body: bytes = orjson.dumps(TOOLS_REQUEST)) -> tuple[
        int, CIMultiDict[str], bytes]:
    async with (aiohttp.ClientSession(auto_decompress=False) as session,
                session.post(f"{url}{CHAT}", data=body) as response):
        return response.status, CIMultiDict(response.headers), await response.read()


async def test_the_recorded_status_headers_and_bytes_are_sent_again():
    error = replace(RECORDED, status=429, body=b'{"error": {"message": "slow down"}}',
                    headers=(("content-type", "application/json"), ("retry-after", "2")))
    async with CassetteProvider("none") as cassette:
        cassette.play((error, RECORDED))
        first, second = await post(cassette.url), await post(cassette.url)
    assert (first[0], first[1]["Retry-After"], first[2]) == (429, "2", error.body)
    assert (second[0], second[2]) == (200, STREAM)
    assert (second[1]["X-Request-ID"], second[1]["X-Ratelimit-Remaining"]) == ("req_1", "7")


@pytest.mark.parametrize("ended", ["upstream_reset", "timeout"])
async def test_an_attempt_recorded_as_cut_is_cut_again_after_its_last_byte(ended):
    received = bytearray()
    async with CassetteProvider("none") as cassette:
        cassette.play((replace(RECORDED, body=STREAM[:40], ended=ended),))
        async with aiohttp.ClientSession() as session, session.post(
                f"{cassette.url}{CHAT}", data=orjson.dumps(TOOLS_REQUEST)) as response:
            with pytest.raises(aiohttp.ClientPayloadError):
                async for chunk in response.content.iter_any():
                    received += chunk
    assert bytes(received) == STREAM[:40]


async def test_a_miss_is_a_502_that_says_why_and_a_side_request_a_404():
    async with CassetteProvider("none") as cassette:
        player = cassette.play((RECORDED,))
        other = orjson.dumps({**TOOLS_REQUEST, "messages": [{"role": "user", "content": "No"}]})
        status, _, body = await post(cassette.url, other)
        async with aiohttp.ClientSession() as session, session.get(
                f"{cassette.url}/v1/models") as response:
            side = response.status
    error = orjson.loads(body)["error"]
    assert status == 502 and error["code"] == "cassette_miss"
    assert error["message"] == ("calltap replay: no recorded answer for POST /v1/chat/completions:"
                                " the conversation's last turn differs from attempt 1's")
    assert side == 404 and player.side_requests == ["GET /v1/models"]
    assert len(player.misses) == 1 and player.unplayed == 1
