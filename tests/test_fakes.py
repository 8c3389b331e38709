"""The fake provider and the defect-injecting fake gateway, as real servers on loopback."""

from __future__ import annotations

import copy
import hashlib
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.dialects import transcribe
from calltap.fakes import DEFECT_HEADER, DEFECTS, FakeGateway, FakeProvider
from calltap.fakes.defects import RechunkArguments
from calltap.fakes.provider import (
    CHAT_PATH,
    CREATED,
    QUESTION,
    TEXT_REQUEST,
    TOOLS_REQUEST,
    answer,
    fragments,
    sample_arguments,
    stream_events,
)
from calltap.sse import Blocks, parse
from calltap.transcript import Capture

STAMP = re.compile(rb',"obfuscation":"t([0-9a-f]{16})"(?=}\n\n)')
"""A timestamping provider's send time, the last field of a chunk's JSON object."""
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
"""A W3C trace context header a client sends; a faithful gateway forwards it."""


def payloads(body: bytes) -> list[Any]:
    """Each event's data, decoded when it is JSON; asserts the body is whole, valid SSE."""
    events, incomplete = parse(body)
    assert incomplete is None
    decoded = []
    for event in events:
        try:
            decoded.append(orjson.loads(event.data))
        except orjson.JSONDecodeError:
            decoded.append(event.data)
    return decoded


def tool_fragments(chunks: list[Any]) -> list[dict[str, Any]]:
    return [
        fragment
        for chunk in chunks
        if isinstance(chunk, dict)
        for choice in chunk.get("choices", [])
        for fragment in choice["delta"].get("tool_calls", [])
    ]


def calls_of(body: bytes) -> list[tuple[str, Any]]:
    transcript = transcribe(Capture(body, CHAT_PATH, status=200))
    return [(call.name, orjson.loads(call.arguments)) for call in transcript.choices[0].tool_calls]


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as fake:
        yield fake


@pytest.fixture
async def gateway(provider: FakeProvider) -> AsyncIterator[FakeGateway]:
    async with FakeGateway(provider.url) as fake:
        yield fake


async def post(
    client: aiohttp.ClientSession, base: str, request: dict[str, Any], **headers: str
) -> tuple[aiohttp.ClientResponse, bytes]:
    headers = {"Content-Type": "application/json", **headers}
    async with client.post(base + CHAT_PATH, data=orjson.dumps(request), headers=headers) as reply:
        return reply, await reply.read()


# The provider


async def test_provider_answers_the_same_request_with_the_same_bytes(provider, client):
    _, first = await post(client, provider.url, TOOLS_REQUEST)
    _, second = await post(client, provider.url, TOOLS_REQUEST)
    _, other = await post(client, provider.url, {**TOOLS_REQUEST, "model": "gpt-4o"})
    assert first == second
    assert payloads(first)[0]["id"] != payloads(other)[0]["id"]
    assert [exchange.sha256 for exchange in list(provider.exchanges)[:2]] == [
        hashlib.sha256(first).hexdigest()
    ] * 2


async def test_provider_streams_parallel_calls_the_way_openai_does(provider, client):
    reply, body = await post(client, provider.url, TOOLS_REQUEST)
    chunks = payloads(body)
    assert reply.content_type == "text/event-stream"
    assert chunks[-1] == "[DONE]"
    for chunk in chunks[:-1]:
        assert list(chunk) == [
            "id",
            "object",
            "created",
            "model",
            "system_fingerprint",
            "choices",
            "usage",
        ]
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["created"] == CREATED
    assert all(chunk["usage"] is None for chunk in chunks[:-2])
    assert chunks[-2]["choices"] == []
    assert chunks[-2]["usage"]["total_tokens"] > 0
    assert chunks[-3]["choices"][0]["finish_reason"] == "tool_calls"
    fragments_ = tool_fragments(chunks)
    headers = [fragment for fragment in fragments_ if "id" in fragment]
    assert [(h["index"], h["type"], h["function"]) for h in headers] == [
        (0, "function", {"name": "weather", "arguments": ""}),
        (1, "function", {"name": "clock", "arguments": ""}),
    ]
    rest = [fragment for fragment in fragments_ if "id" not in fragment]
    assert all(list(fragment) == ["index", "function"] for fragment in rest)
    assert all(list(fragment["function"]) == ["arguments"] for fragment in rest)
    assert [fragment["index"] for fragment in rest][:4] == [0, 1, 0, 1]
    assert len(rest) > 4


async def test_provider_stream_reduces_to_one_call_per_offered_tool(provider, client):
    _, body = await post(client, provider.url, TOOLS_REQUEST)
    transcript = transcribe(Capture(body, CHAT_PATH, status=200))
    assert calls_of(body) == [("weather", {"city": "Taipei"}), ("clock", {"zone": "UTC"})]
    assert transcript.choices[0].finish_reason == "tool_calls"
    assert transcript.terminal_seen
    assert transcript.usage is not None
    assert transcript.findings == []


async def test_provider_json_body_holds_the_same_calls(provider, client):
    reply, body = await post(client, provider.url, {**TOOLS_REQUEST, "stream": False})
    assert reply.content_type == "application/json"
    assert calls_of(body) == [("weather", {"city": "Taipei"}), ("clock", {"zone": "UTC"})]
    assert orjson.loads(body)["choices"][0]["finish_reason"] == "tool_calls"


async def test_provider_text_answer_without_usage_unless_asked(client):
    async with FakeProvider(text_events=5) as provider:
        _, body = await post(client, provider.url, TEXT_REQUEST)
    chunks = payloads(body)
    content = [chunk["choices"][0]["delta"].get("content") for chunk in chunks[:-1]]
    assert content[0] == ""
    assert len([piece for piece in content if piece]) == 5
    assert all("usage" not in chunk for chunk in chunks[:-1])
    transcript = transcribe(Capture(body, CHAT_PATH, status=200))
    assert transcript.choices[0].text == "".join(piece or "" for piece in content)
    assert transcript.choices[0].finish_reason == "stop"
    assert transcript.usage is None


@pytest.mark.parametrize(
    ("extra", "words", "finish_reason"),
    [({"stop": ["\n\n"]}, 4, "stop"), ({"max_tokens": 3}, 3, "length"), ({}, 8, "stop")],
)
async def test_provider_honours_stop_and_max_tokens(provider, client, extra, words, finish_reason):
    _, body = await post(client, provider.url, {**TEXT_REQUEST, **extra})
    choice = transcribe(Capture(body, CHAT_PATH, status=200)).choices[0]
    assert choice.finish_reason == finish_reason
    assert len(choice.text.split()) == words


async def test_provider_sends_as_many_text_events_as_configured(client):
    async with FakeProvider(text_events=200) as provider:
        _, body = await post(client, provider.url, TEXT_REQUEST)
    events, _ = parse(body)
    assert len(events) == 1 + 200 + 1 + 1
    assert len(transcribe(Capture(body, CHAT_PATH)).choices[0].text.split()) == 200


async def test_provider_stamps_the_send_time_last_in_each_chunk_and_keeps_plain_blocks(client):
    before = time.time_ns()
    async with FakeProvider(timestamps=True) as stamped, FakeProvider() as plain:
        _, body = await post(client, stamped.url, TOOLS_REQUEST)
        _, reference = await post(client, plain.url, TOOLS_REQUEST)
    assert Blocks.of(body) is not None
    chunks = payloads(body)
    assert chunks.pop() == "[DONE]"
    assert all(list(chunk)[-1] == "obfuscation" for chunk in chunks)
    sent = [int(stamp, 16) for stamp in STAMP.findall(body)]
    assert len(sent) == len(chunks)
    assert before <= sent[0] and sent == sorted(sent) and sent[-1] <= time.time_ns()
    assert STAMP.sub(b"", body) == reference


async def test_provider_lists_models_counts_requests_and_rejects_bad_json(provider, client):
    async with client.get(provider.url + "/v1/models") as reply:
        models = await reply.json()
    await post(client, provider.url, TEXT_REQUEST)
    async with client.post(provider.url + CHAT_PATH, data=b"{not json") as bad:
        error = await bad.json()
    assert models["data"][0]["object"] == "model"
    assert provider.requests_received == 3
    assert len(provider.exchanges) == 2
    assert bad.status == 400
    assert error["error"]["type"] == "invalid_request_error"


async def test_provider_marks_an_answer_the_client_abandoned_as_incomplete(client):
    async with (
        FakeProvider(events_delay=0.01, text_events=1000) as provider,
        client.post(provider.url + CHAT_PATH, json=TEXT_REQUEST) as reply,
    ):
        first = await reply.content.readany()
        reply.close()
    (exchange,) = provider.exchanges
    assert first.startswith(b"data: ")
    assert not exchange.complete
    assert len(parse(bytes(exchange.response_body))[0]) < 1000


async def test_provider_keeps_only_the_latest_exchanges(client):
    async with FakeProvider(keep=2) as provider:
        for words in (1, 2, 3):
            await post(client, provider.url, {**TEXT_REQUEST, "max_tokens": words})
    assert provider.requests_received == 3
    assert [orjson.loads(e.request_body)["max_tokens"] for e in provider.exchanges] == [2, 3]


tool_names = st.from_regex(r"[a-z][a-z_]{0,12}", fullmatch=True)
properties = st.dictionaries(
    st.from_regex(r"[a-z]{1,8}", fullmatch=True),
    st.sampled_from([{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]),
    max_size=4,
)


@examples(50, deadline=None)
@given(
    st.lists(st.tuples(tool_names, properties), min_size=1, max_size=4, unique_by=lambda t: t[0])
)
def test_any_offered_tools_stream_back_as_their_calls(tools):
    request = {
        "messages": QUESTION,
        "stream": True,
        "tools": [
            {"type": "function", "function": {"name": name, "parameters": {"properties": props}}}
            for name, props in tools
        ],
    }
    body = orjson.dumps(request)
    streamed = b"".join(stream_events(answer(body, request, text_events=8), include_usage=False))
    expected = [(name, sample_arguments({"properties": props})) for name, props in tools]
    assert calls_of(streamed) == expected


@given(st.text())
def test_argument_fragments_join_back_to_the_text(text):
    assert "".join(fragments(text)) == text


# The gateway


async def test_gateway_relays_byte_identically_and_forwards_ids(provider, gateway, client):
    reply, body = await post(
        client,
        gateway.url,
        TOOLS_REQUEST,
        **{"X-Request-ID": "req-1", "traceparent": TRACEPARENT, "Authorization": "Bearer sk-test"},
    )
    exchange = provider.exchange_for("req-1")
    assert body == bytes(exchange.response_body)
    assert reply.headers["llm_provider-x-request-id"] == exchange.response_headers["x-request-id"]
    assert exchange.request_headers["traceparent"] == TRACEPARENT
    assert exchange.request_headers["Authorization"] == "Bearer sk-test"
    assert exchange.request_body == orjson.dumps(TOOLS_REQUEST)
    assert gateway.defects_injected == ["none"]


async def test_gateway_relays_json_bodies_untouched_even_with_a_stream_defect(
    provider, gateway, client
):
    _, body = await post(
        client,
        gateway.url,
        {**TOOLS_REQUEST, "stream": False},
        **{DEFECT_HEADER: "drop-second-call", "X-Request-ID": "json-1"},
    )
    assert body == bytes(provider.exchange_for("json-1").response_body)


async def test_gateway_probes_the_upstream_models(provider, gateway):
    models = await gateway.probe_upstream()
    assert models["object"] == "list"
    assert provider.requests_received == 1


async def test_gateway_rejects_an_unknown_defect_without_calling_upstream(
    provider, gateway, client
):
    reply, body = await post(client, gateway.url, TOOLS_REQUEST, **{DEFECT_HEADER: "bogus"})
    assert reply.status == 400
    assert b"drop-second-call" in body
    assert provider.requests_received == 0


async def test_gateway_answers_502_without_a_reachable_upstream(client):
    async with FakeGateway() as gateway:
        unset, _ = await post(client, gateway.url, TEXT_REQUEST)
        async with FakeProvider() as gone:
            gateway.upstream = gone.url
        unreachable, body = await post(client, gateway.url, TEXT_REQUEST)
    assert (unset.status, unreachable.status) == (502, 502)
    assert orjson.loads(body)["error"]["type"] == "upstream_error"


async def inject(provider, gateway, client, defect: str) -> tuple[list[Any], list[Any], bytes]:
    """The provider's payloads, the client's payloads and the client's body, for the tools
    request with `defect` injected."""
    _, body = await post(
        client, gateway.url, TOOLS_REQUEST, **{DEFECT_HEADER: defect, "X-Request-ID": defect}
    )
    exchange = provider.exchange_for(defect)
    assert DEFECT_HEADER not in exchange.request_headers
    assert exchange.complete
    return payloads(bytes(exchange.response_body)), payloads(body), body


def without(chunks: list[Any], edit) -> list[Any]:
    """A deep copy of the chunks with `edit(fragment)` applied to every tool-call fragment."""
    edited = copy.deepcopy(chunks)
    for fragment in tool_fragments(edited):
        edit(fragment)
    return edited


async def test_drop_second_call_removes_exactly_call_1(provider, gateway, client):
    upstream, downstream, _ = await inject(provider, gateway, client, "drop-second-call")
    kept = [
        chunk
        for chunk in upstream
        if not any(fragment["index"] == 1 for fragment in tool_fragments([chunk]))
    ]
    assert downstream == kept
    assert len(upstream) - len(downstream) == 6


async def test_omit_index_removes_index_from_call_0_only(provider, gateway, client):
    upstream, downstream, _ = await inject(provider, gateway, client, "omit-index")

    def drop_index_0(fragment):
        if fragment["index"] == 0:
            del fragment["index"]

    assert downstream == without(upstream, drop_index_0)
    assert any("index" not in fragment for fragment in tool_fragments(downstream))


async def test_merge_indexes_puts_every_call_on_index_0(provider, gateway, client):
    upstream, downstream, _ = await inject(provider, gateway, client, "merge-indexes")
    assert downstream == without(upstream, lambda fragment: fragment.update(index=0))


async def test_strip_done_removes_only_the_terminal_marker(provider, gateway, client):
    upstream, downstream, _ = await inject(provider, gateway, client, "strip-done")
    assert upstream[-1] == "[DONE]"
    assert downstream == upstream[:-1]


async def test_null_finish_reason_changes_only_the_finish_reason(provider, gateway, client):
    upstream, downstream, _ = await inject(provider, gateway, client, "null-finish-reason")
    assert upstream[-3]["choices"][0]["finish_reason"] == "tool_calls"
    upstream[-3]["choices"][0]["finish_reason"] = None
    assert downstream == upstream


async def test_error_after_200_sends_three_chunks_then_an_error(provider, gateway, client):
    upstream, downstream, _ = await inject(provider, gateway, client, "error-after-200")
    assert downstream[:3] == upstream[:3]
    assert len(downstream) == 4
    assert downstream[3]["error"]["type"] == "server_error"


async def test_mask_eof_ends_early_with_a_stop_usage_and_done(provider, gateway, client):
    upstream, downstream, _ = await inject(provider, gateway, client, "mask-eof")
    assert downstream[:4] == upstream[:4]
    assert [chunk["choices"][0]["finish_reason"] for chunk in downstream[4:5]] == ["stop"]
    assert downstream[5]["choices"] == []
    assert downstream[5]["usage"] != upstream[-2]["usage"]
    assert downstream[6:] == ["[DONE]"]


async def test_rewrite_ids_changes_only_ids_consistently(provider, gateway, client):
    upstream, downstream, body = await inject(provider, gateway, client, "rewrite-ids")
    ids: list[str] = []

    def remember(fragment):
        if "id" in fragment:
            ids.append(fragment.pop("id"))

    assert without(downstream, remember) == without(upstream, remember)
    assert ids[:2] == ["call_gw_1", "call_gw_2"]
    assert all(key.startswith("call_") and "_gw_" not in key for key in ids[2:])
    assert calls_of(body) == [("weather", {"city": "Taipei"}), ("clock", {"zone": "UTC"})]


async def test_rechunk_arguments_recuts_fragments_and_keeps_the_calls(provider, gateway, client):
    upstream, downstream, _ = await inject(provider, gateway, client, "rechunk-arguments")

    def joined(chunks):
        text: dict[int, str] = {}
        for fragment in tool_fragments(chunks):
            text[fragment["index"]] = (
                text.get(fragment["index"], "") + fragment["function"]["arguments"]
            )
        return text

    pieces = [f["function"]["arguments"] for f in tool_fragments(downstream) if "id" not in f]
    assert joined(downstream) == joined(upstream)
    assert all(0 < len(piece) <= 5 for piece in pieces)
    assert pieces != [f["function"]["arguments"] for f in tool_fragments(upstream) if "id" not in f]
    assert downstream[-3:] == upstream[-3:]


async def test_strip_headers_forwards_only_the_content_type(provider, gateway, client):
    _, body = await post(
        client,
        gateway.url,
        TOOLS_REQUEST,
        **{DEFECT_HEADER: "strip-headers", "X-Request-ID": "r", "traceparent": TRACEPARENT},
    )
    exchange = provider.exchanges[-1]
    assert body == bytes(exchange.response_body)
    assert exchange.request_id is None
    assert "traceparent" not in exchange.request_headers
    assert "Authorization" not in exchange.request_headers
    assert exchange.request_headers["Content-Type"] == "application/json"


async def test_retry_once_calls_upstream_twice_and_relays_the_second(provider, gateway, client):
    _, body = await post(
        client, gateway.url, TOOLS_REQUEST, **{DEFECT_HEADER: "retry-once", "X-Request-ID": "r"}
    )
    assert [exchange.request_id for exchange in provider.exchanges] == ["r", "r"]
    assert body == bytes(provider.exchanges[1].response_body)


def test_every_defect_documents_what_calltap_must_say():
    for defect in DEFECTS.values():
        assert defect.verdict in ("equal", "diverged")
        assert defect.verdict == "equal" or defect.codes
        assert defect.seen_in
        assert defect.expected.startswith(defect.verdict)


argument_texts = st.lists(st.text(max_size=30), min_size=1, max_size=3)


@examples(60, deadline=None)
@given(argument_texts, st.data())
def test_rechunking_keeps_every_calls_argument_text(texts, data):
    """Whatever the upstream fragmentation, the re-cut pieces join to the same text per call."""
    stream: list[Any] = []
    for index, text in enumerate(texts):
        stream.append(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": f"c{index}",
                                    "function": {"name": "f", "arguments": ""},
                                }
                            ]
                        },
                    }
                ]
            }
        )
        cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=5)))
        for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
            fragment = {"index": index, "function": {"arguments": text[start:end]}}
            stream.append({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})
    stream.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    transform = RechunkArguments()
    out = [
        piece for chunk in [*stream, "[DONE]"] for piece in transform.feed(chunk)
    ] + transform.end()
    joined: dict[int, str] = {}
    for fragment in tool_fragments(out):
        joined[fragment["index"]] = (
            joined.get(fragment["index"], "") + fragment["function"]["arguments"]
        )
    assert joined == dict(enumerate(texts))
    assert out[-1] == "[DONE]"
    assert out[-2]["choices"][0]["finish_reason"] == "tool_calls"
