"""The fake provider's per-request variants (`calltap.fakes.variants.VariantProvider`): a stream cut
by its dialect's own error event, and Gemini's parallel calls one per chunk. Each is read by
calltap's own reducer, so a test that asks for a variant gets exactly the shape it names; without
the headers the answer is the plain fake provider's, byte for byte."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from calltap.fakes.frames import SSEFrames
from calltap.fakes.provider import (
    CHAT_PATH,
    CLOCK_TOOL,
    MESSAGES_PATH,
    QUESTION,
    TOOLS_REQUEST,
    WEATHER_TOOL,
    FakeProvider,
)
from calltap.fakes.variants import (
    ERROR_HEADER,
    GEMINI_CALLS_HEADER,
    SPLIT_HEADER,
    VariantProvider,
)
from dialect_helpers import codes, read
from fake_helpers import EXPECTED_CALLS, post

FUNCTIONS = [tool["function"] for tool in (WEATHER_TOOL, CLOCK_TOOL)]
MESSAGES_REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": QUESTION, "stream": True,
    "tools": [{"name": f["name"], "input_schema": f["parameters"]} for f in FUNCTIONS],
}
CONVERSE_PATH = "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/converse-stream"
CONVERSE_REQUEST: dict[str, Any] = {
    "messages": [{"role": "user", "content": [{"text": QUESTION[0]["content"]}]}],
    "toolConfig": {"tools": [{"toolSpec": {"name": f["name"],
                                           "inputSchema": {"json": f["parameters"]}}}
                             for f in FUNCTIONS]},
}
GEMINI_PATH = "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
GEMINI_REQUEST: dict[str, Any] = {
    "contents": [{"role": "user", "parts": [{"text": QUESTION[0]["content"]}]}],
    "tools": [{"functionDeclarations": [{"name": f["name"], "parameters": f["parameters"]}
                                        for f in FUNCTIONS]}],
}
ROUTES = {"chat": (CHAT_PATH, TOOLS_REQUEST), "messages": (MESSAGES_PATH, MESSAGES_REQUEST),
          "converse": (CONVERSE_PATH, CONVERSE_REQUEST)}


@pytest.fixture
async def variant() -> AsyncIterator[VariantProvider]:
    async with VariantProvider() as fake:
        yield fake


@pytest.mark.parametrize("route", ROUTES)
async def test_an_error_after_n_events_ends_the_stream_with_the_dialects_error(
    variant: VariantProvider, client: aiohttp.ClientSession, route: str
) -> None:
    path, request = ROUTES[route]
    _, whole = await post(client, variant.url + path, request)
    reply, body = await post(client, variant.url + path, request, **{ERROR_HEADER: "3"})
    transcript = read(body, path=path, status=200, content_type=reply.content_type)
    plain = read(whole, path=path, status=200, content_type=reply.content_type)

    assert reply.status == 200
    assert transcript.errors and not transcript.terminal_seen
    assert transcript.choices[0].finish_reason in (None, "error")
    assert "ERROR_IN_STREAM" in codes(transcript)
    assert transcript.events == 4 and plain.events > 4
    assert variant.exchanges[-1].complete, "the response ends cleanly after the error"


async def test_the_anthropic_error_is_an_overloaded_error_event(
    variant: VariantProvider, client: aiohttp.ClientSession
) -> None:
    _, body = await post(client, variant.url + MESSAGES_PATH, MESSAGES_REQUEST,
                         **{ERROR_HEADER: "2"})
    events = list(SSEFrames().feed(body))

    assert [name for name, _ in events] == ["message_start", "content_block_start", "error"]
    assert events[-1][1] == {"type": "error", "error": {"type": "overloaded_error",
                                                        "message": "Overloaded"}}


async def test_gemini_calls_apart_stream_one_call_per_chunk(
    variant: VariantProvider, client: aiohttp.ClientSession
) -> None:
    _, together = await post(client, variant.url + GEMINI_PATH, GEMINI_REQUEST)
    _, apart = await post(client, variant.url + GEMINI_PATH, GEMINI_REQUEST,
                          **{GEMINI_CALLS_HEADER: "apart"})
    chunks = orjson.loads(apart)
    transcript = read(apart, path=GEMINI_PATH, status=200)

    assert len(orjson.loads(together)) == 1 and len(chunks) == 2
    assert [len(chunk["candidates"][0]["content"]["parts"]) for chunk in chunks] == [1, 1]
    assert ["finishReason" in chunk["candidates"][0] for chunk in chunks] == [False, True]
    assert transcript.findings == []
    choice = transcript.choices[0]
    assert [(call.name, orjson.loads(call.arguments)) for call in choice.tool_calls] == (
        EXPECTED_CALLS)
    assert choice.finish_reason == "tool_calls"


@pytest.mark.parametrize("route", ROUTES)
async def test_without_the_headers_the_answer_is_the_fake_providers(
    variant: VariantProvider, client: aiohttp.ClientSession, route: str
) -> None:
    path, request = ROUTES[route]
    async with FakeProvider() as plain:
        _, expected = await post(client, plain.url + path, request)
    _, body = await post(client, variant.url + path, request)

    assert body == expected


async def test_a_split_answer_arrives_in_reads_that_end_k_bytes_into_each_event(
    variant: VariantProvider, client: aiohttp.ClientSession
) -> None:
    path, request = ROUTES["converse"]
    _, whole = await post(client, variant.url + path, request)
    async with client.post(variant.url + path, data=orjson.dumps(request),
                           headers={SPLIT_HEADER: "2"}) as reply:
        reads = [piece async for piece in reply.content.iter_any()]

    assert b"".join(reads) == whole
    assert len(reads) == 2 * read(whole, path=path, status=200).events
    assert all(len(piece) == 2 for piece in reads[::2])
