"""A gateway that takes an `index` out of what it relays is logged live, one `divergence` line per
defect: CHOICE_INDEX_MISSING (a choice without index, Portkey's last chunk after a provider
error) and DELTA_LIST_INDEX_MISSING (a recurring list of objects without index, LiteLLM's
`thinking_blocks`). The provider's stream is clean; the scripted gateway rewrites its bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.proxy.conftest import post_chat

ENVELOPE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764470000,
            "model": "claude-sonnet-4-20250514"}


def stream(*choices: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps({**ENVELOPE, "choices": [choice]},
                                            separators=(",", ":")).encode() + b"\n\n"
                    for choice in choices) + b"data: [DONE]\n\n"


def thinking(text: str) -> dict[str, Any]:
    return {"index": 0, "delta": {"thinking_blocks": [
        {"index": 0, "type": "thinking", "thinking": text}]}}


CLEAN = stream(
    {"index": 0, "delta": {"role": "assistant", "content": ""}},
    thinking("The user"), thinking(" greets."),
    {"index": 0, "delta": {"content": "Hello"}},
    {"index": 0, "finish_reason": "stop", "delta": {}},
)
CASES = {
    "CHOICE_INDEX_MISSING": (b'{"index":0,"finish_reason"', b'{"finish_reason"'),
    "DELTA_LIST_INDEX_MISSING": (b'{"index":0,"type":"thinking"', b'{"type":"thinking"'),
}


@pytest.mark.parametrize("code", list(CASES))
async def test_an_index_the_gateway_took_out_is_a_live_divergence_line(
        code: str, topology: dict[str, Any], client, log) -> None:
    tap, provider, gateway = topology["tap"], topology["provider"], topology["gateway"]
    provider.body, provider.chunk_size = CLEAN, len(CLEAN)
    gateway.replace = CASES[code]
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200
    assert body == CLEAN.replace(*CASES[code]) != CLEAN
    key = headers["X-Request-ID"]
    pair = await tap.wait_compared(key)
    comparison = pair["comparison"]
    assert comparison["upstream"]["findings"] == []
    assert [f["code"] for f in comparison["findings"]] == [code]
    (divergence,) = log.lines("divergence", key)
    assert (divergence["code"], divergence["severity"]) == (code, "fatal")
    assert divergence["capture"].endswith(key)
    assert log.lines("pair.compared", key)[0]["codes"] == [code]
