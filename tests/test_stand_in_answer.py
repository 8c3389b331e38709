"""Structured output carried as a forced tool, on the answers' side: the provider's call of the
stand-in is the client's structured text (LiteLLM's `json_tool_call` for Anthropic and Bedrock:
`litellm/llms/anthropic/chat/transformation.py` adds the tool and forces it, and hands the client
the call's input as the message content with `finish_reason: "stop"`)."""

from __future__ import annotations

import orjson

from calltap.compare import compare_captures
from calltap.compare_pair import with_requests
from calltap.compare_requests import PairRequests, RecordedRequest
from calltap.transcript import Capture

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
CLIENT_REQUEST = {
    "model": "claude", "stream": True,
    "messages": [{"role": "user", "content": "Where?"}],
    "response_format": {"type": "json_schema",
                        "json_schema": {"name": "place", "schema": SCHEMA, "strict": True}},
}
PROVIDER_REQUEST = {
    "model": "claude-3-5-sonnet", "max_tokens": 4096, "stream": True,
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Where?"}]}],
    "tools": [{"name": "json_tool_call", "input_schema": SCHEMA}],
    "tool_choice": {"type": "tool", "name": "json_tool_call"},
}


def anthropic_answer(arguments: str) -> bytes:
    """A Messages stream answering with one call of the stand-in."""
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": "claude-3-5-sonnet", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "json_tool_call", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": arguments}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                           "usage": {"output_tokens": 9}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
                    for name, data in events)


def chat_answer(content: str, finish: str = "stop") -> bytes:
    chunks = [
        {"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": content}}]},
        {"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {}, "finish_reason": finish}]},
    ]
    return b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks) + (
        b"data: [DONE]\n\n")


def compared(upstream: bytes, downstream: bytes, provider_request: dict) -> list[str]:
    comparison = compare_captures(Capture(upstream, path="/v1/messages"),
                                  Capture(downstream, path="/v1/chat/completions"),
                                  downstream_request=orjson.dumps(CLIENT_REQUEST))
    requests = PairRequests(
        RecordedRequest(orjson.dumps(CLIENT_REQUEST), "/v1/chat/completions"),
        RecordedRequest(orjson.dumps(provider_request), "/v1/messages"))
    return [str(f.code) for f in with_requests(comparison, requests).findings
            if f.severity in ("fatal", "negotiable")]


def test_the_stand_in_call_is_the_clients_structured_text() -> None:
    upstream = anthropic_answer('{"city": "Taipei"}')
    assert compared(upstream, chat_answer('{"city":"Taipei"}'), PROVIDER_REQUEST) == []


def test_a_structured_text_changed_on_the_way_is_still_found() -> None:
    upstream = anthropic_answer('{"city": "Taipei"}')
    assert compared(upstream, chat_answer('{"city":"Tokyo"}'), PROVIDER_REQUEST) == [
        "TEXT_CHANGED"]


def test_without_the_stand_in_in_the_request_the_call_is_a_call() -> None:
    """A provider asked with an ordinary forced tool: its call reaching the client as text is a
    call dropped, whatever the text says."""
    ordinary = {**PROVIDER_REQUEST, "tools": [{"name": "json_tool_call", "input_schema": {
        "type": "object", "properties": {"town": {"type": "string"}}}}]}
    codes = compared(anthropic_answer('{"city": "Taipei"}'), chat_answer('{"city":"Taipei"}'),
                     ordinary)
    assert "TOOL_CALLS_DROPPED" in codes and "TEXT_CHANGED" in codes
