"""calltap around Portkey 1.15.2 without `x-portkey-forward-headers`: Portkey then forwards no
client header upstream (neither `X-Request-ID` nor `traceparent`), so calltap's back links each
upstream leg to its front leg by the request's content fingerprint, read from each provider's
request shape (Chat Completions, Anthropic Messages, Gemini, Converse).
"""

from __future__ import annotations

import asyncio

import orjson
import pytest
from portkey_stack import Stack
from tests.with_litellm.litellm_stack import (
    CLOCK,
    INDEXES_RENUMBERED,
    PARALLEL_CALLS,
    STREAM,
    WEATHER,
    question,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

CITIES = {"openai": "Oslo", "anthropic": "Lima", "bedrock": "Accra", "google": "Perth"}
COSMETIC = {"openai": frozenset(), "anthropic": INDEXES_RENUMBERED, "bedrock": frozenset()}
GEMINI_CODES = {True: {"FINISH_REASON_CHANGED", "DONE_MISSING"}, False: {"FINISH_REASON_CHANGED"}}
"""Portkey's own Gemini findings (test_portkey_routes.py): paired by fingerprint all the same."""


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_every_route_pairs_by_fingerprint_concurrently(fingerprint: Stack,
                                                             stream: bool) -> None:
    kind = "stream" if stream else "json"
    sent = await asyncio.gather(*(
        fingerprint.chat(route, f"fp-{route}-{kind}",
                         messages=question(f"What is the weather in {city}, and the time?"),
                         tools=[WEATHER, CLOCK], **(STREAM if stream else {}))
        for route, city in CITIES.items()
    ))

    for one, (route, city) in zip(sent, CITIES.items(), strict=True):
        assert one.reply.calls() == PARALLEL_CALLS
        upstream = one.pair["legs"]["upstream"]
        assert "x-request-id" not in upstream["request_headers"]
        assert "traceparent" not in upstream["request_headers"]
        assert city.encode() in orjson.dumps(fingerprint.request_body(one, "upstream"))
        if route == "google":
            assert one.pair["pairing"] == "fingerprint"
            fingerprint.expect_diverged(one, GEMINI_CODES[stream])
            continue
        fingerprint.expect_equal(one, route, stream=stream, pairing="fingerprint",
                                 cosmetic=COSMETIC[route])
    assert fingerprint.log.lines("pair.orphaned") == []


async def test_identical_requests_pair_in_arrival_order(fingerprint: Stack) -> None:
    """Four identical questions at once: each finds an upstream leg (any pairing of identical
    requests compares `equal`, since the fake provider's answer is a function of the request)."""
    ids = [f"fp-identical-{n}" for n in range(4)]
    sent = await asyncio.gather(*(
        fingerprint.chat("openai", request_id, messages=question(), tools=[WEATHER, CLOCK],
                         **STREAM)
        for request_id in ids
    ))

    for one in sent:
        fingerprint.expect_equal(one, "openai", stream=True, pairing="fingerprint")
        assert one.reply.calls() == PARALLEL_CALLS
