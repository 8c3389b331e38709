"""The fake provider's Gemini routes and the fake gateway's translation into them and back.

The provider must answer on the Gemini API's and Vertex AI's paths in the three shapes Google
serves (SSE with `alt=sse`, a JSON array written progressively without it, one object from
`generateContent`), each read clean, with the calls asked for, by calltap's own `google.gemini`
reducer. The gateway must send what LiteLLM's `gemini/` route sends and hand back Chat
Completions that LiteLLM would.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from calltap.fakes import FakeGateway
from calltap.fakes.frames import SSEFrames
from calltap.fakes.gateway import TRANSLATE_HEADER
from calltap.fakes.provider import CHAT_PATH, CLOCK_TOOL, QUESTION, TOOLS_REQUEST, WEATHER_TOOL
from calltap.fakes.translate import TARGETS
from calltap.fakes.translate_gemini import FromGemini, to_gemini
from dialect_helpers import clean_choice, read
from fake_helpers import EXPECTED_CALLS, call_starts, post, through

MODEL = "gemini-2.5-flash"
GEMINI_API = f"/v1beta/models/{MODEL}"
VERTEX_AI = f"/v1/projects/calltap-test/locations/us-central1/publishers/google/models/{MODEL}"
GEMINI_REQUEST: dict[str, Any] = {
    "contents": [{"role": "user", "parts": [{"text": QUESTION[0]["content"]}]}],
    "tools": [
        {
            "functionDeclarations": [
                {"name": tool["function"]["name"], "parameters": tool["function"]["parameters"]}
                for tool in (WEATHER_TOOL, CLOCK_TOOL)
            ]
        }
    ],
}


def calls_of(body: bytes, path: str) -> list[tuple[str, Any]]:
    choice = read(body, path=path, status=200).choices[0]
    return [(call.name, orjson.loads(call.arguments)) for call in choice.tool_calls]


# The provider


@pytest.mark.parametrize("base", [GEMINI_API, VERTEX_AI], ids=["gemini-api", "vertex-ai"])
@pytest.mark.parametrize(
    ("route", "media_type", "streaming"),
    [
        (":streamGenerateContent?alt=sse", "text/event-stream", True),
        (":streamGenerateContent", "application/json", True),
        (":generateContent", "application/json", False),
    ],
    ids=["sse", "array", "whole"],
)
async def test_each_route_answers_both_tools_and_reads_clean(
    provider, client, base, route, media_type, streaming
):
    path = base + route
    reply, body = await post(client, provider.url + path, GEMINI_REQUEST)
    transcript = read(body, path=path, status=200, content_type=reply.content_type)
    choice = clean_choice(transcript, "google.gemini", streaming=streaming)

    assert reply.status == 200
    assert reply.content_type == media_type
    assert calls_of(body, path) == EXPECTED_CALLS
    assert choice.finish_reason == "tool_calls"
    assert transcript.usage is not None and transcript.usage.prompt_tokens > 0


async def test_the_three_shapes_carry_the_same_objects(provider, client):
    _, sse = await post(client, f"{provider.url}{GEMINI_API}:streamGenerateContent?alt=sse",
                        GEMINI_REQUEST)
    _, array = await post(client, f"{provider.url}{GEMINI_API}:streamGenerateContent",
                          GEMINI_REQUEST)
    events = [payload for _, payload in SSEFrames().feed(sse)]

    assert sse.endswith(b"\r\n\r\n") and sse.startswith(b"data: {")
    assert array.startswith(b"[{") and array.endswith(b"}\n]")
    assert orjson.loads(array) == events
    (only,) = events
    candidate = only["candidates"][0]
    assert candidate["finishReason"] == "STOP"
    assert candidate["finishMessage"] == "Model generated function call(s)."
    assert [part["functionCall"] for part in candidate["content"]["parts"]] == [
        {"name": name, "args": arguments} for name, arguments in EXPECTED_CALLS
    ]
    assert only["modelVersion"] == MODEL


async def test_a_text_answer_streams_a_chunk_per_piece_with_the_reason_on_the_last(
    provider, client
):
    request = {**GEMINI_REQUEST, "tools": [], "generationConfig": {"maxOutputTokens": 3}}
    path = f"{GEMINI_API}:streamGenerateContent?alt=sse"
    _, body = await post(client, provider.url + path, request)
    events = [payload for _, payload in SSEFrames().feed(body)]
    transcript = read(body, path=path, status=200)

    assert len(events) == 3
    assert ["finishReason" in event["candidates"][0] for event in events] == [False, False, True]
    assert events[-1]["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert transcript.choices[0].finish_reason == "length"
    assert all("usageMetadata" in event for event in events)


async def test_the_array_stream_is_framed_as_google_frames_it(provider, client):
    """Elements joined by `\\n,\\r\\n` and closed by `\\n]`: what clients of the endpoint split
    on (Portkey's Gemini route splits on CRLF and strips a trailing comma from each piece)."""
    request = {**GEMINI_REQUEST, "tools": [], "generationConfig": {"maxOutputTokens": 3}}
    path = f"{GEMINI_API}:streamGenerateContent"
    _, body = await post(client, provider.url + path, request)
    pieces = body.split(b"\r\n")

    assert body.startswith(b"[{") and body.endswith(b"}\n]")
    assert [piece.endswith(b"}\n,") for piece in pieces] == [True, True, False]
    assert [orjson.loads(piece.removeprefix(b"[").removesuffix(b"\n,").removesuffix(b"\n]"))
            for piece in pieces] == orjson.loads(body)
    assert read(body, path=path, status=200).choices[0].finish_reason == "length"


async def test_snake_case_fields_and_capital_types_are_read_as_litellm_sends_them(
    provider, client
):
    declaration = {"name": "weather", "parameters": {
        "type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}
    request = {
        "contents": GEMINI_REQUEST["contents"],
        "tools": [{"function_declarations": [declaration]}],
        "tool_config": {"function_calling_config": {"mode": "ANY"}},
    }
    _, body = await post(client, f"{provider.url}{GEMINI_API}:generateContent", request)

    assert calls_of(body, f"{GEMINI_API}:generateContent") == EXPECTED_CALLS[:1]


async def test_a_request_without_contents_is_a_400_in_googles_shape(provider, client):
    reply, body = await post(client, f"{provider.url}{GEMINI_API}:generateContent", {})

    assert reply.status == 400
    assert orjson.loads(body)["error"]["status"] == "INVALID_ARGUMENT"


# The gateway


def test_a_conversation_translates_as_litellm_sends_it():
    call = {"id": "call_1", "type": "function",
            "function": {"name": "weather", "arguments": '{"city":"Taipei"}'}}
    chat = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "Be brief."},
            *QUESTION,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "31 C"},
        ],
        "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "max_tokens": 64,
        "stop": "END",
    }

    assert to_gemini(chat) == {
        "contents": [
            {"role": "user", "parts": [{"text": QUESTION[0]["content"]}]},
            {"role": "model",
             "parts": [{"functionCall": {"name": "weather", "args": {"city": "Taipei"}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "weather", "response": {"content": "31 C"}}}]},
        ],
        "system_instruction": {"parts": [{"text": "Be brief."}]},
        "tools": [{"function_declarations": [WEATHER_TOOL["function"]]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                                  "allowedFunctionNames": ["weather"]}},
        "generationConfig": {"max_output_tokens": 64, "stop_sequences": ["END"]},
    }
    assert TARGETS["gemini"].path({**chat, "stream": True}) == (
        f"{GEMINI_API}:streamGenerateContent?alt=sse")
    assert TARGETS["gemini"].path(chat) == f"{GEMINI_API}:generateContent"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_the_gateway_calls_gemini_with_the_key_header_and_answers_chat(
    provider, client, stream
):
    chat = {**TOOLS_REQUEST, "model": MODEL, "stream": stream}
    headers = {TRANSLATE_HEADER: "gemini", "Authorization": "Bearer gm-key", "X-Request-ID": "g1"}
    async with FakeGateway(provider.url) as gateway:
        reply, body = await post(client, gateway.url + CHAT_PATH, chat, **headers)
    exchange = provider.exchanges[-1]
    transcript = read(body)

    assert reply.status == 200
    route = "streamGenerateContent" if stream else "generateContent"
    assert exchange.path == f"{GEMINI_API}:{route}"
    assert exchange.request_headers["x-goog-api-key"] == "gm-key"
    assert "Authorization" not in exchange.request_headers
    assert orjson.loads(exchange.request_body) == to_gemini(chat)
    assert transcript.dialect == "openai.chat" and transcript.findings == []
    assert [(call.name, orjson.loads(call.arguments))
            for call in transcript.choices[0].tool_calls] == EXPECTED_CALLS
    assert transcript.choices[0].finish_reason == "tool_calls"


def gemini_chunk(parts: list[dict[str, Any]], reason: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if reason is not None:
        candidate["finishReason"] = reason
    usage = {"promptTokenCount": 9, "candidatesTokenCount": 4, "thoughtsTokenCount": 2,
             "totalTokenCount": 15}
    return {"candidates": [candidate], "usageMetadata": usage, "responseId": "r1",
            "modelVersion": MODEL}


def test_calls_across_chunks_are_numbered_from_0_and_done_follows_the_finish_reason():
    weather = {"functionCall": {"name": "weather", "args": {"city": "Taipei"}}}
    clock = {"functionCall": {"name": "clock", "args": {"zone": "UTC"}, "id": "fc_2"}}
    thought = {"text": "Two lookups.", "thought": True}
    chunks = through(FromGemini(), [gemini_chunk([thought, weather]),
                                    gemini_chunk([clock], "STOP")])
    cut = through(FromGemini(), [gemini_chunk([weather])])

    starts = call_starts(chunks)
    assert [(f["index"], f["function"]["name"]) for f in starts] == [(0, "weather"), (1, "clock")]
    assert starts[1]["id"] == "fc_2" and starts[0]["id"].startswith("call_")
    assert not any(chunk["choices"][0]["delta"].get("content") == "Two lookups."
                   for chunk in chunks[:-1])
    assert chunks[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-2]["usage"]["completion_tokens"] == 6
    assert chunks[-1] == "[DONE]"
    assert "[DONE]" not in cut and cut


def test_an_error_payload_and_a_filtered_answer_are_passed_on():
    error = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    filtered = through(FromGemini(), [gemini_chunk([{"text": "Hm"}], "SAFETY")])

    assert through(FromGemini(), [error]) == [error]
    assert filtered[-3]["choices"][0]["finish_reason"] == "content_filter"


async def test_losing_the_second_call_keeps_the_first(provider, client):
    path = f"{GEMINI_API}:generateContent"
    _, whole = await post(client, provider.url + path, GEMINI_REQUEST)
    completion = TARGETS["gemini"].whole(orjson.loads(whole), lose_second_call=True, model=MODEL)
    streamed = through(FromGemini(lose_second_call=True),
                       [gemini_chunk([{"functionCall": {"name": n, "args": a}}
                                      for n, a in EXPECTED_CALLS], "STOP")])

    message = completion["choices"][0]["message"]
    assert [call["function"]["name"] for call in message["tool_calls"]] == ["weather"]
    assert [f["function"]["name"] for f in call_starts(streamed)] == ["weather"]
