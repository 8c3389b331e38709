"""A replay as users run it: `replay(...)` runs `calltap replay` as a subprocess while a fake
gateway (in the test's loop) sends its provider traffic to the replay's --back port, the way a
gateway beside calltap does."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calltap.fakes import FakeGateway

REPLAY_TIMEOUT = 120.0


@dataclass(frozen=True)
class Replayed:
    """What `calltap replay` printed and how it exited."""

    exit: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.stdout)

    @property
    def results(self) -> list[dict[str, Any]]:
        return self.json["results"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def replay(*args: str | Path, gateway: FakeGateway | None = None) -> Replayed:
    """`calltap replay ARGS --gateway <a fake gateway> --back <a free port>`; the fake gateway
    (a new faithful-by-default one unless given) sends its upstream requests to that port."""
    port = free_port()
    if gateway is None:
        async with FakeGateway() as fresh:
            return await replay(*args, gateway=fresh)
    gateway.upstream = f"http://127.0.0.1:{port}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "calltap", "replay", *map(str, args), "--gateway", gateway.url,
        "--back", f"127.0.0.1:{port}",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), REPLAY_TIMEOUT)
    assert process.returncode is not None
    return Replayed(process.returncode, stdout.decode(), stderr.decode())
