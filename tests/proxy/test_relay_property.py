"""The relay law: whatever the body and however the upstream chunks it, the client receives
exactly the upstream's bytes and the capture holds exactly them too."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from tests.support.logs import LogLines
from tests.support.properties import examples
from tests.support.provider import ProviderScript, ScriptedProvider

from calltap.config import Config
from calltap.proxy.app import Calltap
from calltap.proxy.logs import make_logger


@pytest.fixture(scope="module")
def relay_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One provider and one back-only Calltap on a private loop, shared by every example."""
    loop = asyncio.new_event_loop()
    script = ProviderScript(content_type="application/octet-stream")
    recordings = Path(tmp_path_factory.mktemp("relay")) / "rec"

    async def setup() -> dict[str, Any]:
        provider = ScriptedProvider(script)
        await provider.start()
        tap = Calltap(Config(back=("127.0.0.1", 0), provider=provider.url, recordings=recordings,
                             compare_workers=1), logger=make_logger(LogLines()))
        await tap.start()
        return {"provider": provider, "tap": tap, "client": aiohttp.ClientSession()}

    env = loop.run_until_complete(setup())
    env.update(loop=loop, script=script)
    yield env

    async def teardown() -> None:
        await env["client"].close()
        await env["tap"].stop(grace=1)
        await env["provider"].stop()

    loop.run_until_complete(teardown())
    loop.close()


@examples(40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(min_size=0, max_size=20_000),
       sizes=st.lists(st.integers(min_value=1, max_value=4096), max_size=30),
       sse=st.booleans(), content_length=st.booleans())
def test_relay_is_byte_identical(relay_env: dict[str, Any], body: bytes, sizes: list[int],
                                 sse: bool, content_length: bool) -> None:
    script: ProviderScript = relay_env["script"]
    script.body = body
    script.chunk_sizes = sizes
    script.content_type = "text/event-stream" if sse else "application/octet-stream"
    script.content_length = content_length
    tap: Calltap = relay_env["tap"]

    relay_env["count"] = request_id = relay_env.get("count", 0) + 1

    async def run() -> tuple[bytes, dict[str, Any]]:
        async with relay_env["client"].post(
                tap.back_url + "/v1/chat/completions", data=b"{}",
                headers={"X-Request-ID": f"prop-{request_id}"}) as response:
            received = await response.read()
        return received, await tap.wait_compared(f"prop-{request_id}")

    received, pair = relay_env["loop"].run_until_complete(run())
    assert received == body
    leg = pair["legs"]["upstream"]
    assert leg["sha256"] == hashlib.sha256(body).hexdigest()
    assert leg["bytes"] == len(body) == leg["bytes_relayed"]
    directory = next(tap.recordings.glob(f"*/{pair['request_id']}"))
    assert (directory / leg["file"]).read_bytes() == body
