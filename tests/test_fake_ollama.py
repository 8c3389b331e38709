"""The fake provider's Ollama `/api/chat` and the fake gateway's translation into it and back.

The provider must answer the way Ollama's API docs show (NDJSON lines, whole calls with argument
objects, a `done: true` line with the counters; the whole body when `"stream": false`) and read
clean, with the calls asked for, through calltap's own `ollama.chat` reducer. The gateway must send
what LiteLLM's `ollama_chat` route sends and hand back Chat Completions that LiteLLM would.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from calltap.fakes import FakeGateway
from calltap.fakes.frames import NDJSONFrames
from calltap.fakes.gateway import TRANSLATE_HEADER
from calltap.fakes.provider import (
    CHAT_PATH,
    CLOCK_TOOL,
    OLLAMA_PATH,
    QUESTION,
    TOOLS_REQUEST,
    WEATHER_TOOL,
)
from calltap.fakes.translate import TARGETS
from calltap.fakes.translate_ollama import FromOllama
from calltap.fakes.translate_request import to_ollama
from dialect_helpers import clean_choice, read
from fake_helpers import EXPECTED_CALLS, call_starts, post, through

OLLAMA_REQUEST: dict[str, Any] = {
    "model": "llama3.2",
    "messages": QUESTION,
    "tools": [WEATHER_TOOL, CLOCK_TOOL],
}
"""What an Ollama client sends: no `stream`, so Ollama streams."""


def calls_of(body: bytes, **capture: Any) -> list[tuple[str, Any]]:
    choice = read(body, path=OLLAMA_PATH, status=200, **capture).choices[0]
    return [(call.name, orjson.loads(call.arguments)) for call in choice.tool_calls]


def lines(body: bytes) -> list[dict[str, Any]]:
    assert body.endswith(b"\n")
    return [orjson.loads(line) for line in body.splitlines()]


# The provider


@pytest.mark.parametrize(
    ("stream", "streaming"), [(None, True), (True, True), (False, False)], ids=str
)
async def test_api_chat_answers_both_tools_and_reads_clean(provider, client, stream, streaming):
    request = OLLAMA_REQUEST if stream is None else {**OLLAMA_REQUEST, "stream": stream}
    reply, body = await post(client, provider.url + OLLAMA_PATH, request)
    transcript = read(body, path=OLLAMA_PATH, status=200, content_type=reply.content_type)
    choice = clean_choice(transcript, "ollama.chat", streaming=streaming)

    assert reply.status == 200
    assert reply.content_type == ("application/x-ndjson" if streaming else "application/json")
    assert calls_of(body) == EXPECTED_CALLS
    assert choice.finish_reason == "tool_calls"
    assert transcript.terminal_seen is streaming
    assert transcript.usage is not None and transcript.usage.prompt_tokens > 0
    assert "x-request-id" not in reply.headers


async def test_the_stream_is_whole_calls_then_the_done_line(provider, client):
    _, body = await post(client, provider.url + OLLAMA_PATH, OLLAMA_REQUEST)
    *calls, last = lines(body)

    assert [line["done"] for line in calls] == [False, False]
    assert [line["message"]["tool_calls"] for line in calls] == [
        [{"function": {"name": name, "arguments": arguments}}] for name, arguments in EXPECTED_CALLS
    ]
    assert all(line["message"]["content"] == "" for line in calls)
    assert (last["done"], last["done_reason"], last["message"]["content"]) == (True, "stop", "")
    assert last["prompt_eval_count"] > 0 and last["eval_count"] > 0
    assert last["total_duration"] == last["prompt_eval_duration"] + last["eval_duration"]
    assert {line["model"] for line in [*calls, last]} == {"llama3.2"}


async def test_the_whole_body_is_the_done_line_with_the_whole_message(provider, client):
    _, streamed = await post(client, provider.url + OLLAMA_PATH, OLLAMA_REQUEST)
    _, whole = await post(client, provider.url + OLLAMA_PATH, {**OLLAMA_REQUEST, "stream": False})
    body = orjson.loads(whole)

    assert (body["done"], body["done_reason"]) == (True, "stop")
    assert [call["function"]["name"] for call in body["message"]["tool_calls"]] == [
        "weather",
        "clock",
    ]
    assert calls_of(whole) == calls_of(streamed)


async def test_a_text_answer_is_cut_to_length_by_num_predict(provider, client):
    plain = {"model": "llama3.2", "messages": QUESTION}
    _, whole = await post(client, provider.url + OLLAMA_PATH, plain)
    _, cut = await post(
        client, provider.url + OLLAMA_PATH, {**plain, "options": {"num_predict": 3}}
    )
    whole_choice = read(whole, path=OLLAMA_PATH, status=200).choices[0]
    cut_choice = read(cut, path=OLLAMA_PATH, status=200).choices[0]

    assert (whole_choice.finish_reason, len(whole_choice.text.split())) == ("stop", 8)
    assert (cut_choice.finish_reason, len(cut_choice.text.split())) == ("length", 3)
    assert lines(cut)[-1]["done_reason"] == "length"


async def test_a_request_without_model_is_a_400_in_ollamas_shape(provider, client):
    reply, body = await post(client, provider.url + OLLAMA_PATH, {"messages": QUESTION})
    assert reply.status == 400
    assert orjson.loads(body) == {"error": "model is required"}


# The gateway's translation


def test_a_conversation_translates_as_litellm_sends_it_with_the_result_named():
    """LiteLLM's shape, and the result's function name beside its call id: LiteLLM's calls carry
    no id, so without `tool_name` nothing links the result to its call."""
    chat = {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city":"Taipei"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        "tools": [WEATHER_TOOL],
        "max_tokens": 50,
        "stop": "\n\n",
    }
    assert to_ollama(chat) == {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "weather", "arguments": {"city": "Taipei"}}}],
            },
            {"role": "tool", "content": "sunny", "tool_call_id": "call_1", "tool_name": "weather"},
        ],
        "stream": False,
        "tools": [WEATHER_TOOL],
        "options": {"num_predict": 50, "stop": ["\n\n"]},
    }


async def test_the_gateway_sends_the_ollama_request_without_the_clients_credentials(
    provider, client
):
    headers = {
        TRANSLATE_HEADER: "ollama",
        "Authorization": "Bearer sk-client",
        "X-Request-ID": "o1",
    }
    async with FakeGateway(provider.url) as gateway:
        reply, body = await post(client, gateway.url + CHAT_PATH, TOOLS_REQUEST, **headers)
    exchange = provider.exchanges[-1]

    assert reply.status == 200 and body.endswith(b"data: [DONE]\n\n")
    assert exchange.path == OLLAMA_PATH == TARGETS["ollama"].path(TOOLS_REQUEST)
    assert orjson.loads(exchange.request_body) == to_ollama(TOOLS_REQUEST)
    assert orjson.loads(exchange.request_body)["stream"] is True
    assert exchange.request_id == "o1"
    assert "Authorization" not in exchange.request_headers
    assert TRANSLATE_HEADER not in exchange.request_headers


def provider_lines(body: bytes) -> list[Any]:
    return [payload for _, payload in NDJSONFrames().feed(body)]


def translate(payloads: list[Any], **options: Any) -> list[Any]:
    return through(FromOllama(**options), payloads)


async def test_the_translated_stream_looks_like_litellms(provider, client):
    _, body = await post(client, provider.url + OLLAMA_PATH, OLLAMA_REQUEST)
    chunks = translate(provider_lines(body))
    decoded = chunks[:-1]
    starts = call_starts(decoded)

    assert chunks[-1] == "[DONE]"
    assert len({chunk["id"] for chunk in decoded}) == 1
    assert decoded[0]["choices"][0]["delta"]["role"] == "assistant"
    assert {chunk["model"] for chunk in decoded} == {"llama3.2"}
    assert [(f["index"], f["function"]["name"]) for f in starts] == [(0, "weather"), (1, "clock")]
    assert all(f["id"].startswith("call_") for f in starts)
    assert len({f["id"] for f in starts}) == 2
    assert decoded[-2]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    assert decoded[-1]["usage"]["prompt_tokens"] == lines(body)[-1]["prompt_eval_count"]
    assert decoded[-1]["usage"]["completion_tokens"] == lines(body)[-1]["eval_count"]


async def test_no_done_without_the_done_line_and_an_error_line_is_an_error(provider, client):
    _, body = await post(client, provider.url + OLLAMA_PATH, OLLAMA_REQUEST)
    payloads = provider_lines(body)
    cut = translate(payloads[:-1])
    failed = translate([*payloads[:1], {"error": "model runner has unexpectedly stopped"}])

    assert "[DONE]" not in cut and cut
    assert failed[-1] == {"error": {"message": "model runner has unexpectedly stopped"}}
    assert "[DONE]" not in failed


async def test_losing_the_second_call_keeps_the_first_on_index_0(provider, client):
    _, body = await post(client, provider.url + OLLAMA_PATH, OLLAMA_REQUEST)
    chunks = translate(provider_lines(body), lose_second_call=True)
    _, whole = await post(client, provider.url + OLLAMA_PATH, {**OLLAMA_REQUEST, "stream": False})
    completion = TARGETS["ollama"].whole(orjson.loads(whole), lose_second_call=True)
    downstream = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks[:-1])
    streamed = read(downstream + b"data: [DONE]\n\n").choices[0]

    assert [(call.index, call.name) for call in streamed.tool_calls] == [(0, "weather")]
    assert [
        call["function"]["name"] for call in completion["choices"][0]["message"]["tool_calls"]
    ] == ["weather"]
    assert streamed.finish_reason == completion["choices"][0]["finish_reason"] == "tool_calls"
