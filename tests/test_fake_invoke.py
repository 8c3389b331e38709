"""The fake provider's Anthropic-on-Bedrock routes (InvokeModel) and the fake gateway's
translation into them and back.

botocore, with the `bedrock-runtime` service model, must read the stream as
InvokeModelWithResponseStream `chunk` events whose bytes are the Messages events `/v1/messages`
streams; calltap must read both answers clean as `anthropic.messages`. The gateway must send what
LiteLLM's `bedrock/invoke/` route sends and hand back Chat Completions.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from calltap.fakes import FakeGateway
from calltap.fakes import eventstream as wire
from calltap.fakes.frames import EventStreamFrames, SSEFrames
from calltap.fakes.gateway import TRANSLATE_HEADER
from calltap.fakes.provider import CHAT_PATH, MESSAGES_PATH, TOOLS_REQUEST
from calltap.fakes.translate import TARGETS, FromInvoke
from calltap.fakes.translate_request import to_messages
from dialect_helpers import clean_choice, read
from fake_helpers import EXPECTED_CALLS, call_starts, post, through
from test_eventstream import botocore_events
from test_fake_dialects import MESSAGES_REQUEST

MODEL = "anthropic.claude-3-5-sonnet-20241022-v2:0"
STREAM_PATH = f"/model/{MODEL}/invoke-with-response-stream"
WHOLE_PATH = f"/model/{MODEL}/invoke"
INVOKE_REQUEST: dict[str, Any] = {
    "anthropic_version": "bedrock-2023-05-31",
    **{key: value for key, value in MESSAGES_REQUEST.items() if key not in ("model", "stream")},
}


def calls_of(body: bytes, path: str) -> list[tuple[str, Any]]:
    choice = read(body, path=path, status=200).choices[0]
    return [(call.name, orjson.loads(call.arguments)) for call in choice.tool_calls]


@pytest.mark.parametrize(("path", "streaming"), [(STREAM_PATH, True), (WHOLE_PATH, False)])
async def test_each_route_answers_both_tools_and_reads_clean(provider, client, path, streaming):
    reply, body = await post(client, provider.url + path, INVOKE_REQUEST)
    transcript = read(body, path=path, status=200, content_type=reply.content_type)
    choice = clean_choice(transcript, "anthropic.messages", streaming=streaming)

    assert reply.status == 200
    assert reply.content_type == (
        "application/vnd.amazon.eventstream" if streaming else "application/json"
    )
    assert "x-amzn-RequestId" in reply.headers
    assert calls_of(body, path) == EXPECTED_CALLS
    assert choice.finish_reason == "tool_calls"
    assert transcript.terminal_seen is streaming


async def test_botocore_reads_chunks_holding_the_messages_events(provider, client):
    _, body = await post(client, provider.url + STREAM_PATH, INVOKE_REQUEST)
    _, messages = await post(client, provider.url + MESSAGES_PATH,
                             {**MESSAGES_REQUEST, "model": MODEL})
    events = [orjson.loads(event["chunk"]["bytes"])
              for event in botocore_events(body, "InvokeModelWithResponseStream", "body")]
    sse = [payload for _, payload in SSEFrames().feed(messages)]

    assert [event["type"] for event in events] == [payload["type"] for payload in sse]
    assert [event.get("delta") for event in events] == [payload.get("delta") for payload in sse]
    metrics = events[-1]["amazon-bedrock-invocationMetrics"]
    assert metrics["inputTokenCount"] > 0 and metrics["outputTokenCount"] > 0
    assert events[0]["message"]["model"] == MODEL


async def test_a_request_without_anthropic_version_is_a_400_in_bedrocks_shape(provider, client):
    request = {key: value for key, value in INVOKE_REQUEST.items() if key != "anthropic_version"}
    reply, body = await post(client, provider.url + WHOLE_PATH, request)

    assert reply.status == 400
    assert "anthropic_version" in orjson.loads(body)["message"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_the_gateway_sends_the_invoke_body_and_answers_chat(provider, client, stream):
    chat = {**TOOLS_REQUEST, "model": MODEL, "stream": stream}
    async with FakeGateway(provider.url) as gateway:
        reply, body = await post(client, gateway.url + CHAT_PATH, chat,
                                 **{TRANSLATE_HEADER: "bedrock-invoke"})
    exchange = provider.exchanges[-1]
    sent = orjson.loads(exchange.request_body)
    transcript = read(body)

    assert reply.status == 200
    assert exchange.path == (STREAM_PATH if stream else WHOLE_PATH)
    expected = {key: value for key, value in to_messages(chat).items()
                if key not in ("model", "stream")}
    assert sent == {"anthropic_version": "bedrock-2023-05-31", **expected}
    assert transcript.dialect == "openai.chat" and transcript.findings == []
    assert [(call.name, orjson.loads(call.arguments))
            for call in transcript.choices[0].tool_calls] == EXPECTED_CALLS


def test_chunks_are_unwrapped_and_an_exception_is_an_error():
    start = {"type": "message_start", "message": {"id": "msg_1", "model": MODEL, "usage": {}}}
    tool = {"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather"}}
    body = wire.chunk(start) + wire.chunk(tool) + wire.event("chunk", {"bytes": "%%%"})
    payloads = [payload for _, payload in EventStreamFrames().feed(body)]
    throttled = [payload for _, payload in EventStreamFrames().feed(
        wire.exception("throttlingException", "Too many requests"))]

    chunks = through(FromInvoke(), payloads)
    assert [f["function"]["name"] for f in call_starts(chunks)] == ["weather"]
    assert len(chunks) == 2
    assert through(FromInvoke(), throttled) == [
        {"error": {"type": "throttlingException", "message": "Too many requests"}}]
    assert base64.b64decode(payloads[0]["chunk"]["bytes"]) == orjson.dumps(start)


def test_losing_the_second_call_on_a_whole_body():
    body = {"type": "message", "content": [
        {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": arguments}
        for n, (name, arguments) in enumerate(EXPECTED_CALLS)], "stop_reason": "tool_use"}
    completion = TARGETS["bedrock-invoke"].whole(body, lose_second_call=True, model=MODEL)

    names = [call["function"]["name"] for call in completion["choices"][0]["message"]["tool_calls"]]
    assert names == ["weather"]
