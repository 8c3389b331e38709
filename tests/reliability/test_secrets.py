"""Planted secrets on both legs, in both directions: after the run no file under the recordings
and no log line holds any of them; configured body masks apply to the recorded bodies; and
`calltap serve` run under umask 0 still creates directories 0700 and files 0600."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.proxy.conftest import *  # noqa: F403  (its fixtures: provider, gateway, ...)
from tests.proxy.conftest import chat_request, chat_stream
from tests.reliability.test_hostile_http import POST_HEAD, exchange, serve_raw, sse_response

EXTRA_HEADER = "X-Tenant-Token"
MASK = r"sk-[A-Za-z0-9]{20,}"
REQUEST_SECRETS = {
    "Authorization": "Bearer sk-authAAAAAAAAAAAAAAAAAAAAAAAA1",
    "x-api-key": "planted-xapikey-7f3a91",
    "api-key": "planted-apikey-52bd07",
    "Cookie": "session=planted-cookie-c4e8",
    "Proxy-Authorization": "Basic planted-proxyauth-9d21",
    EXTRA_HEADER: "planted-tenant-request-66a0",
}
RESPONSE_SECRETS = {
    "Set-Cookie": "session=planted-setcookie-1b7e; HttpOnly",
    "x-api-key": "planted-response-xapikey-3c55",
    EXTRA_HEADER: "planted-tenant-response-e812",
}
BODY_SECRET = "sk-bodyBBBBBBBBBBBBBBBBBBBBBBBB2"
ANSWER_SECRET = "sk-answerCCCCCCCCCCCCCCCCCCCCC3"


def planted() -> list[str]:
    return [*REQUEST_SECRETS.values(), *RESPONSE_SECRETS.values(), BODY_SECRET, ANSWER_SECRET]


def hits_in(haystack: bytes) -> int:
    """How many planted values (or their distinctive part) occur in `haystack`."""
    return sum(haystack.count(secret.split("=")[-1].split(" ")[-1].split(";")[0].encode())
               for secret in planted())


def recorded_bytes(root: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


async def test_planted_secrets_reach_no_file_and_no_log_line(
    gateway: Any, make_tap: Any, client: aiohttp.ClientSession, log: Any, tmp_path: Path,
    caplog: pytest.LogCaptureFixture, tally: Any,
) -> None:
    async with serve_raw() as raw_provider:
        await run_planted(gateway, make_tap, raw_provider, client, log, tmp_path, caplog, tally)


async def run_planted(gateway: Any, make_tap: Any, raw_provider: Any,
                      client: aiohttp.ClientSession, log: Any, tmp_path: Path,
                      caplog: pytest.LogCaptureFixture, tally: Any) -> None:
    stream = chat_stream(f"your key is {ANSWER_SECRET}")
    raw_provider.response = sse_response(
        stream, *(f"{name}: {value}".encode() for name, value in RESPONSE_SECRETS.items()))
    gateway_script, gateway_url = gateway
    tap = await make_tap(front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0),
                         provider=raw_provider.url, redact_headers=(EXTRA_HEADER.lower(),),
                         mask_body_patterns=(MASK,))
    gateway_script.target = tap.back_url
    body = chat_request(f"use {BODY_SECRET} please")
    async with client.post(tap.front_url + "/v1/chat/completions", data=body,
                           headers=REQUEST_SECRETS) as response:
        assert response.status == 200
        assert await response.read() == stream
        assert response.headers["Set-Cookie"] == RESPONSE_SECRETS["Set-Cookie"]
        key = response.headers["X-Request-ID"]
    assert REQUEST_SECRETS["Authorization"].encode() in raw_provider.requests[0]
    assert BODY_SECRET.encode() in raw_provider.requests[0]
    pair = await tap.wait_compared(key)
    assert pair["comparison"]["verdict"] == "equal"
    for side in ("downstream", "upstream"):
        leg = pair["legs"][side]
        for name in REQUEST_SECRETS:
            assert leg["request_headers"][name.lower()] == "[redacted]"
        for name in RESPONSE_SECRETS:
            assert leg["response_headers"][name.lower()] == "[redacted]"
    directory = next(tap.recordings.glob(f"*/{key}"))
    for name in ("downstream.request", "upstream.request"):
        assert b"use [masked] please" in (directory / name).read_bytes()
    assert b'"content":"[masked] "' in (directory / "upstream.sse").read_bytes()
    for refused in (POST_HEAD + f"Authorization: {REQUEST_SECRETS['Authorization']}\r\n"
                    f"X-Bad: a\0b\r\nContent-Length: 2\r\n\r\n{{}}".encode(),
                    POST_HEAD + f"x-api-key: {REQUEST_SECRETS['x-api-key']}\r\n"
                    f"X-Big: {'a' * 20_000}\r\n\r\n".encode()):
        reply, _ = await exchange(tap.front_url, refused)
        assert reply.status in (400, 431)
        assert hits_in(reply.body) == 0
    assert [line["status"] for line in log.lines("request.refused")] == [400, 431]
    hits = hits_in(recorded_bytes(tmp_path)) + hits_in(log.getvalue().encode())
    hits += hits_in(caplog.text.encode())
    tally.secrets_found(hits)
    assert hits == 0
    tally.hostile("secrets in request and response headers and bodies")


SERVE_CONFIG = f"""
redact_headers = ["{EXTRA_HEADER}"]
mask_body_patterns = ['{MASK}']
"""


async def test_serve_under_umask_0_keeps_captures_private_and_logs_clean(
    provider: Any, tmp_path: Path, tally: Any,
) -> None:
    script, provider_url = provider
    script.body = chat_stream(f"your key is {ANSWER_SECRET}")
    config = tmp_path / "calltap.toml"
    config.write_text(SERVE_CONFIG)
    recordings = tmp_path / "rec"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALLTAP_")}
    process = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", 'umask 0 && exec "$0" "$@"', sys.executable, "-m", "calltap", "serve",
        "--provider", provider_url, "--back", "127.0.0.1:0", "--admin", "off",
        "--recordings", str(recordings), "--config", str(config), cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    try:
        first = json.loads(await asyncio.wait_for(process.stdout.readline(), 30))
        assert first["event"] == "serve.started"
        back = first["back"]
        async with aiohttp.ClientSession() as session, session.post(
                back + "/v1/chat/completions", data=chat_request(f"use {BODY_SECRET} please"),
                headers={**REQUEST_SECRETS, "X-Request-ID": "umask-0"}) as response:
            assert await response.read() == script.body
        for refused in (POST_HEAD + f"Cookie: {REQUEST_SECRETS['Cookie']}\r\n"
                        f"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n".encode(),
                        POST_HEAD + f"api-key: {REQUEST_SECRETS['api-key']}\r\n"
                        f"X-Big: {'b' * 20_000}\r\n\r\n".encode()):
            reply, _ = await exchange(back, refused)
            assert reply.status in (400, 431)
        for _ in range(200):
            if (pair_json := next(recordings.glob("*/umask-0/pair.json"), None)) is not None:
                break
            await asyncio.sleep(0.05)
        assert pair_json is not None
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0
    events = [json.loads(line)["event"] for line in stdout.decode().splitlines()]
    assert events.count("request.refused") == 2
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in [recordings, *recordings.rglob("*")]}
    assert len([path for path in modes if "_index" not in path.parts]) == 6
    assert any(path.suffix == ".parquet" for path in modes)  # the index, private too
    for path, mode in modes.items():
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    hits = hits_in(recorded_bytes(recordings)) + hits_in(stdout) + hits_in(stderr)
    tally.secrets_found(hits)
    assert hits == 0
    tally.hostile("calltap serve under umask 0")
