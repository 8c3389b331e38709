"""Which requests are paired and compared: every dialect's endpoints, from the dialect registry,
so a dialect's route is compared by default wherever the gateway mounts it."""

from __future__ import annotations

from typing import Any

import pytest
from tests.proxy.conftest import chat_request

from calltap.config import Config
from calltap.dialects import COMPARED_PATHS, DIALECTS


def test_the_default_compared_paths_are_every_dialects_endpoints() -> None:
    assert Config().compared_paths == COMPARED_PATHS
    for dialect in DIALECTS:
        assert set(dialect.PATHS) <= set(COMPARED_PATHS)


@pytest.mark.parametrize(
    "path",
    ["/v1/chat/completions", "/openai/deployments/gpt-4o/chat/completions", "/chat/completions"],
)
async def test_a_chat_route_mounted_anywhere_is_paired_and_compared(
    topology: dict[str, Any], client, path: str
) -> None:
    tap = topology["tap"]
    async with client.post(tap.front_url + path + "?api-version=2024-10-21",
                           data=chat_request()) as response:
        assert response.status == 200
        await response.read()
        key = response.headers["X-Request-ID"]
    pair = await tap.wait_compared(key)
    assert pair["pairing"] == "header"
    assert pair["comparison"]["verdict"] == "equal"
    assert pair["legs"]["upstream"]["path"] == path
