"""`calltap replay` through a real LiteLLM: a pair recorded through LiteLLM replays through the
same release to the same verdict and codes.

calltap's back listens on a fixed port LiteLLM's config points at; once the pairs are recorded
that calltap stops and `calltap replay` (a subprocess, as users run it) takes the port over as the
cassette provider, with LiteLLM still running. LiteLLM needs its master key back: the recording
redacted it, `--header` supplies it.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import pytest_asyncio
from litellm_stack import (
    ANTHROPIC_MODEL,
    CLOCK,
    MASTER_KEY,
    OPENAI_MODEL,
    STREAM,
    WEATHER,
    LiteLLM,
    Stack,
    free_port,
    litellm_config,
    question,
    start_litellm,
    stop_litellm,
)
from tests.e2e.conftest import LogLines

from calltap.config import Config
from calltap.fakes.provider import FakeProvider
from calltap.proxy.app import Calltap

pytestmark = pytest.mark.asyncio(loop_scope="module")


REQUESTS = {
    "openai-tools": {"model": OPENAI_MODEL, "messages": question(), "tools": [WEATHER, CLOCK],
                     **STREAM},
    "anthropic-tools": {"model": ANTHROPIC_MODEL, "messages": question(),
                        "tools": [WEATHER, CLOCK], **STREAM},
}


@dataclass
class Recorded:
    """LiteLLM, still running, and the pairs recorded through it."""

    litellm: LiteLLM
    back_port: int
    pairs: dict[str, Path]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def recorded(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Recorded]:
    """Record REQUESTS through calltap and LiteLLM (OpenAI and Anthropic routes), then stop
    calltap: LiteLLM keeps running, its provider port is free for the replay."""
    directory = tmp_path_factory.mktemp("replay")
    back_port, litellm_port = free_port(), free_port()
    log = LogLines()
    async with FakeProvider() as provider:
        config = Config(front=("127.0.0.1", 0), gateway=f"http://127.0.0.1:{litellm_port}",
                        back=("127.0.0.1", back_port), provider=provider.url,
                        recordings=directory / "recordings", compare_workers=1)
        async with Calltap(config, log_stream=log) as tap:
            litellm = await start_litellm(
                directory, litellm_port, litellm_config(f"http://127.0.0.1:{back_port}", True))
            client = openai.AsyncOpenAI(base_url=f"{tap.front_url}/v1", api_key=MASTER_KEY,
                                        max_retries=0, timeout=30.0)
            try:
                stack = Stack(provider, tap, litellm, log, client)
                for request_id, request in REQUESTS.items():
                    await stack.chat(request_id, **request)
            except BaseException:
                stop_litellm(litellm)
                raise
            finally:
                await client.close()
    pairs = {path.name: path for path in (directory / "recordings").glob("*/*")}
    try:
        yield Recorded(litellm, back_port, pairs)
    finally:
        stop_litellm(litellm)


async def replay(recorded: Recorded, request_id: str, *extra: str) -> tuple[int, dict[str, Any]]:
    """`calltap replay` of one recorded pair through LiteLLM, at once, as JSON."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "calltap", "replay", str(recorded.pairs[request_id]),
        "--gateway", recorded.litellm.url, "--back", f"127.0.0.1:{recorded.back_port}",
        "--pace", "none", "--json", *extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    assert stdout, stderr.decode()
    return process.returncode, json.loads(stdout)


@pytest.mark.parametrize("request_id", list(REQUESTS))
async def test_a_pair_recorded_through_litellm_replays_through_it_to_the_same_verdict(
        recorded, request_id):
    code, output = await replay(recorded, request_id,
                                "--header", f"Authorization: Bearer {MASTER_KEY}")
    (result,) = output["results"]
    assert code == 0, output
    assert result["result"] == "reproduced"
    assert result["replayed"]["verdict"] == result["recorded"]["verdict"] == "equal"
    assert result["replayed"]["codes"] == result["recorded"]["codes"]
    assert result["misses"] == []


async def test_without_its_master_key_litellm_refuses_and_the_replay_says_what_to_pass(
        recorded):
    code, output = await replay(recorded, "openai-tools")
    (result,) = output["results"]
    assert code == 1, output
    assert any(re.fullmatch(r"the gateway answered \d+ without calling the provider", note)
               for note in result["notes"]), result["notes"]
    assert "the recording redacted authorization: pass --header 'authorization: …'" in (
        result["notes"])
