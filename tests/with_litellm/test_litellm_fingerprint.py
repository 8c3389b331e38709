"""calltap around LiteLLM with its defaults: no client header reaches the provider, so calltap's
back links each upstream leg to its front leg by the request's content fingerprint.

Concurrent requests must still each find their own partner: distinct questions by content,
identical ones in arrival order (and then any pairing of them compares `equal`, since the fake
provider's answer is a function of the request).
"""

from __future__ import annotations

import asyncio

import orjson
import pytest
from litellm_stack import (
    ANTHROPIC_MODEL,
    CLOCK,
    CONVERSE_MODEL,
    GEMINI_MODEL,
    INDEXES_RENUMBERED,
    INVOKE_MODEL,
    MESSAGES_PATH,
    OLLAMA_MODEL,
    OPENAI_MODEL,
    PARALLEL_CALLS,
    STREAM,
    WEATHER,
    Stack,
    question,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

CITIES = ("Taipei", "Oslo", "Lima", "Accra", "Perth", "Quito")


async def test_concurrent_distinct_requests_pair_by_fingerprint(fingerprint: Stack) -> None:
    texts = {f"fp-distinct-{n}": f"What is the weather in {city}?"
             for n, city in enumerate(CITIES)}
    requests = [
        {"model": OPENAI_MODEL, "messages": question(text),
         "tools": [WEATHER, CLOCK] if n % 2 == 0 else [WEATHER],
         **(STREAM if n < 4 else {})}
        for n, text in enumerate(texts.values())
    ]
    sent = await asyncio.gather(*(
        fingerprint.chat(request_id, **request)
        for request_id, request in zip(texts, requests, strict=True)
    ))

    for one in sent:
        fingerprint.expect_faithful(one, pairing="fingerprint")
        upstream = fingerprint.request_body(one, "upstream")
        assert upstream["messages"] == question(texts[one.request_id])
        assert "x-request-id" not in one.pair["legs"]["upstream"]["request_headers"]
    assert [one.reply.calls() for one in sent[::2]] == [PARALLEL_CALLS] * 3
    assert [one.reply.calls() for one in sent[1::2]] == [PARALLEL_CALLS[:1]] * 3


async def test_concurrent_identical_requests_pair_by_fingerprint(fingerprint: Stack) -> None:
    ids = [f"fp-identical-{n}" for n in range(4)]
    sent = await asyncio.gather(*(
        fingerprint.chat(request_id, model=OPENAI_MODEL, messages=question(),
                         tools=[WEATHER, CLOCK], **STREAM)
        for request_id in ids
    ))

    for one in sent:
        fingerprint.expect_faithful(one, pairing="fingerprint")
        assert one.reply.calls() == PARALLEL_CALLS


async def test_concurrent_anthropic_requests_pair_across_dialects(fingerprint: Stack) -> None:
    """The back leg is an Anthropic Messages request LiteLLM built from the client's Chat
    Completions request (system moved, content in blocks, max_tokens added): the fingerprint
    still links them."""
    texts = {f"fp-anthropic-{n}": f"What is the weather in {city}, and the time in UTC?"
             for n, city in enumerate(CITIES[:4])}
    sent = await asyncio.gather(*(
        fingerprint.chat(request_id, model=ANTHROPIC_MODEL,
                         messages=[{"role": "system", "content": "Be brief."}, *question(text)],
                         tools=[WEATHER, CLOCK], **(STREAM if n < 3 else {}))
        for n, (request_id, text) in enumerate(texts.items())
    ))

    for one, stream in zip(sent, (True, True, True, False), strict=True):
        fingerprint.expect_faithful(
            one, pairing="fingerprint", upstream_path=MESSAGES_PATH,
            upstream_dialect="anthropic.messages",
            cosmetic=INDEXES_RENUMBERED if stream else frozenset())
        assert one.reply.calls() == PARALLEL_CALLS
        upstream = fingerprint.request_body(one, "upstream")
        assert upstream["system"] and "max_tokens" in upstream
        assert texts[one.request_id] in orjson.dumps(upstream["messages"]).decode()


async def test_translated_routes_pair_by_fingerprint_concurrently(fingerprint: Stack) -> None:
    """Gemini, Ollama, Converse and InvokeModel requests at once, each with its own question:
    the fingerprint reads each provider's request shape, so each finds its own front leg."""
    routes = {GEMINI_MODEL: "Lagos", OLLAMA_MODEL: "Hanoi", CONVERSE_MODEL: "Cusco",
              INVOKE_MODEL: "Tromso"}
    sent = await asyncio.gather(*(
        fingerprint.chat(f"fp-route-{model}", model=model,
                         messages=question(f"What is the weather in {city}?"),
                         tools=[WEATHER, CLOCK], **STREAM)
        for model, city in routes.items()
    ))

    for one, model in zip(sent, routes, strict=True):
        cosmetic = INDEXES_RENUMBERED if model == INVOKE_MODEL else frozenset()
        assert one.pair["pairing"] == "fingerprint"
        assert one.pair["comparison"]["verdict"] == "equal", one.pair["comparison"]
        assert {f["code"] for f in one.pair["comparison"]["findings"]} == cosmetic
        assert one.reply.calls() == PARALLEL_CALLS
        assert routes[model].encode() in orjson.dumps(fingerprint.request_body(one, "upstream"))
    assert fingerprint.log.lines("pair.orphaned") == []
