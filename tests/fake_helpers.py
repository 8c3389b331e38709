"""What the tests of the fake provider's dialects share: the calls its tool question gets, a POST
that hands back the answer's bytes, a stream translation run over payloads, and the call starts
of its chunks (the `provider` fixture is in conftest.py)."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from calltap.fakes.defects import Relay

EXPECTED_CALLS = [("weather", {"city": "Taipei"}), ("clock", {"zone": "UTC"})]
"""The calls every dialect's answer to the weather-and-time question holds, in order."""


async def post(
    client: aiohttp.ClientSession, url: str, request: dict[str, Any], **headers: str
) -> tuple[aiohttp.ClientResponse, bytes]:
    async with client.post(url, data=orjson.dumps(request), headers=headers) as reply:
        return reply, await reply.read()


def through(relay: Relay, payloads: list[Any]) -> list[Any]:
    """Everything a stream transform sends for these provider payloads, its ending included."""
    return [out for payload in payloads for out in relay.feed(payload)] + relay.end()


def call_starts(chunks: list[Any]) -> list[dict[str, Any]]:
    """The first fragment of each call (the one with an id) in Chat Completions chunks."""
    return [
        fragment
        for chunk in chunks
        if isinstance(chunk, dict)
        for choice in chunk.get("choices") or ()
        for fragment in choice["delta"].get("tool_calls", ())
        if "id" in fragment
    ]
