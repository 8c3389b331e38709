"""Faithful relay through both listeners: the client gets the provider's exact bytes, the
capture holds exactly what each side saw, and pair.json describes the pair."""

from __future__ import annotations

import hashlib
import stat
from typing import Any

from tests.proxy.conftest import chat_request, chat_stream, post_chat


async def test_client_gets_provider_bytes_and_capture_matches(
    topology: dict[str, Any], client, log
) -> None:
    tap, provider = topology["tap"], topology["provider"]
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(provider.body).hexdigest()
    key = headers["X-Request-ID"]
    pair = await tap.wait_compared(key)
    directory = next(tap.recordings.glob(f"*/{key}"))
    assert (directory / "downstream.sse").read_bytes() == provider.body
    assert (directory / "upstream.sse").read_bytes() == provider.body
    assert (directory / "downstream.request").read_bytes() == chat_request()
    assert (directory / "upstream.request").read_bytes() == chat_request()
    assert pair["request_id"] == key
    assert pair["pairing"] == "header"
    assert pair["comparison"]["verdict"] == "equal"
    for side in ("downstream", "upstream"):
        leg = pair["legs"][side]
        assert leg["sha256"] == hashlib.sha256(provider.body).hexdigest()
        assert leg["bytes"] == len(provider.body)
        assert leg["ended"] == "complete"
        assert leg["status"] == 200
        assert leg["method"] == "POST"
        assert leg["path"] == "/v1/chat/completions"
        assert leg["file"] == f"{side}.sse"
        assert leg["started_at"].endswith("Z") and leg["finished_at"] >= leg["started_at"]
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert not list(directory.glob("*.partial"))
    compared = log.lines("pair.compared")
    assert compared[-1]["request_id"] == key
    assert compared[-1]["verdict"] == "equal"
    assert compared[-1]["bytes_upstream"] == len(provider.body)


async def test_non_compared_paths_are_relayed_not_recorded(topology, client) -> None:
    tap = topology["tap"]
    async with client.get(tap.front_url + "/v1/models?x=1") as response:
        assert response.status == 200
        assert (await response.json())["data"][0]["id"] == "gpt-test"
    assert topology["provider"].seen[-1]["path"] == "/v1/models?x=1"
    assert list(tap.recordings.rglob("pair.json")) == []


async def test_content_length_response_and_unknown_encoding_pass_untouched(
    topology, client
) -> None:
    tap, provider = topology["tap"], topology["provider"]
    provider.body = bytes(range(256)) * 40
    provider.content_type = "application/octet-stream"
    provider.content_length = True
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200
    assert body == provider.body
    assert headers["Content-Length"] == str(len(provider.body))
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert pair["legs"]["downstream"]["file"] == "downstream.body"


async def test_chat_stream_fixture_is_deterministic() -> None:
    assert chat_stream() == chat_stream()


async def test_large_request_body_streams_through(provider, gateway, make_tap, client) -> None:
    script, provider_url = provider
    gateway_script, gateway_url = gateway
    tap = await make_tap(front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0),
                         provider=provider_url, max_fingerprint_body=1000)
    gateway_script.target = tap.back_url
    big = chat_request("x" * 50_000)

    async def chunks():
        for start in range(0, len(big), 7000):
            yield big[start:start + 7000]

    async with client.post(tap.front_url + "/v1/chat/completions", data=chunks()) as response:
        assert await response.read() == script.body
        key = response.headers["X-Request-ID"]
    assert script.seen[-1]["body"] == big
    pair = await tap.wait_compared(key)
    assert pair["pairing"] == "header"
    directory = next(tap.recordings.glob(f"*/{key}"))
    assert (directory / "downstream.request").read_bytes() == big
    assert (directory / "upstream.request").read_bytes() == big


async def test_hop_by_hop_headers_are_dropped_and_others_kept(topology, client) -> None:
    tap, provider = topology["tap"], topology["provider"]
    _, headers, _ = await post_chat(client, tap.front_url, headers={
        "Connection": "keep-alive, X-Hop", "X-Hop": "drop me", "Keep-Alive": "timeout=5",
        "X-Custom": "kept", "User-Agent": "client/1.0"})
    seen = provider.seen[-1]["headers"]
    assert seen["X-Custom"] == "kept"
    assert seen["User-Agent"] == "client/1.0"
    assert "X-Hop" not in seen and "Keep-Alive" not in seen
    assert headers["X-Provider"] == "fake"


async def test_head_and_empty_bodies_pass(topology, client) -> None:
    tap, provider = topology["tap"], topology["provider"]
    async with client.head(tap.front_url + "/v1/models") as response:
        assert response.status == 200
        assert await response.read() == b""
    provider.status = 204
    provider.body = b""
    status, _, body = await post_chat(client, tap.front_url)
    assert status == 204 and body == b""


async def test_record_other_records_without_comparing(provider, make_tap, client) -> None:
    _, provider_url = provider
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url, record_other=True)
    async with client.get(tap.back_url + "/v1/models",
                          headers={"X-Request-ID": "models-1"}) as response:
        body = await response.read()
    pair = await tap.wait_compared("models-1")
    assert pair["legs"]["upstream"]["file"] == "upstream.json"
    assert pair["legs"]["upstream"]["bytes"] == len(body)
    assert pair["orphaned"] is False
    assert "comparison" not in pair and "check" not in pair


async def test_json_response_is_checked_and_body_patterns_masked(provider, make_tap,
                                                                 client) -> None:
    script, provider_url = provider
    script.content_type = "application/json"
    script.body = (b'{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,'
                   b'"message":{"role":"assistant","content":"card 4111-1111"},'
                   b'"finish_reason":"stop"}],"usage":{"prompt_tokens":1,'
                   b'"completion_tokens":2,"total_tokens":3}}')
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url,
                         mask_body_patterns=(r"\d{4}-\d{4}",))
    async with client.post(tap.back_url + "/v1/chat/completions",
                           data=b'{"messages":[{"role":"user","content":"pin 1234-5678"}]}',
                           headers={"X-Request-ID": "json-1"}) as response:
        assert await response.read() == script.body
    pair = await tap.wait_compared("json-1")
    assert pair["check"]["verdict"] == "clean"
    directory = next(tap.recordings.glob("*/json-1"))
    recorded = (directory / "upstream.json").read_bytes()
    assert b"4111-1111" not in recorded and b"[masked]" in recorded
    assert b"1234-5678" not in (directory / "upstream.request").read_bytes()
