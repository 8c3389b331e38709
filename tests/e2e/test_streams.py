"""The topology under concurrency and when the client walks away mid-stream."""

from __future__ import annotations

import asyncio

import orjson

from calltap.fakes import DEFECTS, FAITHFUL
from calltap.fakes.provider import CHAT_PATH, TEXT_REQUEST, TOOLS_REQUEST


async def test_concurrent_requests_with_every_defect_never_cross(topology):
    defects = [FAITHFUL, *(defect for defect in DEFECTS.values() if defect.request is None)]
    requests = [
        {**TOOLS_REQUEST, "messages": [{"role": "user", "content": f"question {n}"}]}
        for n in range(len(defects))
    ]
    sent = await asyncio.gather(
        *(topology.send(request, defect) for request, defect in zip(requests, defects, strict=True))
    )
    by_body = {bytes(e.request_body): bytes(e.response_body) for e in topology.provider.exchanges}
    for request, defect, one in zip(requests, defects, sent, strict=True):
        assert one.file("upstream.request") == orjson.dumps(request)
        assert one.file("upstream.sse") == by_body[orjson.dumps(request)]
        assert one.pair["comparison"]["verdict"] == defect.verdict
        assert defect.codes <= {f["code"] for f in one.pair["comparison"]["findings"]}
        assert (one.pair["pairing"], one.pair["attempts"]) == (defect.pairing, defect.attempts)


async def test_a_client_leaving_mid_stream_is_recorded_as_aborted_on_both_legs(make_topology):
    async with make_topology(events_delay=0.02, text_events=500) as topology:
        url = f"{topology.calltap.front_url}{CHAT_PATH}"
        async with topology.client.post(url, json=TEXT_REQUEST) as reply:
            key = reply.headers["X-Request-ID"]
            first = await reply.content.readany()
            reply.close()
        pair = await topology.calltap.wait_compared(key)
        (directory,) = topology.calltap.recordings.glob(f"*/{key}")
        (exchange,) = topology.provider.exchanges
    downstream = (directory / "downstream.sse").read_bytes()
    upstream = (directory / "upstream.sse").read_bytes()
    assert pair["legs"]["downstream"]["ended"] == "client_aborted"
    assert pair["legs"]["upstream"]["ended"] == "client_aborted"
    assert not exchange.complete
    assert downstream.startswith(first)
    assert bytes(exchange.response_body).startswith(upstream)
    assert b"[DONE]" not in downstream + upstream
    (aborted, *_) = topology.log.lines("leg.aborted", key)
    assert aborted["ended"] == "client_aborted"
