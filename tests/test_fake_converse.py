"""The fake provider's Bedrock Converse routes and the fake gateway's translation into them and
back.

The provider's stream must be what botocore, AWS's own SDK, reads as ConverseStream events with
the `bedrock-runtime` service model, and both answers must read clean, with the calls asked for,
through calltap's own `bedrock.converse` reducer. The gateway must send what LiteLLM's
`bedrock/converse` route sends (the model and streaming in the path), pass a client's SigV4
headers untouched, and hand back Chat Completions that LiteLLM would.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from calltap.fakes import FakeGateway
from calltap.fakes import eventstream as wire
from calltap.fakes.frames import EventStreamFrames
from calltap.fakes.gateway import TRANSLATE_HEADER
from calltap.fakes.provider import CHAT_PATH, CLOCK_TOOL, QUESTION, TOOLS_REQUEST, WEATHER_TOOL
from calltap.fakes.translate import TARGETS
from calltap.fakes.translate_converse import FromConverse
from calltap.fakes.translate_request import to_converse
from dialect_helpers import clean_choice, read
from fake_helpers import EXPECTED_CALLS, call_starts, post, through
from test_eventstream import botocore_events

MODEL = "us.amazon.nova-pro-v1:0"
STREAM_PATH = f"/model/{MODEL}/converse-stream"
WHOLE_PATH = f"/model/{MODEL}/converse"
CONVERSE_REQUEST: dict[str, Any] = {
    "messages": [{"role": "user", "content": [{"text": QUESTION[0]["content"]}]}],
    "toolConfig": {
        "tools": [
            {
                "toolSpec": {
                    "name": tool["function"]["name"],
                    "description": tool["function"]["description"],
                    "inputSchema": {"json": tool["function"]["parameters"]},
                }
            }
            for tool in (WEATHER_TOOL, CLOCK_TOOL)
        ]
    },
}
SIGV4 = {
    "Authorization": (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20251130/us-east-1/bedrock/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature=5d672d79c15b"
    ),
    "X-Amz-Date": "20251130T000000Z",
    "X-Amz-Security-Token": "FwoGZXIvYXdzEXAMPLETOKEN",
}


def calls_of(body: bytes, path: str) -> list[tuple[str, Any]]:
    choice = read(body, path=path, status=200).choices[0]
    return [(call.name, orjson.loads(call.arguments)) for call in choice.tool_calls]


# The provider


@pytest.mark.parametrize(("path", "streaming"), [(STREAM_PATH, True), (WHOLE_PATH, False)])
async def test_each_route_answers_both_tools_and_reads_clean(provider, client, path, streaming):
    reply, body = await post(client, provider.url + path, CONVERSE_REQUEST)
    transcript = read(body, path=path, status=200, content_type=reply.content_type)
    choice = clean_choice(transcript, "bedrock.converse", streaming=streaming)

    assert reply.status == 200
    assert reply.content_type == (
        "application/vnd.amazon.eventstream" if streaming else "application/json"
    )
    assert calls_of(body, path) == EXPECTED_CALLS
    assert choice.finish_reason == "tool_calls"
    assert all(call.id.startswith("tooluse_") for call in choice.tool_calls)
    assert transcript.terminal_seen is streaming
    assert transcript.usage is not None and transcript.usage.prompt_tokens > 0
    assert len(reply.headers["x-amzn-RequestId"]) == 36


async def test_botocore_reads_the_stream_as_converse_stream_events_in_order(provider, client):
    _, body = await post(client, provider.url + STREAM_PATH, CONVERSE_REQUEST)
    events = list(botocore_events(body, "ConverseStream", "stream"))
    kinds = [next(iter(event)) for event in events]
    starts = [event["contentBlockStart"] for event in events if "contentBlockStart" in event]

    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]
    assert events[0]["messageStart"] == {"role": "assistant"}
    assert [(s["contentBlockIndex"], s["start"]["toolUse"]["name"]) for s in starts] == [
        (0, "weather"),
        (1, "clock"),
    ]
    for index, (_, arguments) in enumerate(EXPECTED_CALLS):
        fragments = [
            event["contentBlockDelta"]["delta"]["toolUse"]["input"]
            for event in events
            if event.get("contentBlockDelta", {}).get("contentBlockIndex") == index
        ]
        assert len(fragments) > 1
        assert orjson.loads("".join(fragments)) == arguments
    assert kinds.count("contentBlockStop") == 2
    assert events[-2]["messageStop"]["stopReason"] == "tool_use"
    usage = events[-1]["metadata"]["usage"]
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"] > 0


async def test_the_json_body_holds_tool_use_blocks_with_input_objects(provider, client):
    _, body = await post(client, provider.url + WHOLE_PATH, CONVERSE_REQUEST)
    answer = orjson.loads(body)
    blocks = answer["output"]["message"]["content"]

    assert answer["stopReason"] == "tool_use"
    assert [(b["toolUse"]["name"], b["toolUse"]["input"]) for b in blocks] == EXPECTED_CALLS
    assert answer["usage"]["inputTokens"] > 0 and "metrics" in answer


@pytest.mark.parametrize(
    ("settings", "stop_reason", "finish_reason", "words"),
    [
        ({}, "end_turn", "stop", 8),
        ({"maxTokens": 3}, "max_tokens", "length", 3),
        ({"stopSequences": ["\n\n"]}, "stop_sequence", "stop", 4),
    ],
    ids=["end_turn", "max_tokens", "stop_sequence"],
)
async def test_a_text_answer_stops_as_its_inference_config_says(
    provider, client, settings, stop_reason, finish_reason, words
):
    plain = {"messages": CONVERSE_REQUEST["messages"], "inferenceConfig": settings}
    _, body = await post(client, provider.url + STREAM_PATH, plain)
    events = list(botocore_events(body, "ConverseStream", "stream"))
    choice = clean_choice(
        read(body, path=STREAM_PATH, status=200), "bedrock.converse", streaming=True
    )

    assert events[-2]["messageStop"]["stopReason"] == stop_reason
    assert not any("contentBlockStart" in event for event in events)
    assert (choice.finish_reason, len(choice.text.split())) == (finish_reason, words)


async def test_a_request_without_messages_is_a_400_in_bedrocks_shape(provider, client):
    reply, body = await post(client, provider.url + WHOLE_PATH, {"inferenceConfig": {}})
    assert reply.status == 400
    assert "'messages' failed to satisfy constraint" in orjson.loads(body)["message"]


# The gateway's translation


CONVERSATION: dict[str, Any] = {
    "model": MODEL,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "tooluse_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Taipei"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "tooluse_1", "content": "sunny"},
        {"role": "user", "content": "And tomorrow?"},
    ],
    "tools": [WEATHER_TOOL],
    "tool_choice": "required",
    "max_tokens": 50,
    "temperature": 0.2,
    "stream": True,
}
"""A Chat request with a system prompt, a call, its result and a follow-up."""


def test_a_conversation_translates_as_litellm_sends_it():
    chat = CONVERSATION
    spec = {
        "name": "weather",
        "description": WEATHER_TOOL["function"]["description"],
        "inputSchema": {"json": WEATHER_TOOL["function"]["parameters"]},
    }
    assert to_converse(chat) == {
        "messages": [
            {"role": "user", "content": [{"text": "Weather?"}]},
            {
                "role": "assistant",
                "content": [
                    {"text": "Checking."},
                    {
                        "toolUse": {
                            "toolUseId": "tooluse_1",
                            "name": "weather",
                            "input": {"city": "Taipei"},
                        }
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "sunny"}]}},
                    {"text": "And tomorrow?"},
                ],
            },
        ],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 50, "temperature": 0.2},
        "toolConfig": {"tools": [{"toolSpec": spec}], "toolChoice": {"any": {}}},
    }
    assert TARGETS["converse"].path(chat) == "/model/us.amazon.nova-pro-v1%3A0/converse-stream"
    assert TARGETS["converse"].path({**chat, "stream": False}).endswith("%3A0/converse")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_the_gateway_sends_the_converse_request_with_the_sigv4_headers_untouched(
    provider, client, stream
):
    chat = {**TOOLS_REQUEST, "model": MODEL, "stream": stream}
    headers = {TRANSLATE_HEADER: "converse", "X-Request-ID": "c1", **SIGV4}
    async with FakeGateway(provider.url) as gateway:
        reply, body = await post(client, gateway.url + CHAT_PATH, chat, **headers)
    exchange = provider.exchanges[-1]
    sent = orjson.loads(exchange.request_body)

    assert reply.status == 200
    assert exchange.path == (STREAM_PATH if stream else WHOLE_PATH)
    assert sent == to_converse(chat)
    assert "model" not in sent and "stream" not in sent
    assert {name: exchange.request_headers.get(name) for name in SIGV4} == SIGV4
    assert exchange.request_id == "c1"
    assert TRANSLATE_HEADER not in exchange.request_headers
    assert body.endswith(b"data: [DONE]\n\n") is stream


async def test_a_converse_client_is_relayed_byte_for_byte_with_its_signature(provider, client):
    async with FakeGateway(provider.url) as gateway:
        reply, body = await post(client, gateway.url + STREAM_PATH, CONVERSE_REQUEST, **SIGV4)
    exchange = provider.exchanges[-1]

    assert reply.content_type == "application/vnd.amazon.eventstream"
    assert body == bytes(exchange.response_body)
    assert {name: exchange.request_headers.get(name) for name in SIGV4} == SIGV4


def provider_events(body: bytes) -> list[Any]:
    return [payload for _, payload in EventStreamFrames().feed(body)]


def translate(payloads: list[Any], **options: Any) -> list[Any]:
    return through(FromConverse(**options), payloads)


async def test_the_translated_stream_looks_like_litellms(provider, client):
    _, body = await post(client, provider.url + STREAM_PATH, CONVERSE_REQUEST)
    chunks = translate(provider_events(body), model=MODEL)
    decoded = chunks[:-1]
    starts = call_starts(decoded)
    usage = provider_events(body)[-1]["metadata"]["usage"]

    assert chunks[-1] == "[DONE]"
    assert len({chunk["id"] for chunk in decoded}) == 1
    assert {chunk["model"] for chunk in decoded} == {MODEL}
    assert decoded[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [(f["index"], f["function"]["name"]) for f in starts] == [(0, "weather"), (1, "clock")]
    assert all(f["id"].startswith("tooluse_") for f in starts)
    assert decoded[-2]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    assert decoded[-1]["usage"]["prompt_tokens"] == usage["inputTokens"]
    assert decoded[-1]["usage"]["total_tokens"] == usage["totalTokens"]


async def test_done_comes_only_after_message_stop(provider, client):
    _, body = await post(client, provider.url + STREAM_PATH, CONVERSE_REQUEST)
    payloads = provider_events(body)
    without_metadata = translate(payloads[:-1])
    cut = translate(payloads[:-2])
    throttled = translate(
        provider_events(wire.exception("throttlingException", "Too many requests"))
    )

    assert without_metadata[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert without_metadata[-1] == "[DONE]"
    assert not any("usage" in chunk for chunk in without_metadata[:-1])
    assert "[DONE]" not in cut and cut
    assert throttled == [{"error": {"type": "throttlingException", "message": "Too many requests"}}]


async def test_losing_the_second_call_keeps_the_first_on_index_0(provider, client):
    _, body = await post(client, provider.url + STREAM_PATH, CONVERSE_REQUEST)
    chunks = translate(provider_events(body), lose_second_call=True)
    _, whole = await post(client, provider.url + WHOLE_PATH, CONVERSE_REQUEST)
    completion = TARGETS["converse"].whole(orjson.loads(whole), lose_second_call=True, model=MODEL)
    downstream = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks[:-1])
    streamed = read(downstream + b"data: [DONE]\n\n").choices[0]
    message = completion["choices"][0]["message"]

    assert [(call.index, call.name) for call in streamed.tool_calls] == [(0, "weather")]
    assert [call["function"]["name"] for call in message["tool_calls"]] == ["weather"]
    assert completion["model"] == MODEL
    assert streamed.finish_reason == completion["choices"][0]["finish_reason"] == "tool_calls"
