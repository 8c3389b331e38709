"""The fake provider's Anthropic Messages and OpenAI Responses endpoints, and the translation a
translating fake gateway applies to them (the translation laws for every target, Ollama and
Bedrock Converse included).

Each endpoint must look like the real API's documentation, transcribe clean with the calls the
request asked for, give the same request the same bytes, and give the same question the same tool
calls in every dialect. The translation laws are checked without a network: for any set of tools,
a faithful translation compares `equal` and a translator that loses the second call is caught.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.codes import Code
from calltap.compare import compare_captures
from calltap.dialects import transcribe
from calltap.fakes import (
    DEFECT_HEADER,
    FakeGateway,
    bedrock_anthropic,
    bedrock_converse,
    gemini,
    ollama_chat,
)
from calltap.fakes import anthropic_messages as messages
from calltap.fakes import openai_responses as responses
from calltap.fakes.defects import Relay
from calltap.fakes.frames import frames_for
from calltap.fakes.gateway import TRANSLATE_HEADER, serialize
from calltap.fakes.model import answer, sample_arguments
from calltap.fakes.provider import (
    CHAT_PATH,
    CLOCK_TOOL,
    MESSAGES_PATH,
    QUESTION,
    RESPONSES_PATH,
    TOOLS_REQUEST,
    WEATHER_TOOL,
    stream_events,
)
from calltap.fakes.translate import ANTHROPIC_VERSION, LOSE_SECOND_TOOL_USE, TARGETS
from calltap.fakes.translate_request import DEFAULT_MAX_TOKENS
from calltap.sse import parse
from calltap.transcript import Capture, Transcript
from fake_helpers import EXPECTED_CALLS, post

FUNCTIONS = [WEATHER_TOOL["function"], CLOCK_TOOL["function"]]
MESSAGES_REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "messages": QUESTION,
    "tools": [
        {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
        for f in FUNCTIONS
    ],
    "stream": True,
}
RESPONSES_REQUEST: dict[str, Any] = {
    "model": "gpt-4.1",
    "input": QUESTION[0]["content"],
    "tools": [
        {
            "type": "function",
            "name": f["name"],
            "description": f["description"],
            "parameters": f["parameters"],
        }
        for f in FUNCTIONS
    ],
    "stream": True,
}
REQUESTS = {MESSAGES_PATH: MESSAGES_REQUEST, RESPONSES_PATH: RESPONSES_REQUEST}
DIALECT_NAMES = {MESSAGES_PATH: "anthropic.messages", RESPONSES_PATH: "openai.responses"}
ANTHROPIC_HEADERS = {"x-api-key": "sk-ant-test-key", "anthropic-version": "2023-06-01"}


def read(body: bytes, path: str) -> Transcript:
    return transcribe(Capture(body, path, status=200))


def calls(transcript: Transcript) -> list[tuple[str, Any]]:
    return [(c.name, orjson.loads(c.arguments)) for c in transcript.choices[0].tool_calls]


def events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Each event's `event:` type and decoded payload; asserts the body is whole SSE."""
    parsed, incomplete = parse(body)
    assert incomplete is None
    return [(event.type, orjson.loads(event.data)) for event in parsed]


# Both endpoints


@pytest.mark.parametrize("path", [MESSAGES_PATH, RESPONSES_PATH])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_each_endpoint_answers_both_tools_and_transcribes_clean(
    provider, client, path, stream
):
    reply, body = await post(client, provider.url + path, {**REQUESTS[path], "stream": stream})
    transcript = read(body, path)
    assert reply.status == 200
    assert reply.content_type == ("text/event-stream" if stream else "application/json")
    assert (transcript.dialect, transcript.streaming) == (DIALECT_NAMES[path], stream)
    assert transcript.findings == []
    assert calls(transcript) == EXPECTED_CALLS
    assert transcript.choices[0].finish_reason == "tool_calls"
    assert transcript.terminal_seen is stream
    assert transcript.usage is not None and transcript.usage.prompt_tokens > 0
    assert provider.exchanges[-1].path == path


@pytest.mark.parametrize("path", [MESSAGES_PATH, RESPONSES_PATH])
async def test_each_endpoint_gives_the_same_request_the_same_bytes(provider, client, path):
    _, first = await post(client, provider.url + path, REQUESTS[path])
    _, second = await post(client, provider.url + path, REQUESTS[path])
    _, other = await post(client, provider.url + path, {**REQUESTS[path], "model": "other"})
    assert first == second
    assert first != other
    assert calls(read(other, path)) == EXPECTED_CALLS


async def test_the_same_question_gets_the_same_calls_in_every_dialect(provider, client):
    chat = {"messages": QUESTION, "tools": [WEATHER_TOOL, CLOCK_TOOL], "stream": True}
    answers = {CHAT_PATH: chat, **REQUESTS}
    found = {}
    for path, request in answers.items():
        _, body = await post(client, provider.url + path, request)
        found[path] = calls(read(body, path))
    assert found == dict.fromkeys(answers, EXPECTED_CALLS)


@pytest.mark.parametrize("path", [MESSAGES_PATH, RESPONSES_PATH])
async def test_a_text_answer_ends_with_stop_or_with_length_under_a_small_limit(
    provider, client, path
):
    limit = "max_tokens" if path == MESSAGES_PATH else "max_output_tokens"
    plain = {key: value for key, value in REQUESTS[path].items() if key != "tools"}
    _, whole = await post(client, provider.url + path, plain)
    _, cut = await post(client, provider.url + path, {**plain, limit: 3})
    whole_choice, cut_choice = read(whole, path).choices[0], read(cut, path).choices[0]
    assert (whole_choice.finish_reason, len(whole_choice.text.split())) == ("stop", 8)
    assert (cut_choice.finish_reason, len(cut_choice.text.split())) == ("length", 3)
    assert whole_choice.tool_calls == cut_choice.tool_calls == []


@pytest.mark.parametrize(
    ("path", "request_", "message"),
    [
        (MESSAGES_PATH, {"messages": QUESTION}, "max_tokens: Field required"),
        (RESPONSES_PATH, {"model": "gpt-4.1"}, "Missing required parameter: 'input'."),
    ],
)
async def test_a_request_the_real_api_rejects_is_a_400_in_its_shape(
    provider, client, path, request_, message
):
    reply, body = await post(client, provider.url + path, request_)
    error = orjson.loads(body)
    assert reply.status == 400
    assert error["error"]["message"] == message
    assert error["error"]["type"] == "invalid_request_error"
    assert ("type" in error) is (path == MESSAGES_PATH)


# Anthropic Messages


async def test_messages_stream_looks_like_anthropics(provider, client):
    _, body = await post(
        client, provider.url + MESSAGES_PATH, MESSAGES_REQUEST, **ANTHROPIC_HEADERS
    )
    stream = events(body)
    assert all(kind == payload["type"] for kind, payload in stream)
    payloads = [payload for _, payload in stream]
    start = payloads[0]["message"]
    assert start["id"].startswith("msg_")
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] > 0
    assert payloads[1]["content_block"] == {"type": "text", "text": ""}
    assert payloads[2] == {"type": "ping"}
    blocks = [p for p in payloads if p["type"] == "content_block_start"]
    assert [p["index"] for p in blocks] == [0, 1, 2]
    tool_starts = [p["content_block"] for p in blocks[1:]]
    assert [(b["type"], b["name"], b["input"]) for b in tool_starts] == [
        ("tool_use", "weather", {}),
        ("tool_use", "clock", {}),
    ]
    assert all(b["id"].startswith("toolu_") for b in tool_starts)
    for index in (1, 2):
        deltas = [
            p["delta"]
            for p in payloads
            if p["type"] == "content_block_delta" and p["index"] == index
        ]
        assert deltas[0] == {"type": "input_json_delta", "partial_json": ""}
        assert len(deltas) > 2
    stops = [p["index"] for p in payloads if p["type"] == "content_block_stop"]
    assert stops == [0, 1, 2]
    assert payloads[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert payloads[-2]["usage"]["output_tokens"] > 1
    assert payloads[-1] == {"type": "message_stop"}
    exchange = provider.exchanges[-1]
    assert exchange.request_headers["x-api-key"] == ANTHROPIC_HEADERS["x-api-key"]
    assert exchange.request_headers["anthropic-version"] == "2023-06-01"


async def test_messages_json_body_holds_text_then_tool_use_blocks(provider, client):
    _, body = await post(
        client, provider.url + MESSAGES_PATH, {**MESSAGES_REQUEST, "stream": False}
    )
    message = orjson.loads(body)
    assert (message["type"], message["role"], message["stop_reason"]) == (
        "message",
        "assistant",
        "tool_use",
    )
    assert [block["type"] for block in message["content"]] == ["text", "tool_use", "tool_use"]
    assert [(b["name"], b["input"]) for b in message["content"][1:]] == EXPECTED_CALLS


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "clock"}])
async def test_messages_forced_tool_choice_calls_at_once_without_text(provider, client, choice):
    request = {**MESSAGES_REQUEST, "tool_choice": choice}
    _, body = await post(client, provider.url + MESSAGES_PATH, request)
    transcript = read(body, MESSAGES_PATH)
    expected = EXPECTED_CALLS if choice["type"] == "any" else EXPECTED_CALLS[1:]
    assert calls(transcript) == expected
    assert transcript.choices[0].text == ""
    assert transcript.choices[0].tool_calls[0].index == 0


async def test_messages_stop_sequences_end_with_stop_sequence(provider, client):
    plain = {key: value for key, value in MESSAGES_REQUEST.items() if key != "tools"}
    request = {**plain, "stop_sequences": ["\n\n"]}
    _, body = await post(client, provider.url + MESSAGES_PATH, request)
    delta = [payload for _, payload in events(body)][-2]["delta"]
    assert delta == {"stop_reason": "stop_sequence", "stop_sequence": "\n\n"}
    assert read(body, MESSAGES_PATH).choices[0].finish_reason == "stop"


# OpenAI Responses


async def test_responses_stream_looks_like_openais(provider, client):
    _, body = await post(client, provider.url + RESPONSES_PATH, RESPONSES_REQUEST)
    stream = events(body)
    assert all(kind == payload["type"] for kind, payload in stream)
    payloads = [payload for _, payload in stream]
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    assert [p["type"] for p in payloads[:2]] == ["response.created", "response.in_progress"]
    added = [p for p in payloads if p["type"] == "response.output_item.added"]
    assert [(p["output_index"], p["item"]["type"], p["item"]["name"]) for p in added] == [
        (0, "function_call", "weather"),
        (1, "function_call", "clock"),
    ]
    assert all(p["item"]["arguments"] == "" for p in added)
    assert all(p["item"]["call_id"].startswith("call_") for p in added)
    for item in added:
        deltas = [
            p
            for p in payloads
            if p["type"] == "response.function_call_arguments.delta"
            and p["output_index"] == item["output_index"]
        ]
        assert {p["item_id"] for p in deltas} == {item["item"]["id"]}
        (done,) = [
            p
            for p in payloads
            if p["type"] == "response.function_call_arguments.done"
            and p["item_id"] == item["item"]["id"]
        ]
        assert done["arguments"] == "".join(p["delta"] for p in deltas)
    final = payloads[-1]
    assert final["type"] == "response.completed"
    assert final["response"]["status"] == "completed"
    assert [item["name"] for item in final["response"]["output"]] == ["weather", "clock"]
    assert final["response"]["usage"]["total_tokens"] > 0
    assert b"[DONE]" not in body


async def test_responses_json_body_is_the_final_response(provider, client):
    _, body = await post(
        client, provider.url + RESPONSES_PATH, {**RESPONSES_REQUEST, "stream": False}
    )
    _, streamed = await post(client, provider.url + RESPONSES_PATH, RESPONSES_REQUEST)
    response = orjson.loads(body)
    final = [payload for _, payload in events(streamed)][-1]["response"]
    assert (response["object"], response["status"]) == ("response", "completed")

    def meaning(output: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(i["type"], i["status"], i["name"], i["arguments"]) for i in output]

    assert meaning(response["output"]) == meaning(final["output"])


# The laws, without a network

TOOL_NAMES = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True)
PROPERTIES = st.dictionaries(
    st.sampled_from(["city", "zone", "unit", "query", "count", "exact", "limit", "tags"]),
    st.sampled_from(
        [
            {"type": "string"},
            {"type": "integer"},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "array"},
            {"type": "string", "enum": ["metric", "imperial"]},
        ]
    ),
    max_size=4,
)
TOOLS = st.lists(
    st.tuples(TOOL_NAMES, PROPERTIES), min_size=1, max_size=4, unique_by=lambda tool: tool[0]
)


def chat_request(tools: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "messages": QUESTION,
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "parameters": {"type": "object", "properties": props},
                },
            }
            for name, props in tools
        ],
    }


PROVIDER_DIALECTS = {
    "anthropic": (messages, "text/event-stream"),
    "responses": (responses, "text/event-stream"),
    "ollama": (ollama_chat, ollama_chat.MEDIA_TYPE),
    "converse": (bedrock_converse, bedrock_converse.MEDIA_TYPE),
    "gemini": (gemini, "text/event-stream"),
    "bedrock-invoke": (bedrock_anthropic, bedrock_anthropic.MEDIA_TYPE),
}
"""Each target's rendering module in the fake provider, and the media type of its streams."""


def provider_stream(target: str, chat: dict[str, Any]) -> tuple[bytes, str]:
    """What the fake provider streams for a chat request translated for `target`, and its path."""
    translated = TARGETS[target].request(chat)
    module, _ = PROVIDER_DIALECTS[target]
    path = TARGETS[target].path(chat)
    view = {**module.chat_view(translated), "query": dict(parse_qsl(urlsplit(path).query))}
    reply = answer(orjson.dumps(translated), view, text_events=8)
    return b"".join(module.stream_events(reply, view)), path


def translated(body: bytes, relay: Relay, target: str) -> bytes:
    """A provider stream through a translation, as the gateway serializes it."""
    frames = frames_for(PROVIDER_DIALECTS[target][1])
    assert frames is not None
    payloads = [out for _, payload in frames.feed(body) for out in relay.feed(payload)]
    return b"".join(serialize("message", payload) for payload in payloads + relay.end())


@examples(40, deadline=None)
@given(TOOLS, st.sampled_from(sorted(TARGETS)))
def test_any_tools_get_the_same_calls_in_every_dialect_and_translate_equal(tools, target):
    chat = chat_request(tools)
    chat_body = orjson.dumps(chat)
    chat_stream = b"".join(
        stream_events(answer(chat_body, chat, text_events=8), include_usage=True)
    )
    upstream, path = provider_stream(target, chat)
    downstream = translated(upstream, TARGETS[target].stream(), target)
    expected = [(name, sample_arguments({"properties": props})) for name, props in tools]

    assert calls(read(chat_stream, CHAT_PATH)) == expected
    assert calls(read(upstream, path)) == expected
    comparison = compare_captures(Capture(upstream, path, status=200), Capture(downstream))
    assert comparison.downstream.dialect == "openai.chat"
    assert comparison.verdict == "equal"
    assert {f.code for f in comparison.findings} <= {Code.TOOL_CALL_IDS_REMAPPED}
    assert calls(comparison.downstream) == expected
    assert [call.index for call in comparison.downstream.choices[0].tool_calls] == list(
        range(len(tools))
    )


@examples(30, deadline=None)
@given(TOOLS.filter(lambda tools: len(tools) >= 2), st.sampled_from(sorted(TARGETS)))
def test_a_translator_losing_the_second_call_is_always_caught(tools, target):
    upstream, path = provider_stream(target, chat_request(tools))
    downstream = translated(upstream, TARGETS[target].stream(lose_second_call=True), target)
    comparison = compare_captures(Capture(upstream, path, status=200), Capture(downstream))
    dropped = [f for f in comparison.findings if f.code is Code.TOOL_CALLS_DROPPED]
    assert comparison.verdict == "diverged"
    assert [f.count for f in dropped] == [1]
    assert [c.name for c in comparison.downstream.choices[0].tool_calls] == [
        name for k, (name, _) in enumerate(tools) if k != 1
    ]


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_translated_stream_looks_like_litellms(target):
    upstream, _ = provider_stream(target, chat_request([("weather", {"city": {"type": "string"}})]))
    downstream = translated(upstream, TARGETS[target].stream(), target)
    chunks = [event.data for event in parse(downstream)[0]]
    assert chunks[-1] == "[DONE]"
    decoded = [orjson.loads(chunk) for chunk in chunks[:-1]]
    assert len({chunk["id"] for chunk in decoded}) == 1
    assert decoded[0]["id"].startswith("chatcmpl-")
    assert decoded[0]["choices"][0]["delta"]["role"] == "assistant"
    assert decoded[-2]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    assert decoded[-1]["choices"] == [{"index": 0, "delta": {}}]
    assert decoded[-1]["usage"]["total_tokens"] > 0
    assert b"event:" not in downstream


# The translating gateway's own answers


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({TRANSLATE_HEADER: "no-such-dialect"}, "unknown X-Fake-Gateway-Translate: 'no-such"),
        (
            {DEFECT_HEADER: LOSE_SECOND_TOOL_USE.name},
            "'lose-second-tool-use' needs X-Fake-Gateway-Translate",
        ),
    ],
    ids=["unknown-target", "translation-defect-alone"],
)
async def test_the_gateway_rejects_a_translation_it_cannot_make_without_calling_upstream(
    provider, client, headers, message
):
    async with FakeGateway(provider.url) as gateway:
        reply, body = await post(client, gateway.url + CHAT_PATH, TOOLS_REQUEST, **headers)
    assert reply.status == 400
    assert message in orjson.loads(body)["error"]["message"]
    assert provider.requests_received == 0


@pytest.mark.parametrize("target", ["anthropic", "responses"])
async def test_the_gateway_sends_the_translated_request_and_keeps_the_header_to_itself(
    provider, client, target
):
    headers = {TRANSLATE_HEADER: target, "Authorization": "Bearer sk-client", "X-Request-ID": "r1"}
    async with FakeGateway(provider.url) as gateway:
        await post(client, gateway.url + CHAT_PATH, TOOLS_REQUEST, **headers)
    exchange = provider.exchanges[-1]
    sent = orjson.loads(exchange.request_body)
    assert exchange.path == TARGETS[target].path(TOOLS_REQUEST)
    assert sent == TARGETS[target].request(TOOLS_REQUEST)
    assert TRANSLATE_HEADER not in exchange.request_headers
    assert exchange.request_id == "r1"
    if target == "anthropic":
        assert sent["max_tokens"] == DEFAULT_MAX_TOKENS
        assert [tool["name"] for tool in sent["tools"]] == ["weather", "clock"]
        assert exchange.request_headers["x-api-key"] == "sk-client"
        assert exchange.request_headers["anthropic-version"] == ANTHROPIC_VERSION
        assert "Authorization" not in exchange.request_headers
    else:
        assert sent["input"][0]["content"] == [
            {"type": "input_text", "text": QUESTION[0]["content"]}
        ]
        assert exchange.request_headers["Authorization"] == "Bearer sk-client"
