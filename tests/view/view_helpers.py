"""Recordings trees written by hand for the view's tests: pair directories in the layout the
proxy writes (bodies, requests, pair.json through the recordings module), with streams from
the Chat Completions builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from calltap import recordings
from calltap.compare import compare_captures
from calltap.report import comparison_json
from calltap.transcript import Capture
from fixtures import chat_stream as chat

DAY = "2026-11-30"
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
               headers: dict[str, str] | None = None, **extra: Any) -> Path:
    """A compared pair as the proxy leaves it: both bodies, the client's request, pair.json."""
    directory = root / day / key
    directory.mkdir(parents=True)
    (directory / "upstream.sse").write_bytes(upstream)
    (directory / "downstream.sse").write_bytes(downstream)
    (directory / "downstream.request").write_bytes(
        b'{"model": "%s", "stream": true, "stream_options": {"include_usage": true}}'
        % model.encode())
    comparison = compare_captures(Capture(upstream, path="/v1/chat/completions"),
                                  Capture(downstream, path="/v1/chat/completions"))
    legs = {side: _leg(side, body, started, headers or {}) for side, body in
            (("downstream", downstream), ("upstream", upstream))}
    legs["downstream"]["request_file"] = "downstream.request"
    document = {"request_id": key, "pairing": "header", "attempts": 1, "legs": legs,
                "comparison": comparison_json(comparison), **extra}
    (directory / recordings.PAIR_JSON).write_bytes(recordings.encode_pair(document))
    return directory


def _leg(side: str, body: bytes, started: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "method": "POST", "path": "/v1/chat/completions", "status": 200,
        "request_headers": {"authorization": "[redacted]", **headers},
        "response_headers": {"content-type": "text/event-stream"},
        "started_at": started, "first_byte_at": started,
        "finished_at": started.replace("50.123", "50.373"),
        "bytes": len(body), "ended": "complete", "file": f"{side}.sse",
    }
