"""`calltap replay` exits 3 when the gateway asks the cassette for what it does not hold: another
path than the recorded one (a chat endpoint or not), or more attempts than were recorded. The
output names the request's method and path, and the cassette's refusal is never counted as an
upstream attempt of the replayed pair. The gateway is the suites' scripted forwarder
(`tests/support/topology.py`), told to call another path or to retry."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
from aiohttp import web
from replay_helpers import REPLAY_TIMEOUT, Replayed, free_port
from test_replay_matching import CHAT, attempt
from tests.support.topology import GatewayScript, ScriptedGateway

from calltap.fakes.provider import TOOLS_REQUEST
from calltap.replay.matching import Miss, Player


class RoutingGateway(ScriptedGateway):
    """The scripted gateway, sending every request to `path` upstream when one is given."""

    def __init__(self, path: str | None = None, *, retry_first: bool = False) -> None:
        super().__init__(GatewayScript(retry_first=retry_first))
        self.path = path

    async def forward(self, request: web.Request) -> web.StreamResponse:
        if self.path is not None:
            request = request.clone(rel_url=self.path)
        return await super().forward(request)


async def replay_through(pair: Path, gateway: RoutingGateway) -> Replayed:
    """`calltap replay PAIR --json` through `gateway`, whose upstream is the replay's --back."""
    port = free_port()
    async with gateway:
        gateway.script.target = f"http://127.0.0.1:{port}"
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "calltap", "replay", str(pair), "--pace", "none", "--json",
            "--gateway", gateway.url, "--back", f"127.0.0.1:{port}",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(process.communicate(), REPLAY_TIMEOUT)
    assert process.returncode is not None
    return Replayed(process.returncode, stdout.decode(), stderr.decode())


async def test_a_gateway_forwarding_as_recorded_reproduces(demo_pairs):
    replayed = await replay_through(demo_pairs["none"], RoutingGateway())
    (result,) = replayed.results
    assert replayed.exit == 0, replayed
    assert result["result"] == "reproduced"
    assert result["replayed"]["attempts"] == result["recorded"]["attempts"] == 1
    assert result["unanswered"] == [] and result["notes"] == []


async def test_a_gateway_calling_another_path_exits_3_naming_it(demo_pairs):
    replayed = await replay_through(demo_pairs["none"], RoutingGateway("/v1/completions"))
    (result,) = replayed.results
    assert replayed.exit == 3, replayed
    assert replayed.json["exit"] == 3
    assert result["result"] == "cannot"
    assert result["unanswered"] == [{
        "method": "POST", "path": "/v1/completions",
        "reason": "attempt 1 was recorded as POST /v1/chat/completions"}]
    assert ("cassette miss: POST /v1/completions: attempt 1 was recorded as POST"
            " /v1/chat/completions") in result["notes"]
    assert not result["replayed"]["attempts"]


async def test_a_gateway_retrying_more_than_recorded_exits_3_and_the_refusal_is_no_attempt(
        demo_pairs):
    replayed = await replay_through(demo_pairs["none"], RoutingGateway(retry_first=True))
    (result,) = replayed.results
    assert replayed.exit == 3, replayed
    assert result["result"] == "cannot"
    assert result["unanswered"] == [{
        "method": "POST", "path": "/v1/chat/completions",
        "reason": "request 2, but the cassette holds 1 attempt"}]
    assert result["replayed"]["attempts"] == 1


def test_a_request_with_a_body_off_the_chat_endpoints_is_a_miss_and_a_bodiless_one_a_side_one():
    player = Player((attempt(1),))
    body = orjson.dumps(TOOLS_REQUEST)
    assert player.answer("GET", "/v1/models", b"") is None
    assert player.answer("POST", "/v1/completions", body) == Miss(
        "POST", "/v1/completions", "attempt 1 was recorded as POST /v1/chat/completions")
    assert player.side_requests == ["GET /v1/models"] and player.unplayed == 1


def test_expects_says_what_answer_would_serve_and_serves_nothing():
    player = Player((attempt(1),))
    body = orjson.dumps(TOOLS_REQUEST)
    assert player.expects("POST", CHAT, body) and player.expects("POST", CHAT, None)
    assert not player.expects("POST", "/v1/completions", body)
    assert not player.expects("GET", "/v1/models", b"")
    assert player.served == [] and player.misses == [] and player.side_requests == []
    assert player.answer("POST", CHAT, body) == attempt(1)
    assert not player.expects("POST", CHAT, body)
