"""What the real-gateway suites share: a gateway release run as a subprocess on loopback (LiteLLM
from its venv, Portkey from its node_modules), started until it answers its readiness path and
stopped at the end; and the openai SDK's own stream accumulator run on what a client received."""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState

LOG_TAIL = 6000


@dataclass
class GatewayProcess:
    """A gateway's process, its URL, its log file and how long it took to answer ready."""

    name: str
    process: subprocess.Popen[bytes]
    url: str
    log: Path
    started_in: float = 0.0

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-LOG_TAIL:]


async def start_gateway(name: str, command: list[str], *, port: int, log: Path,
                        env: dict[str, str], cwd: Path, ready_path: str,
                        timeout: float) -> GatewayProcess:
    """Start `command` (a gateway listening on 127.0.0.1:`port`) and wait until `ready_path`
    answers 200; fail with its log if it exits or is not ready within `timeout` seconds."""
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   cwd=cwd)
    gateway = GatewayProcess(name, process, f"http://127.0.0.1:{port}", log)
    try:
        await _wait_ready(gateway, ready_path, started + timeout)
    except BaseException:
        stop_gateway(gateway)
        raise
    gateway.started_in = time.monotonic() - started
    return gateway


async def _wait_ready(gateway: GatewayProcess, ready_path: str, deadline: float) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while time.monotonic() < deadline:
            if gateway.process.poll() is not None:
                pytest.fail(f"{gateway.name} exited with {gateway.process.returncode} before it"
                            f" was ready; its log ({gateway.log}):\n{gateway.log_tail()}")
            try:
                async with session.get(gateway.url + ready_path) as response:
                    if response.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.1)
    pytest.fail(f"{gateway.name} was not ready in time; its log ({gateway.log}):\n"
                f"{gateway.log_tail()}")


def stop_gateway(gateway: GatewayProcess) -> None:
    gateway.process.terminate()
    try:
        gateway.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        gateway.process.kill()
        gateway.process.wait()


def sdk_accumulator_error(chunks: list[Any]) -> BaseException | None:
    """What the openai SDK's own stream accumulator (the one `chat.completions.stream()` runs)
    raises on these chunks, if anything."""
    state = ChatCompletionStreamState()
    try:
        for chunk in chunks:
            state.handle_chunk(chunk)
    except Exception as error:  # which error the SDK raises is the point
        return error
    return None
