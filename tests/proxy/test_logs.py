"""The JSON log lines people tail: pair.compared and one divergence line per fatal or
negotiable finding, with nothing secret in them."""

from __future__ import annotations

import json
from typing import Any

from tests.proxy.conftest import chat_stream, post_chat


async def test_truncating_gateway_logs_divergences(topology: dict[str, Any], client, log) -> None:
    tap, provider, gateway = topology["tap"], topology["provider"], topology["gateway"]
    provider.body = chat_stream("secret-text-marker in the answer")
    cut = provider.body.index(b'"tool_calls"')
    gateway.cut_after = cut - 10
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200
    assert body == provider.body[: cut - 10]
    key = headers["X-Request-ID"]
    pair = await tap.wait_compared(key)
    assert pair["comparison"]["verdict"] in ("diverged", "inconclusive")
    raw_lines = log.getvalue().splitlines()
    compared = [json.loads(line) for line in raw_lines if '"pair.compared"' in line]
    assert len(compared) == 1
    line = compared[0]
    assert line["request_id"] == key
    assert line["level"] == "info"
    assert line["timestamp"].endswith("Z")
    assert line["verdict"] == pair["comparison"]["verdict"]
    assert line["pairing"] == "header"
    assert line["attempts"] == 1
    assert line["bytes_upstream"] == len(provider.body)
    assert line["bytes_downstream"] == len(body)
    assert line["capture"].endswith(key)
    divergences = [json.loads(line) for line in raw_lines if '"divergence"' in line]
    breaking = [
        f for f in pair["comparison"]["findings"] if f["severity"] in ("fatal", "negotiable")
    ]
    assert len(divergences) == len(breaking) > 0
    assert {d["code"] for d in divergences} == {f["code"] for f in breaking}
    assert "DONE_MISSING" in line["codes"] or "TOOL_CALLS_DROPPED" in line["codes"]
    for divergence in divergences:
        assert set(divergence) >= {
            "event",
            "level",
            "timestamp",
            "code",
            "severity",
            "choice",
            "count",
            "request_id",
            "capture",
        }
        assert divergence["request_id"] == key
    assert "secret-text-marker" not in log.getvalue()
    assert "Paris" not in log.getvalue()


async def test_startup_and_shutdown_lines(provider, make_tap, log) -> None:
    _, provider_url = provider
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url)
    started = log.lines("serve.started")[0]
    assert started["back"] == tap.back_url
    assert started["admin"] == tap.admin_url
    assert started["front"] is None
    await tap.stop()
    assert log.lines("serve.stopped")[0]["cut"] == 0
