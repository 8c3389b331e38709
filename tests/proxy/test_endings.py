"""How legs end when something goes away: client disconnect, upstream reset, timeout,
unreachable upstream. Nothing is fabricated and every ending is recorded."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from tests.proxy.conftest import chat_request, chat_stream


async def read_until_error(response: aiohttp.ClientResponse) -> tuple[bytes, BaseException | None]:
    received = bytearray()
    try:
        async for chunk in response.content.iter_any():
            received += chunk
    except aiohttp.ClientPayloadError as exc:
        return bytes(received), exc
    return bytes(received), None


async def wait_for(predicate, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


async def test_client_disconnect_cancels_upstream(topology: dict[str, Any], client, log) -> None:
    tap, provider = topology["tap"], topology["provider"]
    provider.body = chat_stream("word " * 200)
    provider.hold_after = 582
    response = await client.post(tap.front_url + "/v1/chat/completions", data=chat_request())
    key = response.headers["X-Request-ID"]
    received = await response.content.readexactly(582)
    assert received == provider.body[:582]
    response.close()
    await wait_for(lambda: provider.cancelled)
    pair = await tap.wait_compared(key)
    assert pair["legs"]["downstream"]["ended"] == "client_aborted"
    assert pair["legs"]["upstream"]["ended"] == "client_aborted"
    assert pair["legs"]["upstream"]["bytes"] == 582
    aborted = {line["side"]: line for line in log.lines("leg.aborted")}
    assert aborted["downstream"]["ended"] == "client_aborted"


@pytest.mark.parametrize("content_length", [False, True])
async def test_upstream_reset_reaches_client_without_fabricated_bytes(
    provider, make_tap, client, content_length: bool
) -> None:
    script, provider_url = provider
    script.body = chat_stream("word " * 200)
    script.reset_after = 970
    script.content_length = content_length
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url)
    async with client.post(
        tap.back_url + "/v1/chat/completions",
        data=chat_request(),
        headers={"X-Request-ID": "reset-1"},
    ) as response:
        received, error = await read_until_error(response)
    assert error is not None
    assert received == script.body[:970]
    pair = await tap.wait_compared("reset-1")
    leg = pair["legs"]["upstream"]
    assert leg["ended"] == "upstream_reset"
    assert leg["bytes"] == 970
    assert pair["check"]["verdict"] in ("defective", "inconclusive")


async def test_upstream_reset_through_the_gateway(topology, client) -> None:
    tap, provider = topology["tap"], topology["provider"]
    provider.body = chat_stream("word " * 200)
    provider.reset_after = 485
    async with client.post(tap.front_url + "/v1/chat/completions", data=chat_request()) as response:
        key = response.headers["X-Request-ID"]
        received, error = await read_until_error(response)
    assert error is not None
    assert received == provider.body[:485]
    pair = await tap.wait_compared(key)
    assert pair["legs"]["upstream"]["ended"] == "upstream_reset"
    assert pair["legs"]["downstream"]["ended"] == "upstream_reset"
    assert b"[DONE]" not in received


async def test_read_timeout_ends_leg_as_timeout(provider, make_tap, client) -> None:
    script, provider_url = provider
    script.hold_after = 291
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url, read_timeout=0.3)
    async with client.post(
        tap.back_url + "/v1/chat/completions",
        data=chat_request(),
        headers={"X-Request-ID": "slow-1"},
    ) as response:
        received, error = await read_until_error(response)
    assert error is not None
    assert received == script.body[:291]
    pair = await tap.wait_compared("slow-1")
    assert pair["legs"]["upstream"]["ended"] == "timeout"


async def test_unreachable_upstream_gets_recorded_502(make_tap, client, unused_tcp_port) -> None:
    tap = await make_tap(back=("127.0.0.1", 0), provider=f"http://127.0.0.1:{unused_tcp_port}")
    async with client.post(
        tap.back_url + "/v1/chat/completions",
        data=chat_request(),
        headers={"X-Request-ID": "nowhere-1"},
    ) as response:
        assert response.status == 502
        error = (await response.json())["error"]
    assert error["type"] == "upstream_unreachable"
    pair = await tap.wait_compared("nowhere-1")
    leg = pair["legs"]["upstream"]
    assert leg["status"] == 502
    assert leg["ended"] == "upstream_unreachable"
    assert leg["file"] == "upstream.json"
