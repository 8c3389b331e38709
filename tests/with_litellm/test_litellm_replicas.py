"""Two LiteLLM replicas, a calltap beside each, one bucket (a real S3 API server on loopback):
clients on both at once, every pair in the bucket once, whole and compared, the two replicas'
captures of one client request id both kept (`<id>` and `<id>+2`)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio
from tests.support.s3 import S3Server, s3_server
from tests.with_litellm.litellm_stack import (
    CLOCK,
    OPENAI_MODEL,
    STREAM,
    WEATHER,
    Stack,
    open_stack,
    question,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
PER_REPLICA = 3


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("moto")) as server:
        saved = {name: os.environ.get(name) for name in server.environ}
        os.environ.update(server.environ)
        try:
            yield server
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def replicas(s3: S3Server, tmp_path_factory: pytest.TempPathFactory
                   ) -> AsyncIterator[tuple[str, list[Stack]]]:
    bucket = s3.bucket()
    url = f"s3://{bucket}/litellm"
    async with open_stack("replica-a", tmp_path_factory.mktemp("replica-a"),
                          forward_headers=True, bucket=url) as a, \
            open_stack("replica-b", tmp_path_factory.mktemp("replica-b"),
                       forward_headers=True, bucket=url) as b:
        yield bucket, [a, b]


async def stored(stack: Stack) -> None:
    async with asyncio.timeout(60):
        while stack.tap.health()["store"]["backlog_pairs"]:
            await asyncio.sleep(0.1)


async def test_two_litellm_replicas_fill_one_bucket(s3: S3Server,
                                                    replicas: tuple[str, list[Stack]]) -> None:
    bucket, stacks = replicas
    request: dict[str, Any] = {"model": OPENAI_MODEL, "messages": question(),
                               "tools": [WEATHER, CLOCK], **STREAM}
    jobs = [stack.chat(f"{name}-{i}", **request)
            for name, stack in zip("ab", stacks, strict=True) for i in range(PER_REPLICA)]
    jobs += [stack.chat("same-id", **request) for stack in stacks]
    sent = await asyncio.gather(*jobs)
    for reply in sent:
        assert reply.pair["comparison"]["verdict"] == "equal", reply.pair["comparison"]
        assert [name for name, _ in reply.reply.calls()] == ["weather", "clock"]
    await asyncio.gather(*(stored(stack) for stack in stacks))
    objects = s3.objects(bucket, "litellm/")
    pairs = {key.split("/")[2]: orjson.loads(data) for key, data in objects.items()
             if key.endswith("/pair.json")}
    compared = {key: pair for key, pair in pairs.items() if "comparison" in pair}
    expected = {f"{n}-{i}" for n in "ab" for i in range(PER_REPLICA)} | {"same-id", "same-id+2"}
    assert set(compared) == expected
    assert {pair["comparison"]["verdict"] for pair in compared.values()} == {"equal"}
    assert compared["same-id+2"]["stored_as"] == "same-id+2"
    assert compared["same-id+2"]["request_id"] == compared["same-id"]["request_id"] == "same-id"
    for stack in stacks:
        assert not list(Path(stack.tap.recordings).glob("*/*/pair.json"))
    assert s3.environ["AWS_SECRET_ACCESS_KEY"].encode() not in b"".join(objects.values())
