"""What the load, soak, slow-client and crash tests run: `calltap serve` as a real subprocess
(so its memory and file descriptors are its own, read from /proc) between a fake gateway and a
streaming provider served by the test process on loopback.

`streaming_provider()` answers every chat request with `max_tokens` text events (an OpenAI chat
stream: role delta, text deltas, finish reason, `[DONE]`), built one event at a time so a long
answer costs no memory, and keeps the sha256 of every answer it sent; it is the scripted
provider of tests/support, whose `gate` holds each stream after its first event until that many
streams are open at once: the only way to be sure they really overlapped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families
from tests.support.logs import parse_lines, select
from tests.support.provider import ProviderScript, ScriptedProvider, text_events

from calltap.fakes import FakeGateway
from calltap.fakes.provider import CHAT_PATH

MIB = 1024 * 1024
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
def raise_fd_limit(wanted: int) -> int:
    """Raise this process's soft limit on open files towards `wanted` (never past the hard
    limit); subprocesses inherit it. Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def chat_body(content: str, events: int) -> bytes:
    """A streamed chat request asking for `events` text events."""
    return orjson.dumps({"model": "gpt-test", "stream": True, "max_tokens": events,
                         "messages": [{"role": "user", "content": content}]})


def streaming_provider(*, delay: float = 0.0) -> ScriptedProvider:
    """A provider answering each chat request with `max_tokens` text events, one write each,
    `delay` seconds apart; it keeps the sha256 of every answer it finished (`sent`)."""
    return ScriptedProvider(ProviderScript(events=text_events, delay=delay))


def proc_rss(pid: int) -> int:
    """The resident set of `pid` in bytes (VmRSS)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE).group(1)) * 1024


def proc_fds(pid: int) -> list[str]:
    """Where each open file descriptor of `pid` points."""
    targets = []
    for entry in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            targets.append(os.readlink(f"/proc/{pid}/fd/{entry}"))
    return targets


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as {'name{labels}': value}, read by prometheus-client's own parser."""
    return {
        sample.name + (
            "{" + ",".join(f'{k}="{v}"' for k, v in sample.labels.items()) + "}"
            if sample.labels else ""): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@dataclass
class Served:
    """A running `calltap serve` subprocess and its announced listeners."""

    process: subprocess.Popen[bytes]
    log_path: Path
    recordings: Path
    urls: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss(self) -> int:
        return proc_rss(self.pid)

    def fds(self) -> list[str]:
        return proc_fds(self.pid)

    def lines(self, event: str | None = None) -> list[dict[str, Any]]:
        return select(parse_lines(self.log_path.read_text()), event)

    async def metrics(self, client: aiohttp.ClientSession) -> dict[str, float]:
        async with client.get(self.urls["admin"] + "/metrics") as response:
            return parse_metrics(await response.text())

    async def health(self, client: aiohttp.ClientSession) -> dict[str, Any]:
        async with client.get(self.urls["admin"] + "/healthz") as response:
            return await response.json()

    async def compared(self, client: aiohttp.ClientSession) -> int:
        """Pairs compared (or legs checked) so far, whatever the verdict."""
        values = await self.metrics(client)
        return int(sum(v for k, v in values.items() if k.startswith("calltap_pairs_total")))

    async def wait_compared(self, client: aiohttp.ClientSession, count: int,
                            timeout: float = 180.0) -> None:
        async with asyncio.timeout(timeout):
            while await self.compared(client) < count:
                await asyncio.sleep(0.2)

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def wait(self, timeout: float = STOP_TIMEOUT) -> int:
        async with asyncio.timeout(timeout):
            while self.process.poll() is None:
                await asyncio.sleep(0.05)
        return self.process.returncode

    def end(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL of its own process group)."""
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_TIMEOUT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


async def launch(workdir: Path, recordings: Path, *, gateway: str | None, provider: str,
                 settings: dict[str, Any] | None = None, grace: float = 10.0) -> Served:
    """`python -m calltap serve` on ephemeral loopback ports, in its own process group, with
    `settings` given as CALLTAP_<NAME> variables; returns once it logged `serve.started`."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CALLTAP_")}
    env.update({f"CALLTAP_{name.upper()}": str(value) for name, value in (settings or {}).items()})
    argv = [sys.executable, "-m", "calltap", "serve", "--back", "127.0.0.1:0",
            "--provider", provider, "--admin", "127.0.0.1:0", "--recordings", str(recordings),
            "--grace", str(grace)]
    argv += ["--front", "127.0.0.1:0", "--gateway", gateway] if gateway else ["--front", "off"]
    log_path = workdir / f"calltap-{len(list(workdir.glob('calltap-*.log')))}.log"
    with log_path.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=workdir, env=env,
                                   start_new_session=True)
    served = Served(process, log_path, recordings)
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            while True:
                started = [line for line in log_path.read_text().splitlines()
                           if '"serve.started"' in line]
                if started:
                    served.urls = json.loads(started[0])
                    return served
                if process.poll() is not None:
                    raise RuntimeError(f"calltap serve exited: {log_path.read_text()[-2000:]}")
                await asyncio.sleep(0.05)
    except BaseException:
        served.end()
        raise


@dataclass
class Stack:
    """client -> calltap front -> fake gateway -> calltap back -> provider."""

    provider: ScriptedProvider
    gateway: FakeGateway
    calltap: Served
    client: aiohttp.ClientSession

    @property
    def front(self) -> str:
        return self.calltap.urls["front"]

    async def stream(self, key: str, content: str, events: int) -> bytes:
        """One streamed chat request through the front; the whole body the client got."""
        async with self.client.post(self.front + CHAT_PATH, data=chat_body(content, events),
                                    headers={"X-Request-ID": key,
                                             "Content-Type": "application/json"}) as reply:
            assert reply.status == 200
            assert reply.headers["X-Request-ID"] == key
            return await reply.read()

    def pair(self, key: str) -> dict[str, Any]:
        (path,) = self.calltap.recordings.glob(f"*/{key}/pair.json")
        return orjson.loads(path.read_bytes())


@asynccontextmanager
async def stack(workdir: Path, provider: ScriptedProvider,
                **settings: Any) -> AsyncIterator[Stack]:
    """Start `provider`, a faithful fake gateway and `calltap serve` between them (with
    `settings`), and a client session without connection limit; stop them all after."""
    async with provider, FakeGateway() as gateway:
        calltap = await launch(workdir, workdir / "recordings", gateway=gateway.url,
                               provider=provider.url, settings=settings)
        try:
            gateway.upstream = calltap.urls["back"]
            connector = aiohttp.TCPConnector(limit=0)
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=120)
            async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                             auto_decompress=False) as client:
                yield Stack(provider, gateway, calltap, client)
        finally:
            calltap.end()
