"""Hostile `X-Request-ID` values through both listeners, sent as raw bytes: each gets a fresh id
(or, for bytes HTTP forbids in a header, a 400 from calltap) and the tmp dir afterwards holds
exactly the recordings tree of the requests that were relayed, nothing beside or above it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from tests.proxy.conftest import *  # noqa: F403  (its fixtures: provider, gateway, ...)
from tests.proxy.conftest import chat_request
from tests.reliability.test_hostile_http import exchange, request

from calltap.proxy.ids import is_request_id

HOSTILE_IDS = {
    "../../x": b"../../x",
    "/abs": b"/abs",
    ".": b".",
    "..": b"..",
    "empty": b"",
    "10 KB": b"a" * 10_000,
    "129 characters": b"b" * 129,
    "unicode": "r\u00e9qu\u00eate-\u65e5\u672c".encode(),
    "backslashes": b"..\\..\\x",
    "a '+N' suffix": b"taken+2",
    "NUL": b"a\x00b",
    "newline": b"a\nb",
    "CR LF and a header": b"a\r\nX-Injected: 1",
}
REFUSED_BY_PARSER = {"NUL", "newline"}
"""Bytes a header value may not hold: aiohttp refuses the request (400) before any handler.
(`CR LF` just ends the header line: the id is then `a`, which is valid, and `X-Injected` is an
ordinary header of the client's own request.)"""

FRONT_FILES = ["downstream.request", "downstream.sse", "pair.json", "upstream.request",
               "upstream.sse"]
BACK_FILES = ["pair.json", "upstream.request", "upstream.sse"]


async def start(listener: str, provider: Any, gateway: Any, make_tap: Any) -> tuple[Any, str]:
    """calltap with the full topology (front) or the back alone; the URL to send to."""
    _, provider_url = provider
    if listener == "back":
        tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url)
        return tap, tap.back_url
    gateway_script, gateway_url = gateway
    tap = await make_tap(front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0),
                         provider=provider_url)
    gateway_script.target = tap.back_url
    return tap, tap.front_url


def tree(root: Path) -> list[str]:
    """Every path under `root` but the index of pairs beside the captures."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "_index" not in p.parts)


async def captured_key(tap: Any, before: set[str]) -> str:
    """The capture directory a back-only request created (the back returns no id)."""
    for _ in range(200):
        new = {p.name for p in tap.recordings.glob("[0-9]*/*")} - before
        if new:
            (key,) = new
            return key
        await asyncio.sleep(0.02)
    raise AssertionError("no capture directory appeared")


@pytest.mark.parametrize("listener", ["front", "back"])
@pytest.mark.parametrize("name", list(HOSTILE_IDS))
async def test_hostile_request_id_stays_inside_the_recordings_tree(
    provider: Any, gateway: Any, make_tap: Any, tmp_path: Path, tally: Any, listener: str,
    name: str,
) -> None:
    tap, url = await start(listener, provider, gateway, make_tap)
    hostile = HOSTILE_IDS[name]
    raw = request([("X-Request-ID", hostile.decode("latin-1"))], chat_request())
    reply, _ = await exchange(url, raw)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    if name in REFUSED_BY_PARSER:
        assert reply.status == 400 and reply.error()["code"] == "invalid_http_request"
        assert provider[0].seen == []
        assert tree(tmp_path) == ["rec"]
    else:
        if listener == "back" and name == "10 KB":
            # The id is the client's header to relay: the provider (aiohttp, 8 KiB per
            # header) refuses it, and that answer is relayed and recorded like any other.
            assert reply.status == 400 and (reply.header("Content-Type") or "").startswith("text/")
        else:
            assert reply.status == 200
        if listener == "front":
            key = reply.header("X-Request-ID") or ""
        else:
            key = await captured_key(tap, set())
        expected_id = "a" if name == "CR LF and a header" else None
        assert key == expected_id or (is_request_id(key) and key.encode() != hostile)
        pair = await tap.wait_compared(key)
        assert pair["request_id"] == key
        files = FRONT_FILES if listener == "front" else BACK_FILES
        if listener == "back" and name == "10 KB":
            files = [f.replace(".sse", ".body") for f in files]
        assert tree(tmp_path) == sorted(["rec", f"rec/{day}", f"rec/{day}/{key}",
                                         *(f"rec/{day}/{key}/{f}" for f in files)])
    for escaped in ("x", "abs", "..\\..\\x"):
        assert not (tmp_path.parent / escaped).exists()
    tally.hostile(f"request id {name}")


@pytest.mark.parametrize("listener", ["front", "back"])
async def test_an_id_already_used_gets_a_suffixed_capture(
    provider: Any, gateway: Any, make_tap: Any, tmp_path: Path, tally: Any, listener: str,
) -> None:
    tap, url = await start(listener, provider, gateway, make_tap)
    keys = []
    for _ in range(3):
        before = {p.name for p in tap.recordings.glob("[0-9]*/*")}
        reply, _ = await exchange(url, request([("X-Request-ID", "taken")], chat_request()))
        assert reply.status == 200
        keys.append(reply.header("X-Request-ID") if listener == "front"
                    else await captured_key(tap, before))
    assert keys == ["taken", "taken+2", "taken+3"]
    day = time.strftime("%Y-%m-%d", time.gmtime())
    files = FRONT_FILES if listener == "front" else BACK_FILES
    for key in keys:
        assert (await tap.wait_compared(key))["request_id"] == key
    assert tree(tmp_path) == sorted(["rec", f"rec/{day}",
                                     *(f"rec/{day}/{key}" for key in keys),
                                     *(f"rec/{day}/{key}/{f}" for key in keys for f in files)])
    tally.hostile("request id already used")
