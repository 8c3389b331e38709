"""Pairing through a real gateway: by header, by traceparent, by fingerprint; concurrent
identical requests; retries kept as attempts; orphans."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from tests.proxy.conftest import chat_request, post_chat

from calltap.proxy import pairs
from calltap.proxy.fingerprint import request_fingerprint


@pytest.mark.parametrize("mode", ["header", "traceparent", "strip"])
async def test_each_pairing_method(topology: dict[str, Any], client, mode: str) -> None:
    tap, gateway = topology["tap"], topology["gateway"]
    gateway.mode = mode
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200
    pair = await tap.wait_compared(headers["X-Request-ID"])
    expected = {"header": "header", "traceparent": "traceparent", "strip": "fingerprint"}[mode]
    assert pair["pairing"] == expected
    assert pair["comparison"]["verdict"] == "equal"
    assert pair["legs"]["upstream"]["sha256"] == hashlib.sha256(body).hexdigest()


@pytest.mark.parametrize(("mode", "read"), [("header", 1), ("traceparent", 2), ("strip", 2)])
async def test_a_back_attempt_is_fingerprinted_only_when_its_header_names_no_front_leg(
        topology: dict[str, Any], client, monkeypatch, mode: str, read: int) -> None:
    """Reading a request body for its fingerprint costs the loop: an attempt that carries its
    front leg's key pairs by it, so only the front leg's body is read."""
    tap = topology["tap"]
    topology["gateway"].mode = mode
    calls: list[str] = []

    def counted(body: bytes, path: str) -> str | None:
        calls.append(path)
        return request_fingerprint(body, path)

    monkeypatch.setattr(pairs, "request_fingerprint", counted)
    _, headers, _ = await post_chat(client, tap.front_url)
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert pair["comparison"]["verdict"] == "equal"
    assert len(calls) == read


async def test_client_traceparent_is_forwarded_untouched(topology, client) -> None:
    tap, provider = topology["tap"], topology["provider"]
    topology["gateway"].mode = "traceparent"
    traceparent = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    _, headers, _ = await post_chat(client, tap.front_url, headers={"traceparent": traceparent})
    assert provider.seen[-1]["headers"]["traceparent"] == traceparent
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert pair["pairing"] == "traceparent"


async def test_concurrent_identical_requests_pair_in_order_never_cross(topology, client) -> None:
    tap, provider, gateway = topology["tap"], topology["provider"], topology["gateway"]
    gateway.mode = "strip"
    provider.delay = 0.002
    results = await asyncio.gather(*(post_chat(client, tap.front_url) for _ in range(6)))
    keys = [headers["X-Request-ID"] for _, headers, _ in results]
    assert len(set(keys)) == 6
    pairs = [await tap.wait_compared(key) for key in keys]
    seen: set[str] = set()
    for pair in pairs:
        assert pair["pairing"] == "fingerprint"
        assert pair["comparison"]["verdict"] == "equal"
        assert pair["attempts"] == 1
        upstream_request = pair["legs"]["upstream"]["request_file"]
        assert upstream_request == "upstream.request"
        seen.add(pair["legs"]["upstream"]["started_at"])
    assert len(seen) == 6


async def test_concurrent_different_content_never_cross(topology, client) -> None:
    tap, provider, gateway = topology["tap"], topology["provider"], topology["gateway"]
    gateway.mode = "strip"
    provider.reply_with_request = True
    provider.delay = 0.001
    contents = [f"question number {i}" for i in range(5)]
    results = await asyncio.gather(
        *(post_chat(client, tap.front_url, chat_request(c)) for c in contents)
    )
    for content, (_, headers, body) in zip(contents, results, strict=True):
        assert content.replace(" ", "-").encode() in body
        pair = await tap.wait_compared(headers["X-Request-ID"])
        directory = next(tap.recordings.glob(f"*/{pair['request_id']}"))
        assert (directory / "upstream.sse").read_bytes() == body
        assert pair["comparison"]["verdict"] == "equal"


async def test_gateway_retry_is_kept_as_attempts(topology, client, log) -> None:
    tap, gateway = topology["tap"], topology["gateway"]
    gateway.retry_first = True
    topology["provider"].delay = 0.005
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200
    key = headers["X-Request-ID"]
    pair = await tap.wait_compared(key)
    assert pair["attempts"] == 2
    attempts = pair["legs"]["upstream_attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert attempts[0]["ended"] == "client_aborted"
    assert attempts[0]["file"] == "upstream.attempt-1.sse"
    assert pair["legs"]["upstream"]["attempt"] == 2
    assert pair["legs"]["upstream"]["file"] == "upstream.sse"
    assert pair["comparison"]["verdict"] == "equal"
    directory = next(tap.recordings.glob(f"*/{key}"))
    assert (directory / "upstream.sse").read_bytes() == body
    assert len((directory / "upstream.attempt-1.sse").read_bytes()) < len(body)
    assert (directory / "upstream.attempt-1.request").read_bytes() == chat_request()
    assert (directory / "upstream.request").read_bytes() == chat_request()
    assert not list(directory.glob("*.partial"))
    assert log.lines("pair.compared")[-1]["attempts"] == 2


async def test_front_leg_without_upstream_is_orphaned_after_window(
    provider, gateway, make_tap, client, log
) -> None:
    _provider_script, provider_url = provider
    gateway_script, gateway_url = gateway
    tap = await make_tap(
        front=("127.0.0.1", 0),
        gateway=gateway_url,
        back=("127.0.0.1", 0),
        provider=provider_url,
        pairing_window=0.5,
    )
    gateway_script.target = provider_url
    status, headers, _body = await post_chat(client, tap.front_url)
    assert status == 200
    key = headers["X-Request-ID"]
    pair = await tap.wait_compared(key, timeout=10)
    assert pair["orphaned"] is True
    assert "upstream" not in pair["legs"]
    assert pair["check"]["verdict"] == "clean"
    orphaned = log.lines("pair.orphaned")
    assert orphaned[-1]["request_id"] == key
    assert orphaned[-1]["side"] == "downstream"


async def test_upstream_leg_without_front_is_orphaned(topology, client, log) -> None:
    tap = topology["tap"]
    async with client.post(
        tap.back_url + "/v1/chat/completions",
        data=chat_request("alone"),
        headers={"X-Request-ID": "lonely-1"},
    ) as response:
        body = await response.read()
    pair = await tap.wait_compared("lonely-1")
    assert pair["orphaned"] is True
    assert pair["legs"]["upstream"]["bytes"] == len(body)
    assert log.lines("pair.orphaned")[-1]["side"] == "upstream"


async def test_a_small_pair_reaches_the_disk_in_two_hand_overs(topology, client) -> None:
    """Waking the disk thread costs the relay's loop: a small exchange's files go in one batch
    per leg (the capture directory with the first), and the comparison's wait for them travels
    in the front leg's batch."""
    tap = topology["tap"]
    disk = tap.recording.recorder.disk
    await tap.wait_compared((await post_chat(client, tap.front_url))[1]["X-Request-ID"])
    before = disk.batches
    for _ in range(5):
        _, headers, _ = await post_chat(client, tap.front_url)
        pair = await tap.wait_compared(headers["X-Request-ID"])
        assert pair["comparison"]["verdict"] == "equal"
    assert disk.batches - before == 2 * 5


async def post_chat_with_query(client, tap, query: str) -> tuple[str, dict]:
    """A chat request to the front with `query`; its request id and pair.json once compared."""
    async with client.post(f"{tap.front_url}/v1/chat/completions?{query}", data=chat_request(),
                           headers={"Content-Type": "application/json"}) as reply:
        await reply.read()
    request_id = reply.headers["X-Request-ID"]
    return request_id, await tap.wait_compared(request_id)


async def test_a_query_string_is_relayed_and_kept_on_both_legs(topology, client) -> None:
    """Azure-style routes carry their `api-version` in the query: pair.json keeps it as sent,
    and a request without one has no `query` at all."""
    tap, provider = topology["tap"], topology["provider"]
    query = "api-version=2024-10-21&x=a%20b"
    _, pair = await post_chat_with_query(client, tap, query)
    assert pair["legs"]["downstream"]["query"] == pair["legs"]["upstream"]["query"] == query
    assert provider.seen[-1]["path"] == f"/v1/chat/completions?{query}"
    _, headers, _ = await post_chat(client, tap.front_url)
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert "query" not in pair["legs"]["downstream"] and "query" not in pair["legs"]["upstream"]


async def test_a_key_in_the_query_is_relayed_but_never_recorded(topology, client) -> None:
    """Gemini's REST API takes its key as `?key=`: the provider gets it, pair.json and every
    other file of the capture do not."""
    tap, provider = topology["tap"], topology["provider"]
    query = "alt=sse&key=AIza-secret-key-1&api-version=1"
    request_id, pair = await post_chat_with_query(client, tap, query)
    assert provider.seen[-1]["path"] == f"/v1/chat/completions?{query}"
    recorded = "alt=sse&key=[redacted]&api-version=1"
    assert pair["legs"]["downstream"]["query"] == pair["legs"]["upstream"]["query"] == recorded
    directory = next(tap.recordings.rglob(request_id))
    assert not [path for path in directory.iterdir() if b"AIza-secret" in path.read_bytes()]
