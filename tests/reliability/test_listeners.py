"""Where calltap listens: loopback by default; any other address is refused at start (one line,
exit 2) unless `--allow-remote` / `allow_remote = true` says so."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from calltap.config import is_loopback, load_config

SERVE = [sys.executable, "-m", "calltap", "serve"]
UPSTREAMS = ["--gateway", "http://127.0.0.1:9", "--provider", "http://127.0.0.1:9"]
LOCAL = ["--front", "127.0.0.1:0", "--back", "127.0.0.1:0", "--admin", "127.0.0.1:0"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALLTAP_")}
    return {**env, **extra}


def serve(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SERVE, *UPSTREAMS, *args], capture_output=True, text=True,
                          timeout=30, cwd=cwd, env=clean_env(**env))


def test_every_default_listener_is_loopback() -> None:
    config = load_config(None, {"gateway": "http://127.0.0.1:9", "provider": "http://x:1"}, {})
    assert config.allow_remote is False
    for address in (config.front, config.back, config.admin):
        assert address is not None and is_loopback(address[0])


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "localhost", "LOCALHOST"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.com",
                                  "::ffff:127.0.0.1", "localhost.example.com"])
def test_hosts_beyond_this_machine(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(("flag", "address"), [
    ("--front", "0.0.0.0:0"),
    ("--back", "0.0.0.0:0"),
    ("--admin", "0.0.0.0:0"),
    ("--front", "[::]:0"),
    ("--admin", "192.168.1.2:0"),
])
def test_a_non_loopback_listener_is_refused_with_one_line(
    tmp_path: Path, tally: Any, flag: str, address: str,
) -> None:
    args = [a for pair in zip(LOCAL[::2], LOCAL[1::2], strict=True) if pair[0] != flag
            for a in pair]
    result = serve(*args, flag, address, "--recordings", str(tmp_path / "rec"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    name = flag.removeprefix("--")
    assert lines[0].startswith(f"calltap serve: {name}: ")
    assert "not a loopback address" in lines[0] and "--allow-remote" in lines[0]
    assert not (tmp_path / "rec").exists()
    tally.hostile(f"listener {name} on {address} without --allow-remote")


def test_an_address_from_the_environment_is_refused_too(tmp_path: Path) -> None:
    result = serve(*LOCAL[2:], cwd=tmp_path, CALLTAP_FRONT="0.0.0.0:0")
    assert result.returncode == 2
    assert "front: 0.0.0.0 is not a loopback address" in result.stderr


@pytest.mark.parametrize("how", ["flag", "config", "env"])
async def test_allow_remote_lets_it_listen(tmp_path: Path, how: str) -> None:
    config = tmp_path / "calltap.toml"
    config.write_text("allow_remote = true\n" if how == "config" else "")
    args = [*UPSTREAMS, "--front", "0.0.0.0:0", "--back", "127.0.0.1:0", "--admin", "off",
            "--recordings", str(tmp_path / "rec"), "--config", str(config)]
    if how == "flag":
        args.append("--allow-remote")
    env = clean_env(**({"CALLTAP_ALLOW_REMOTE": "true"} if how == "env" else {}))
    process = await asyncio.create_subprocess_exec(
        *SERVE, *args, cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    try:
        started = json.loads(await asyncio.wait_for(process.stdout.readline(), 30))
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), 30)
    assert started["event"] == "serve.started"
    assert started["front"].startswith("http://0.0.0.0:")
    assert started["config"]["allow_remote"] is True
    assert process.returncode == 0
