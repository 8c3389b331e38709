"""Hostile response streams from the provider, through both listeners and the gateway: each is
relayed byte-identical, recorded on both legs, compared without crashing (the verdict and codes
below are what the comparator must say), and the next request is relayed and compared as usual.
"""

from __future__ import annotations

import hashlib
from typing import Any

import aiohttp
import orjson
import pytest
from tests.proxy.conftest import *  # noqa: F403  (its fixtures: provider, gateway, ...)
from tests.proxy.conftest import post_chat

DEEP = 100_000
ENVELOPE = {"id": "chatcmpl-h", "object": "chat.completion.chunk", "created": 1, "model": "m"}
DONE = b"data: [DONE]\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + orjson.dumps({**ENVELOPE, "choices": [choice]}) + b"\n\n"


def text_stream(first: bytes) -> bytes:
    """`first` as the first event, then a clean stop and [DONE]."""
    return first + chunk({}, "stop") + DONE


def call_stream(arguments: bytes) -> bytes:
    """One tool call whose whole argument text is `arguments`, then finish and [DONE]."""
    call = {"index": 0, "id": "call_h", "type": "function",
            "function": {"name": "lookup", "arguments": arguments.decode()}}
    return chunk({"tool_calls": [call]}) + chunk({}, "tool_calls") + DONE


def content_chunk(raw_text: bytes) -> bytes:
    """A content delta whose JSON string holds `raw_text` unescaped."""
    return chunk({"content": "PLACEHOLDER"}).replace(b"PLACEHOLDER", raw_text)


STREAMS: dict[str, tuple[bytes, str, set[str]]] = {
    "invalid UTF-8 in a content string": (
        text_stream(content_chunk(b"caf\xc3 \xff\xfe")), "equal", set()),
    "NUL bytes in a data payload": (
        text_stream(content_chunk(b"a\x00b")), "inconclusive", {"JSON_INVALID"}),
    "3 MiB without a blank line": (
        b"data: " + b"x" * (3 << 20) + b"\n", "inconclusive",
        {"JSON_INVALID", "SSE_INCOMPLETE_EVENT"}),
    "only comments": (b": keep-alive\n\n" * 5000, "equal", set()),
    "a 16 MiB data line": (text_stream(chunk({"content": "y" * (16 << 20)})), "equal", set()),
    "JSON nested 100 000 deep in a chunk": (
        text_stream(b'data: {"id":"c","choices":[{"index":0,"delta":{},"x":'
                    + b"[" * DEEP + b"]" * DEEP + b"}]}\n\n"),
        "inconclusive", {"JSON_INVALID"}),
    "arguments nested 100 000 deep": (
        call_stream(b'{"a":' * DEEP + b"1" + b"}" * DEEP), "equal", set()),
    "a 10 000-digit number in arguments": (
        call_stream(b'{"n":' + b"7" * 10_000 + b"}"), "inconclusive",
        {"UNSAFE_INTEGER", "NON_FINITE_NUMBER"}),
    "a 10 000-digit number in a chunk": (
        text_stream(chunk({"content": "x"}).replace(b'"created":1', b'"created":' + b"9" * 10_000)),
        "inconclusive", {"UNSAFE_INTEGER", "NON_FINITE_NUMBER"}),
    "duplicate keys in arguments": (
        call_stream(b'{"city":"Paris","city":"Lyon"}'), "inconclusive", {"DUPLICATE_KEY"}),
}
SIDE_FINDINGS = {
    "only comments": {"DONE_MISSING"},
    "arguments nested 100 000 deep": {"TOOL_ARGUMENTS_INVALID"},
}
"""Defects both sides share: reported per side, not a divergence."""


@pytest.mark.parametrize("name", list(STREAMS))
async def test_hostile_stream_is_relayed_recorded_and_compared(
    topology: dict[str, Any], client: aiohttp.ClientSession, tally: Any, name: str,
) -> None:
    tap, provider_script = topology["tap"], topology["provider"]
    body, verdict, codes = STREAMS[name]
    ordinary = provider_script.body
    provider_script.body = body
    provider_script.chunk_size = 64 * 1024
    status, headers, received = await post_chat(client, tap.front_url)
    assert status == 200
    assert hashlib.sha256(received).digest() == hashlib.sha256(body).digest()
    pair = await tap.wait_compared(headers["X-Request-ID"], timeout=60)
    comparison = pair["comparison"]
    assert comparison["verdict"] == verdict
    assert {f["code"] for f in comparison["findings"]} == codes
    for side in ("upstream", "downstream"):
        shared = {f["code"] for f in comparison[side]["findings"]}
        assert SIDE_FINDINGS.get(name, set()) <= shared
    directory = next(tap.recordings.glob(f"*/{pair['request_id']}"))
    lost = 0
    for side in ("upstream", "downstream"):
        recorded = (directory / f"{side}.sse").read_bytes()
        lost += abs(len(body) - len(recorded))
        assert recorded == body
        assert pair["legs"][side]["ended"] == "complete"
    provider_script.body = ordinary
    status, headers, received = await post_chat(client, tap.front_url)
    assert status == 200 and received == ordinary
    after = await tap.wait_compared(headers["X-Request-ID"])
    assert after["comparison"]["verdict"] == "equal"
    tally.streams(2)
    tally.bytes_lost(lost)
    tally.hostile(f"provider stream: {name}")
