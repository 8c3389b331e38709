"""End to end through a translating gateway: the client speaks Chat Completions, the provider
Anthropic Messages, OpenAI Responses, Ollama (NDJSON) or Bedrock Converse (AWS event stream).

client -> calltap front -> fake gateway (X-Fake-Gateway-Translate) -> calltap back -> fake provider

A faithful translation must compare `equal` across dialects; a translator that loses a tool call
must be caught; and when the gateway forwards no header at all, the legs must still pair by the
content fingerprint, distinct requests each with its own, identical ones in arrival order.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from calltap.codes import Code
from calltap.fakes import DEFECT_HEADER
from calltap.fakes.gateway import TRANSLATE_HEADER
from calltap.fakes.provider import CHAT_PATH, TOOLS_REQUEST
from calltap.fakes.translate import LOSE_SECOND_TOOL_USE, TARGETS

UPSTREAM = {
    "anthropic": "anthropic.messages",
    "responses": "openai.responses",
    "ollama": "ollama.chat",
    "converse": "bedrock.converse",
    "gemini": "google.gemini",
    "bedrock-invoke": "anthropic.messages",
}
"""The dialect calltap must read on the provider's side of each translation."""


def route(path: str) -> str:
    """A request path as pair.json records it: without its query (Gemini's `?alt=sse`)."""
    return path.split("?", 1)[0]


@dataclass
class Translated:
    """One request through the translating gateway and what calltap recorded for it."""

    request_id: str
    body: bytes
    pair: dict[str, Any]
    directory: Path

    @property
    def comparison(self) -> dict[str, Any]:
        return self.pair["comparison"]

    @property
    def codes(self) -> set[str]:
        return {finding["code"] for finding in self.comparison["findings"]}

    def request(self, leg: str) -> dict[str, Any]:
        return orjson.loads((self.directory / f"{leg}.request").read_bytes())


async def send(
    topology, request: dict[str, Any], target: str, defect: str | None = None
) -> Translated:
    """POST a chat request through calltap's front, asking the gateway to translate it."""
    headers = {"Content-Type": "application/json", TRANSLATE_HEADER: target}
    if defect is not None:
        headers[DEFECT_HEADER] = defect
    url = f"{topology.calltap.front_url}{CHAT_PATH}"
    async with topology.client.post(url, data=orjson.dumps(request), headers=headers) as reply:
        assert reply.status == 200
        body = await reply.read()
        key = reply.headers["X-Request-ID"]
    pair = await topology.calltap.wait_compared(key)
    (directory,) = topology.calltap.recordings.glob(f"*/{key}")
    return Translated(key, body, pair, directory)


def question(n: int) -> dict[str, Any]:
    return {**TOOLS_REQUEST, "messages": [{"role": "user", "content": f"Question {n}: weather?"}]}


def last_user_text(request: dict[str, Any]) -> str:
    """The last user message's text in a Chat, Messages, Responses, Ollama, Converse or Gemini
    request."""
    last = (request.get("messages") or request.get("input") or request.get("contents"))[-1]
    assert last["role"] == "user"
    content = last.get("content", last.get("parts"))
    return content if isinstance(content, str) else content[0]["text"]


@pytest.mark.parametrize("target", sorted(UPSTREAM))
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_a_faithful_translation_compares_equal_across_dialects(topology, target, stream):
    request = {**TOOLS_REQUEST, "stream": stream}
    sent = await send(topology, request, target)
    comparison = sent.comparison

    assert comparison["verdict"] == "equal"
    assert comparison["upstream"]["dialect"] == UPSTREAM[target]
    assert comparison["downstream"]["dialect"] == "openai.chat"
    assert comparison["upstream"]["tool_calls"] == comparison["downstream"]["tool_calls"] == 2
    assert sent.codes <= {Code.TOOL_CALL_IDS_REMAPPED}
    assert sent.pair["pairing"] == "header"
    assert sent.pair["legs"]["upstream"]["path"] == route(TARGETS[target].path(request))
    assert sent.pair["legs"]["downstream"]["path"] == CHAT_PATH
    assert sent.body.endswith(b"data: [DONE]\n\n") is stream
    assert TRANSLATE_HEADER.lower() not in {
        name.lower() for name in sent.pair["legs"]["upstream"]["request_headers"]
    }


@pytest.mark.parametrize("target", sorted(UPSTREAM))
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_a_translator_losing_the_second_tool_call_is_tool_calls_dropped(
    topology, target, stream
):
    request = {**TOOLS_REQUEST, "stream": stream}
    sent = await send(topology, request, target, LOSE_SECOND_TOOL_USE.name)
    dropped = [f for f in sent.comparison["findings"] if f["code"] == Code.TOOL_CALLS_DROPPED]

    assert sent.comparison["verdict"] == LOSE_SECOND_TOOL_USE.verdict == "diverged"
    assert LOSE_SECOND_TOOL_USE.codes <= sent.codes
    assert [finding["count"] for finding in dropped] == [1]
    assert sent.comparison["upstream"]["dialect"] == UPSTREAM[target]
    assert sent.comparison["upstream"]["tool_calls"] == 2
    assert sent.comparison["downstream"]["tool_calls"] == 1
    logged = {line["code"] for line in topology.log.lines("divergence", sent.request_id)}
    assert logged == {Code.TOOL_CALLS_DROPPED, Code.TOOL_CALL_SET_CHANGED}


@pytest.mark.parametrize("target", sorted(UPSTREAM))
async def test_a_stream_defect_applies_after_the_translation(topology, target):
    sent = await send(topology, TOOLS_REQUEST, target, "strip-done")
    assert sent.comparison["verdict"] == "diverged"
    assert Code.DONE_MISSING in sent.codes
    assert b"[DONE]" not in sent.body


async def test_ten_distinct_requests_without_headers_pair_by_fingerprint(make_topology):
    async with make_topology(events_delay=0.005) as topology:
        targets = [sorted(UPSTREAM)[n % len(UPSTREAM)] for n in range(10)]
        sent = await asyncio.gather(
            *(
                send(topology, question(n), target, "strip-headers")
                for n, target in enumerate(targets)
            )
        )
    for n, (one, target) in enumerate(zip(sent, targets, strict=True)):
        downstream_request = one.request("downstream")
        upstream_request = one.request("upstream")
        assert one.pair["pairing"] == "fingerprint"
        assert one.comparison["verdict"] == "equal"
        assert one.comparison["upstream"]["dialect"] == UPSTREAM[target]
        assert last_user_text(downstream_request) == f"Question {n}: weather?"
        assert last_user_text(upstream_request) == last_user_text(downstream_request)


@pytest.mark.parametrize("target", ["ollama", "converse", "gemini", "bedrock-invoke"])
async def test_whole_answers_without_headers_pair_by_fingerprint(topology, target):
    sent = await send(topology, {**question(7), "stream": False}, target, "strip-headers")
    upstream_request = sent.request("upstream")

    assert sent.pair["pairing"] == "fingerprint"
    assert sent.comparison["verdict"] == "equal"
    assert sent.comparison["upstream"]["tool_calls"] == 2
    assert sent.pair["legs"]["upstream"]["path"] == route(
        TARGETS[target].path(question(7) | {"stream": False})
    )
    assert last_user_text(upstream_request) == "Question 7: weather?"


async def test_identical_requests_without_headers_pair_in_arrival_order(make_topology):
    async with make_topology(events_delay=0.05) as topology:
        provider = topology.provider
        tasks = []
        for n in range(4):
            tasks.append(
                asyncio.create_task(send(topology, TOOLS_REQUEST, "anthropic", "strip-headers"))
            )
            while provider.requests_received < n + 1:
                await asyncio.sleep(0.002)
            if n:
                assert not provider.exchanges[n - 1].complete, "the streams must overlap"
        sent = await asyncio.gather(*tasks)
    legs = [one.pair["legs"] for one in sent]
    downstream_starts = [leg["downstream"]["started_at"] for leg in legs]
    upstream_starts = [leg["upstream"]["started_at"] for leg in legs]

    assert [one.pair["pairing"] for one in sent] == ["fingerprint"] * 4
    assert [one.comparison["verdict"] for one in sent] == ["equal"] * 4
    assert downstream_starts == sorted(downstream_starts)
    assert upstream_starts == sorted(upstream_starts)
    assert len(set(upstream_starts)) == 4
