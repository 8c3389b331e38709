"""The probe client against hostile servers: a redirect, an oversized body, a body that trickles
past the wall-clock limit, an oversized request, duplicate keys and NaN in arguments. Each is a
failed probe with its reason, and the other probes still run."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import orjson
from aiohttp import web
from probe_helpers import by_name, probe

from calltap.probe.client import Limits

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[tuple[str, list[str]]]:
    """A loopback server answering every request with `handler`; yields its URL and the paths
    it was asked for."""
    seen: list[str] = []

    async def answer(request: web.Request) -> web.StreamResponse:
        seen.append(request.path)
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


def completion(arguments: str) -> bytes:
    """A whole chat.completion with one call of probe_echo carrying these argument bytes."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "probe_echo", "arguments": arguments},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return orjson.dumps({"id": "c", "object": "chat.completion", "choices": [choice]})


async def test_a_redirect_is_refused_and_never_followed() -> None:
    async with serving(lambda request: _fail_if_called()) as (elsewhere, followed):

        async def redirect(request: web.Request) -> web.StreamResponse:
            raise web.HTTPFound(f"{elsewhere}/v1/chat/completions")

        async with serving(redirect) as (url, _):
            outcomes = by_name(await probe(url, ["forced-echo", "stream-echo"]))
    assert followed == []
    for outcome in outcomes.values():
        assert not outcome.passed
        assert outcome.reason.startswith("HTTP 302 redirect to http://127.0.0.1:")
        assert "redirects are refused" in outcome.reason


async def _fail_if_called() -> web.StreamResponse:
    raise AssertionError("the redirect was followed")


async def test_an_oversized_body_is_cut_at_the_limit() -> None:
    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for _ in range(64):
            await response.write(b" " * 8192)
        return response

    async with serving(huge) as (url, _):
        run = await probe(url, ["forced-echo", "forced-nested"])
    for outcome in run.outcomes:
        assert outcome.reason == "response body over the limit of 262144 bytes"
    assert all(entry["response"]["bytes"] <= 262144 + 8192 for entry in run.trace)


async def test_a_gzip_answer_is_read_and_a_gzip_bomb_is_stopped_at_the_limit() -> None:
    right = completion('{"text":"calltap probe: echo 7f3a","count":3}')
    bomb = gzip.compress(b" " * (4 * 1024 * 1024))

    async def zipped(request: web.Request) -> web.StreamResponse:
        body = gzip.compress(right) if "echo" in request.headers["X-Request-ID"] else bomb
        headers = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
        return web.Response(body=body, headers=headers)

    async with serving(zipped) as (url, _):
        outcomes = by_name(await probe(url, ["forced-echo", "forced-nested"]))
    assert len(bomb) < 262144
    assert outcomes["forced-echo"].passed
    assert outcomes["forced-nested"].reason == (
        "response body over the limit of 262144 bytes once decoded"
    )


async def test_a_trickling_body_is_stopped_at_the_wall_limit_and_the_next_probe_runs() -> None:
    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        while True:
            await response.write(b":\n")
            await asyncio.sleep(0.1)

    limits = Limits(probe_wall=0.8, round_trip_wall=1.6, socket_timeout=0.5)
    started = time.monotonic()
    async with serving(trickle) as (url, seen):
        outcomes = by_name(await probe(url, ["stream-echo", "parallel"], limits=limits))
    assert time.monotonic() - started < 4
    assert len(seen) == 2
    for outcome in outcomes.values():
        assert outcome.reason == "stopped at the wall-clock limit of 0.8 s"


async def test_a_server_silent_past_the_socket_timeout_fails_the_probe() -> None:
    async def silent(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(5)
        return response

    limits = Limits(socket_timeout=0.3, probe_wall=4)
    started = time.monotonic()
    async with serving(silent) as (url, _):
        (outcome,) = (await probe(url, ["stream-echo"], limits=limits)).outcomes
    assert outcome.reason == "no data for 0.3 s (socket timeout)"
    assert time.monotonic() - started < 2


async def test_the_overall_limit_stops_the_run_and_names_what_did_not_run() -> None:
    async def stall(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(5)
        return web.Response(text="late")

    limits = Limits(probe_wall=3, overall=0.5)
    async with serving(stall) as (url, seen):
        outcomes = by_name(await probe(url, ["forced-echo", "parallel"], limits=limits))
    assert outcomes["forced-echo"].reason == "stopped at the overall limit of 0.5 s"
    assert outcomes["parallel"].reason == "not run: the overall limit of 0.5 s was reached"
    assert len(seen) == 1


async def test_a_request_over_the_limit_is_not_sent() -> None:
    async with serving(lambda request: _fail_if_called()) as (url, seen):
        run = await probe(url, ["forced-nested"], limits=Limits(request_bytes=512))
    assert seen == []
    assert run.outcomes[0].reason.endswith("is over the limit of 512 bytes; not sent")


async def test_duplicate_keys_in_arguments_fail_even_when_the_last_value_is_right() -> None:
    arguments = '{"text":"wrong","text":"calltap probe: echo 7f3a","count":3}'

    async def duplicate(request: web.Request) -> web.StreamResponse:
        return web.Response(body=completion(arguments), content_type="application/json")

    async with serving(duplicate) as (url, _):
        (outcome,) = (await probe(url, ["forced-echo"])).outcomes
    assert not outcome.passed
    assert outcome.reason == "DUPLICATE_KEY (at /text)"
    assert outcome.received[0]["raw"] == arguments


async def test_a_non_finite_number_in_arguments_fails() -> None:
    arguments = '{"text":"calltap probe: echo 7f3a","count":NaN}'

    async def nan(request: web.Request) -> web.StreamResponse:
        return web.Response(body=completion(arguments), content_type="application/json")

    async with serving(nan) as (url, _):
        (outcome,) = (await probe(url, ["forced-echo"])).outcomes
    assert "NON_FINITE_NUMBER (at /count)" in outcome.reason


async def test_an_error_status_fails_with_the_error_message() -> None:
    async def refuse(request: web.Request) -> web.StreamResponse:
        body = {"error": {"message": "model 'gpt-4o-mini' not found", "type": "invalid"}}
        return web.json_response(body, status=404)

    async with serving(refuse) as (url, _):
        (outcome,) = (await probe(url, ["forced-echo"])).outcomes
    assert outcome.reason == "HTTP 404: model 'gpt-4o-mini' not found"


async def test_an_unreachable_gateway_fails_every_probe_with_why() -> None:
    async with serving(lambda request: _fail_if_called()) as (url, _):
        pass
    run = await probe(url, ["forced-echo", "parallel"])
    for outcome in run.outcomes:
        assert outcome.reason.startswith("HTTP exchange failed: Cannot connect to host")
