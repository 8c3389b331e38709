"""Recordings trees written by hand for the view's tests: pair directories in the layout the
proxy writes (bodies, requests, pair.json through the recordings module), with streams from
the Chat Completions builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from calltap import recordings
from calltap.compare import compare_captures
from calltap.compare_pair import with_requests
from calltap.compare_requests import PairRequests, RecordedRequest
from calltap.report import comparison_json
from calltap.transcript import Capture
from fixtures import chat_stream as chat

DAY = "2026-11-30"
CHAT = "/v1/chat/completions"
WEATHER = ("weather", '{"city": "Taipei"}')
CLOCK = ("clock", '{"zone": "UTC"}')
HOSTILE_TEXT = (
    '<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> '
    '<a href="javascript:window.__pwned = 3">click</a> [docs](javascript:alert(1))'
)
HOSTILE_NAME = "<script>window.__pwned=4</script>"
HOSTILE_ARGUMENTS = (
    '{"html": "<img src=x onerror=\\"window.__pwned = 5\\">", "url": "javascript:alert(1)"}')


def two_calls(*, keep: int = 2, text: str = "", names: tuple[tuple[str, str], ...] = (
        WEATHER, CLOCK)) -> bytes:
    """A stream of text then the first `keep` of two parallel calls, finish `tool_calls`."""
    calls = names[:keep]
    return chat.tool_call_stream(
        calls, ids=[f"call_{n}" for n in range(len(calls))], indexes=list(range(len(calls))),
        cuts=[(5, 11)] * len(calls), text_parts=[text] if text else [])


def write_pair(root: Path, key: str, upstream: bytes, downstream: bytes, *, day: str = DAY,
               started: str = "2026-11-30T04:11:50.123000Z", model: str = "gpt-4o",
               headers: dict[str, str] | None = None,
               requests: tuple[dict[str, Any], dict[str, Any]] | None = None,
               **extra: Any) -> Path:
    """A compared pair as the proxy leaves it: both bodies, the client's request, pair.json.
    With `requests` (the client's, then the provider's), both requests are written and
    compared into pair.json's comparison, as the proxy compares them."""
    directory = root / day / key
    directory.mkdir(parents=True)
    (directory / "upstream.sse").write_bytes(upstream)
    (directory / "downstream.sse").write_bytes(downstream)
    (directory / "downstream.request").write_bytes(
        b'{"model": "%s", "stream": true, "stream_options": {"include_usage": true}}'
        % model.encode() if requests is None else orjson.dumps(requests[0]))
    legs = {side: _leg(side, body, started, headers or {}) for side, body in
            (("downstream", downstream), ("upstream", upstream))}
    legs["downstream"]["request_file"] = "downstream.request"
    if requests is not None:
        (directory / "upstream.request").write_bytes(orjson.dumps(requests[1]))
        legs["upstream"]["request_file"] = "upstream.request"
    comparison = with_requests(
        compare_captures(Capture(upstream, path=CHAT), Capture(downstream, path=CHAT)),
        None if requests is None else PairRequests(
            *(RecordedRequest(orjson.dumps(body), CHAT) for body in requests)))
    document = {"request_id": key, "pairing": "header", "attempts": 1, "legs": legs,
                "comparison": comparison_json(comparison), **extra}
    (directory / recordings.PAIR_JSON).write_bytes(recordings.encode_pair(document))
    return directory


def _leg(side: str, body: bytes, started: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "method": "POST", "path": CHAT, "status": 200,
        "request_headers": {"authorization": "[redacted]", **headers},
        "response_headers": {"content-type": "text/event-stream"},
        "started_at": started, "first_byte_at": started,
        "finished_at": started.replace("50.123", "50.373"),
        "bytes": len(body), "ended": "complete", "file": f"{side}.sse",
    }


def tool(name: str, description: str = "") -> dict[str, Any]:
    """A Chat Completions function tool taking one required string, `city`."""
    return {"type": "function", "function": {
        "name": name, "description": description or f"the {name}", "strict": True,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"], "additionalProperties": False}}}


def chat_request(tools: list[dict[str, Any]], *, text: str = "What is the weather?",
                 instructions: str = "Answer briefly.") -> dict[str, Any]:
    """A Chat Completions request offering `tools`, with instructions, an earlier tool call and
    its result in its history, then the user's question."""
    return {
        "model": "gpt-4o", "stream": True, "tool_choice": "auto", "parallel_tool_calls": True,
        "temperature": 0,
        "tools": tools,
        "messages": [
            {"role": "system", "content": instructions},
            {"role": "user", "content": "Where am I?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_where", "type": "function",
                 "function": {"name": "locate", "arguments": '{"precise": true}'}}]},
            {"role": "tool", "tool_call_id": "call_where", "content": "Taipei"},
            {"role": "user", "content": text},
        ],
    }


def asked_pair(root: Path, key: str = "asked", *, dropped: str = "clock",
               text: str = "What is the weather?", instructions: str = "Answer briefly.") -> Path:
    """Equal answers; the client offered weather and `dropped`, the provider only weather."""
    client = chat_request([tool("weather"), tool(dropped)], text=text,
                          instructions=instructions)
    provider = chat_request([tool("weather")], text=text, instructions=instructions)
    return write_pair(root, key, two_calls(), two_calls(), requests=(client, provider))
