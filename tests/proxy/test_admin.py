"""The admin listener: /healthz and Prometheus /metrics, one registry per instance."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from tests.proxy.conftest import post_chat


async def test_healthz_reports_listeners_and_recorder(topology: dict[str, Any], client) -> None:
    tap = topology["tap"]
    async with client.get(tap.admin_url + "/healthz") as response:
        assert response.status == 200
        health = await response.json()
    assert health["status"] == "ok"
    assert health["listeners"] == {
        "front": tap.front_url,
        "back": tap.back_url,
        "admin": tap.admin_url,
    }
    assert health["recorder"]["recording"] is True
    assert health["recorder"]["recordings"] == str(tap.recordings)
    assert health["recorder"]["held_bytes"] == health["recorder"]["backlog_bytes"] == 0


async def test_metrics_count_requests_bytes_and_pairs(topology, client) -> None:
    tap, provider = topology["tap"], topology["provider"]
    _, headers, _ = await post_chat(client, tap.front_url)
    await tap.wait_compared(headers["X-Request-ID"])
    async with client.get(tap.admin_url + "/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("calltap_requests_total", (("leg", "downstream"), ("status", "200")))] == 1
    assert samples[("calltap_requests_total", (("leg", "upstream"), ("status", "200")))] == 1
    assert samples[("calltap_relayed_bytes_total", (("leg", "downstream"),))] == len(provider.body)
    assert samples[("calltap_pairs_total", (("verdict", "equal"),))] == 1
    assert samples[("calltap_streams_in_flight", (("leg", "downstream"),))] == 0
    assert samples[("calltap_pending_pairs", ())] == 1
    assert samples[("calltap_capture_failures_total", ())] == 0
    first_byte = {leg: (samples[("calltap_first_byte_seconds_count", (("leg", leg),))],
                        samples[("calltap_first_byte_seconds_sum", (("leg", leg),))])
                  for leg in ("downstream", "upstream")}
    assert first_byte["downstream"][0] == first_byte["upstream"][0] == 1
    # The downstream leg waits on the upstream one, so its first byte comes no sooner.
    assert first_byte["downstream"][1] >= first_byte["upstream"][1] > 0


async def test_two_instances_keep_separate_metrics(provider, make_tap, client) -> None:
    _, provider_url = provider
    first = await make_tap(back=("127.0.0.1", 0), provider=provider_url)
    second = await make_tap(back=("127.0.0.1", 0), provider=provider_url)
    async with client.get(first.back_url + "/v1/models") as response:
        await response.read()
    async with client.get(second.admin_url + "/metrics") as response:
        text = await response.text()
    assert 'calltap_requests_total{leg="upstream",status="200"}' not in text
