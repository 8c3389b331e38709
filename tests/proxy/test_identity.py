"""Request ids and secrets: hostile X-Request-ID values never escape the recordings tree or
overwrite a capture; secret headers never reach a file or a log line."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from tests.proxy.conftest import chat_request, post_chat


def all_files(root) -> list:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.parametrize(
    "hostile", ["../../etc/passwd", "a" * 10_000, "..", ".", "a/b", "id+2", "x y", "\u00e9t\u00e9"]
)
async def test_hostile_request_ids_get_a_fresh_id(
    topology: dict[str, Any], client, tmp_path, hostile: str
) -> None:
    tap = topology["tap"]
    headers = {"X-Request-ID": hostile.encode("utf-8").decode("latin-1")}
    status, response_headers, _ = await post_chat(client, tap.front_url, headers=headers)
    assert status == 200
    key = response_headers["X-Request-ID"]
    assert key != hostile
    pair = await tap.wait_compared(key)
    assert pair["request_id"] == key
    root = tap.recordings.resolve()
    for path in all_files(tmp_path):
        assert path.resolve().is_relative_to(root), path
    assert [p.name for p in root.glob("[0-9]*/*")] == [key]


async def test_nul_in_request_id_never_reaches_disk(topology, tmp_path) -> None:
    tap = topology["tap"]
    host, port = tap.front_url.removeprefix("http://").split(":")
    body = chat_request()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        b"X-Request-ID: ../a\x00b\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
    )
    await writer.drain()
    reply = await reader.read()
    writer.close()
    status_line = reply.split(b"\r\n", 1)[0]
    assert status_line.split(b" ")[1] in (b"200", b"400")
    if b" 200 " in status_line:
        key = next(
            line.split(b": ", 1)[1]
            for line in reply.split(b"\r\n")
            if line.lower().startswith(b"x-request-id:")
        ).decode()
        assert "\x00" not in key and "/" not in key
        await tap.wait_compared(key)
    else:
        assert list(tap.recordings.glob("[0-9]*/*")) == []
    for path in all_files(tmp_path):
        assert "\x00" not in str(path)
        assert path.resolve().is_relative_to(tap.recordings.resolve())


async def test_reused_id_never_overwrites_a_capture(topology, client) -> None:
    tap, provider = topology["tap"], topology["provider"]
    provider.reply_with_request = True
    keys = []
    for content in ("first question", "second question", "third question"):
        _, headers, _ = await post_chat(
            client, tap.front_url, chat_request(content), headers={"X-Request-ID": "same-id"}
        )
        keys.append(headers["X-Request-ID"])
    assert keys == ["same-id", "same-id+2", "same-id+3"]
    for key, content in zip(keys, ("first", "second", "third"), strict=True):
        pair = await tap.wait_compared(key)
        assert pair["pairing"] == "header"
        directory = next(tap.recordings.glob(f"*/{key}"))
        assert content.encode() in (directory / "upstream.sse").read_bytes()
        assert content.encode() in (directory / "downstream.request").read_bytes()


async def test_planted_secrets_reach_no_file_and_no_log(topology, client, tmp_path, log) -> None:
    tap, provider = topology["tap"], topology["provider"]
    secrets = {
        "Authorization": "Bearer sk-planted-AUTH-0001",
        "Cookie": "session=planted-COOKIE-0002",
        "x-api-key": "planted-XAPIKEY-0003",
        "api-key": "planted-APIKEY-0004",
        "Proxy-Authorization": "Basic planted-PROXY-0005",
    }
    _, headers, _ = await post_chat(client, tap.front_url, headers=secrets)
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert provider.seen[-1]["headers"]["Authorization"] == secrets["Authorization"]
    assert pair["legs"]["downstream"]["request_headers"]["authorization"] == "[redacted]"
    assert pair["legs"]["upstream"]["request_headers"]["x-api-key"] == "[redacted]"
    contents = b"".join(path.read_bytes() for path in all_files(tmp_path))
    logged = log.getvalue()
    for value in secrets.values():
        marker = value.split("planted-")[1]
        assert marker.encode() not in contents
        assert marker not in logged


async def test_request_id_is_forwarded_and_returned(topology, client) -> None:
    tap, provider = topology["tap"], topology["provider"]
    _, headers, _ = await post_chat(client, tap.front_url, headers={"X-Request-ID": "abc.DEF_1-2"})
    assert headers["X-Request-ID"] == "abc.DEF_1-2"
    assert provider.seen[-1]["headers"]["X-Request-ID"] == "abc.DEF_1-2"
    assert provider.seen[-1]["headers"]["traceparent"].startswith("00-")
    assert os.path.isdir(next(tap.recordings.glob("*/abc.DEF_1-2")))


async def test_hostile_id_on_the_back_listener_stays_inside(provider, make_tap, client,
                                                            tmp_path) -> None:
    _, provider_url = provider
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url)
    async with client.post(tap.back_url + "/v1/chat/completions", data=chat_request(),
                           headers={"X-Request-ID": "../../outside"}) as response:
        assert response.status == 200
        await response.read()
    for _ in range(100):
        if list(tap.recordings.rglob("pair.json")):
            break
        await asyncio.sleep(0.05)
    (pair_path,) = tap.recordings.rglob("pair.json")
    assert pair_path.parent.parent.parent == tap.recordings
    assert "outside" not in pair_path.parent.name
    assert not (tmp_path / "outside").exists()
