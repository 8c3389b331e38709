"""`calltap serve` as a real subprocess: bad settings exit 2 with one line before listening;
SIGTERM mid-stream lets streams finish within the grace period, closes every capture, exits 0."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from tests.proxy.conftest import chat_request, chat_stream

SERVE = [sys.executable, "-m", "calltap", "serve"]


def run_serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("CALLTAP_")}
    return subprocess.run(
        [*SERVE, *args], capture_output=True, text=True, timeout=30, cwd=cwd, env=env
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--provider", "http://exa mple"], "provider"),
        (["--provider", "http://127.0.0.1:9", "--back", "nohost"], "HOST:PORT"),
        (["--front", "127.0.0.1:0"], "gateway"),
        (["--provider", "http://127.0.0.1:9", "--config", "missing.toml"], "missing.toml"),
    ],
)
def test_bad_settings_exit_2_with_one_line(tmp_path: Path, args: list[str], fragment: str) -> None:
    result = run_serve(*args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("calltap serve: ") and fragment in lines[0]
    assert result.stdout == ""


def test_busy_port_and_unwritable_recordings_exit_2(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_serve(
            "--provider",
            "http://127.0.0.1:9",
            "--back",
            f"127.0.0.1:{port}",
            "--admin",
            "off",
            "--recordings",
            str(tmp_path / "rec"),
            cwd=tmp_path,
        )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "address already in use" in result.stderr
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run_serve(
        "--provider",
        "http://127.0.0.1:9",
        "--back",
        "127.0.0.1:0",
        "--admin",
        "off",
        "--recordings",
        str(blocker / "rec"),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip().splitlines() == [result.stderr.strip()]
        and "recordings" in result.stderr
    )


async def read_event(stream: asyncio.StreamReader, event: str) -> dict:
    while True:
        line = await asyncio.wait_for(stream.readline(), 30)
        assert line, "serve exited early"
        record = json.loads(line)
        if record["event"] == event:
            return record


async def test_sigterm_mid_stream_closes_captures_and_exits_0(provider, tmp_path: Path) -> None:
    script, provider_url = provider
    script.body = chat_stream("word " * 30)
    script.delay = 0.01
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALLTAP_")}
    process = await asyncio.create_subprocess_exec(
        *SERVE,
        "--provider",
        provider_url,
        "--back",
        "127.0.0.1:0",
        "--admin",
        "off",
        "--recordings",
        str(tmp_path / "rec"),
        "--grace",
        "1.5",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    started = await read_event(process.stdout, "serve.started")
    back = started["back"]
    async with aiohttp.ClientSession() as client:
        finishing = await client.post(
            back + "/v1/chat/completions",
            data=chat_request(),
            headers={"X-Request-ID": "finishing"},
        )
        await finishing.content.readexactly(97)
        script.hold_after = 291
        held = await client.post(
            back + "/v1/chat/completions", data=chat_request(), headers={"X-Request-ID": "held"}
        )
        await held.content.readexactly(291)
        process.send_signal(signal.SIGTERM)
        finished_body = await finishing.read()
        with pytest.raises(aiohttp.ClientPayloadError):
            await held.read()
    assert await asyncio.wait_for(process.wait(), 30) == 0
    output = (await process.stdout.read()).decode()
    lines = {line["event"]: line for line in map(json.loads, output.splitlines())}
    assert lines["serve.stopping"]["in_flight"] == 2
    assert lines["serve.stopped"]["cut"] == 1
    assert b"".join([script.body[:97], finished_body]) == script.body
    captures = tmp_path / "rec"
    assert not list(captures.rglob("*.partial"))
    finishing_pair = json.loads(next(captures.glob("*/finishing/pair.json")).read_text())
    held_pair = json.loads(next(captures.glob("*/held/pair.json")).read_text())
    assert finishing_pair["legs"]["upstream"]["ended"] == "complete"
    assert finishing_pair["legs"]["upstream"]["bytes"] == len(script.body)
    assert held_pair["legs"]["upstream"]["ended"] == "shutdown"
    assert held_pair["legs"]["upstream"]["bytes"] == 291
    assert (next(captures.glob("*/held")) / "upstream.sse").read_bytes() == script.body[:291]
