"""Synthetic OpenAI Chat Completions captures, large and shaped like real provider streams.

`chat_stream` writes what a provider sends for a long answer: a role chunk, many small text
deltas, then parallel tool calls whose argument fragments interleave round-robin, a finish chunk,
a `choices: []` usage chunk and `data: [DONE]`. Every chunk carries the full envelope (`id`,
`object`, `created`, `model`, `system_fingerprint`, `usage: null`). `as_forwarded` rewrites it the
way a faithful gateway does: null fields dropped, `"type": "function"` on every tool-call fragment,
`created` rewritten, other JSON spacing, raw UTF-8 for `\\u` escapes. The two mean the same thing.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from typing import Any

CHUNK_ID = "chatcmpl-BbR2x7QfZ0kLm3Vn9sT4uW1yA8cD"
MODEL = "gpt-4o-2024-08-06"
FINGERPRINT = "fp_7f6be3efb0"
CREATED = 1764470000

PROSE = (
    "the gateway forwards each chunk as it arrives while the client joins the deltas into one "
    'answer; naïve loggers miss parallel calls — café résumé 東京 ünïcode "quoted" tab\there '
    "back\\slash line\nbreak"
)
WORDS = PROSE.split(" ")
TOOLS = ("read_file", "search_code", "run_tests", "write_file", "get_weather", "query_db")


def _envelope(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict:
    return {
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "system_fingerprint": FINGERPRINT,
        "choices": choices,
        "usage": usage,
    }


def _delta(delta: dict[str, Any], finish_reason: str | None = None) -> dict:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return _envelope([choice])


def _arguments(rng: random.Random, call: int, size: int) -> str:
    """A tool-call argument object of about `size` characters of JSON."""
    words = " ".join(rng.choice(WORDS) for _ in range(size // 6))
    return json.dumps(
        {
            "path": f"src/module_{call}/file_{rng.randrange(1000)}.py",
            "line": rng.randrange(1, 5000),
            "ratio": rng.random(),
            "dry_run": rng.random() < 0.5,
            "tags": [rng.choice(WORDS) for _ in range(4)],
            "content": words,
            "options": {"encoding": "utf-8", "retries": 3, "timeout": None},
        },
        ensure_ascii=rng.random() < 0.5,
    )


def _pieces(rng: random.Random, text: str, low: int, high: int) -> list[str]:
    pieces, start = [], 0
    while start < len(text):
        end = start + rng.randint(low, high)
        pieces.append(text[start:end])
        start = end
    return pieces


def chat_stream(
    *, text_chars: int = 128_000, calls: int = 48, argument_chars: int = 1_600, seed: int = 7
) -> bytes:
    """A provider's stream: long text in token-sized deltas, then `calls` parallel tool calls."""
    rng = random.Random(seed)
    payloads = [_delta({"role": "assistant", "content": ""})]
    text = " ".join(rng.choice(WORDS) for _ in range(text_chars // 6))
    payloads += [_delta({"content": piece}) for piece in _pieces(rng, text, 1, 7)]
    fragments = []
    for call in range(calls):
        start = {
            "index": call,
            "id": f"call_{rng.getrandbits(96):024x}",
            "type": "function",
            "function": {"name": rng.choice(TOOLS), "arguments": ""},
        }
        parts = _pieces(rng, _arguments(rng, call, argument_chars), 2, 9)
        fragments.append(
            [start] + [{"index": call, "function": {"arguments": part}} for part in parts]
        )
    for step in range(max(len(f) for f in fragments)):
        for call_fragments in fragments:
            if step < len(call_fragments):
                payloads.append(_delta({"tool_calls": [call_fragments[step]]}))
    payloads.append(_delta({}, finish_reason="tool_calls"))
    usage = {"prompt_tokens": 1830, "completion_tokens": 61_000, "total_tokens": 62_830}
    payloads.append(_envelope([], usage))
    return _events(json.dumps(p, separators=(",", ":")) for p in payloads)


def as_forwarded(upstream: bytes) -> bytes:
    """The same stream as a faithful gateway re-emits it: same meaning, other bytes."""
    payloads = []
    for line in upstream.split(b"\n"):
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        payload = _drop_nulls(json.loads(line[6:]))
        payload["created"] = CREATED + 1
        for choice in payload["choices"]:
            for fragment in choice["delta"].get("tool_calls", ()):
                fragment["type"] = "function"
        payloads.append(json.dumps(payload, ensure_ascii=False))
    return _events(payloads)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _drop_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_drop_nulls(item) for item in value]
    return value


def _events(payloads: Iterable[str]) -> bytes:
    return "".join([*(f"data: {p}\n\n" for p in payloads), "data: [DONE]\n\n"]).encode()
