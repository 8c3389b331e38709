"""Request findings in a replay: a pair recorded through a gateway that offers the provider one
tool fewer than the client offered (REQUEST_TOOL_DROPPED) replays to the same codes through that
gateway, also when its pair.json was written before requests were compared, is chosen by
`--code REQUEST_TOOL_DROPPED`, and exports as a case that keeps both requests."""

from __future__ import annotations

import io
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web
from replay_helpers import replay

from calltap import recordings
from calltap.cli import main
from calltap.config import Config
from calltap.fakes import CHAT_PATH, TOOLS_REQUEST, FakeProvider
from calltap.fakes.server import LoopbackServer
from calltap.proxy.app import Calltap

DROPPED = "REQUEST_TOOL_DROPPED"
LOOPBACK = ("127.0.0.1", 0)


class ToolDroppingGateway(LoopbackServer):
    """Relays each request to `upstream` without the last of its tools (a gateway that keeps
    only the tools it can map), and the answer back as it arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.upstream = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._relay)
        return app

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        body["tools"] = body["tools"][:-1]
        headers = {name: request.headers[name] for name in ("Content-Type", "X-Request-ID")
                   if name in request.headers}
        async with (aiohttp.ClientSession(auto_decompress=False) as session,
                    session.post(self.upstream + request.path_qs, data=orjson.dumps(body),
                                 headers=headers) as answer):
            response = web.StreamResponse(status=answer.status, headers={
                "Content-Type": answer.headers.get("Content-Type", "application/json")})
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


@pytest.fixture
async def dropped_tool(tmp_path: Path) -> Path:
    """TOOLS_REQUEST (weather and clock) recorded through the tool-dropping gateway."""
    root = tmp_path / "recordings"
    async with FakeProvider() as provider, ToolDroppingGateway() as gateway:
        config = Config(front=LOOPBACK, gateway=gateway.url, back=LOOPBACK,
                        provider=provider.url, recordings=root, compare_workers=1)
        async with (Calltap(config, log_stream=io.StringIO()) as tap,
                    aiohttp.ClientSession() as client):
            gateway.upstream = tap.back_url
            async with client.post(tap.front_url + CHAT_PATH, json=TOOLS_REQUEST) as answer:
                await answer.read()
                key = answer.headers["X-Request-ID"]
            await tap.wait_compared(key)
    (directory,) = root.glob(f"*/{key}")
    return directory


def compared_before_requests(directory: Path) -> None:
    """pair.json as a calltap that did not compare requests wrote it."""
    document = recordings.read_pair(directory)
    comparison = document["comparison"]
    comparison.pop("requests")
    comparison["findings"] = [f for f in comparison["findings"] if f["side"] != "request"]
    comparison["verdict"] = "equal"
    (directory / recordings.PAIR_JSON).write_bytes(recordings.encode_pair(document))


async def test_a_dropped_tool_replays_to_the_same_request_finding(dropped_tool: Path) -> None:
    recorded = recordings.read_pair(dropped_tool)["comparison"]
    assert DROPPED in {f["code"] for f in recorded["findings"]}
    async with ToolDroppingGateway() as gateway:
        replayed = await replay(dropped_tool, "--pace", "none", "--json", gateway=gateway)
    (result,) = replayed.results
    assert replayed.exit == 0, replayed
    assert result["result"] == "reproduced"
    assert DROPPED in result["replayed"]["codes"] and DROPPED in result["recorded"]["codes"]
    assert result["replayed"]["verdict"] == "diverged"


async def test_a_pair_compared_before_requests_were_has_its_requests_compared_to_replay(
        dropped_tool: Path) -> None:
    compared_before_requests(dropped_tool)
    async with ToolDroppingGateway() as gateway:
        replayed = await replay(dropped_tool.parent.parent, "--code", DROPPED, "--pace", "none",
                                "--json", gateway=gateway)
    (result,) = replayed.results
    assert replayed.exit == 0, replayed
    assert result["recorded"]["verdict"] == result["replayed"]["verdict"] == "diverged"
    assert set(result["recorded"]["codes"]) == set(result["replayed"]["codes"])
    assert DROPPED in result["recorded"]["codes"]


async def test_an_exported_case_keeps_both_requests_and_the_request_code(
        dropped_tool: Path, tmp_path: Path) -> None:
    compared_before_requests(dropped_tool)
    case = tmp_path / "case"
    assert main(["replay", str(dropped_tool), "--export", str(case)]) == 0
    for name in ("downstream.request", "upstream.request"):
        assert (case / name).read_bytes() == (dropped_tool / name).read_bytes()
    assert DROPPED in (case / recordings.CASE_README).read_text()
    async with ToolDroppingGateway() as gateway:
        replayed = await replay("--case", case, "--pace", "none", "--json", gateway=gateway)
    assert replayed.exit == 0, replayed
    assert DROPPED in replayed.results[0]["recorded"]["codes"]
