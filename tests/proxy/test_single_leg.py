"""Single-leg mode: only the front or only the back listener; each capture is checked alone."""

from __future__ import annotations

from tests.proxy.conftest import chat_stream, post_chat


async def test_front_only_checks_the_downstream_leg(provider, make_tap, client, log) -> None:
    script, provider_url = provider
    tap = await make_tap(front=("127.0.0.1", 0), gateway=provider_url)
    assert tap.back_url is None
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200 and body == script.body
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert pair["check"]["verdict"] == "clean"
    assert pair["pairing"] is None
    assert set(pair["legs"]) == {"downstream"}
    checked = log.lines("leg.checked")[-1]
    assert checked["side"] == "downstream" and checked["verdict"] == "clean"


async def test_back_only_checks_the_upstream_leg_and_logs_defects(
    provider, make_tap, client, log
) -> None:
    script, provider_url = provider
    script.body = chat_stream().replace(b"data: [DONE]\n\n", b"")
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url)
    assert tap.front_url is None
    async with client.post(
        tap.back_url + "/v1/chat/completions", data=b"{}", headers={"X-Request-ID": "gw-7"}
    ) as response:
        assert await response.read() == script.body
    pair = await tap.wait_compared("gw-7")
    assert set(pair["legs"]) == {"upstream"}
    assert pair["orphaned"] is False
    assert pair["check"]["verdict"] == "defective"
    assert pair["legs"]["upstream"]["file"] == "upstream.sse"
    defects = log.lines("leg.defect")
    assert [(line["code"], line["side"], line["request_id"]) for line in defects] == [
        ("DONE_MISSING", "upstream", "gw-7")
    ]
    assert log.lines("divergence") == []
