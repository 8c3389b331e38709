"""Past what the machine can record, calltap sheds recording, not traffic: while its loop runs late
(here made late by blocking it, as a starved process would be), new requests are relayed
byte-identical and unrecorded, which is logged once (`recording.paused`, reason `overload`),
counted by leg, and shown in /healthz; two calm seconds later recording resumes and says how
many legs went unrecorded. In a paired topology a shed request leaves no capture and no orphan
on either side, and a back attempt with no recorded front leg is not recorded for a pairing
window after the shedding."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from tests.proxy.conftest import post_chat
from tests.support.topology import scripted_topology

from calltap.proxy.app import Calltap
from calltap.proxy.overload import CALM_SECONDS, LATE_WINDOW

MAX_LAG = 0.02
STALL = 0.1
"""Each block of the loop: every lag probe fires at least this much minus its interval late."""


async def lagging(seconds: float) -> None:
    """Block the loop `STALL` at a time for `seconds`, letting one iteration run in between."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        time.sleep(STALL)
        await asyncio.sleep(0)


async def until(condition: Any, timeout: float = 10.0) -> None:
    ends = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < ends, "timed out"
        await asyncio.sleep(0.02)


async def shed(tap: Calltap) -> None:
    await lagging(2 * LATE_WINDOW * STALL)
    await until(lambda: tap.recording.governor.shedding)


async def unrecorded(client, tap: Calltap) -> dict[tuple[str, str], float]:
    async with client.get(tap.admin_url + "/metrics") as response:
        text = await response.text()
    return {(s.labels["leg"], s.labels["reason"]): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == "calltap_unrecorded_legs_total"}


async def test_a_late_loop_sheds_recording_then_two_calm_seconds_resume_it(
        provider, make_tap, client, log) -> None:
    script, provider_url = provider
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url, max_loop_lag=MAX_LAG)
    await shed(tap)
    async with client.get(tap.admin_url + "/healthz") as response:
        health = await response.json()
    assert health["recorder"]["overloaded"] is True
    assert health["recorder"]["recording"] is False
    assert health["recorder"]["paused"] is False
    for request_id in ("shed-1", "shed-2"):
        async with client.post(tap.back_url + "/v1/chat/completions", data=b"{}",
                               headers={"X-Request-ID": request_id}) as response:
            assert await response.read() == script.body
    assert list(tap.recordings.glob("[0-9]*/*")) == []
    (paused,) = log.lines("recording.paused")
    assert paused["reason"] == "overload" and paused["loop_lag"] > MAX_LAG
    counts = await unrecorded(client, tap)
    assert counts[("upstream", "overload")] == 2
    assert sum(counts.values()) == 2

    started = time.monotonic()
    await until(lambda: not tap.recording.governor.shedding, timeout=CALM_SECONDS + 5)
    assert time.monotonic() - started >= CALM_SECONDS - 0.2
    (resumed,) = log.lines("recording.resumed")
    assert resumed["reason"] == "overload" and resumed["unrecorded"] == 2
    assert resumed["paused_for"] >= CALM_SECONDS
    async with client.post(tap.back_url + "/v1/chat/completions", data=b"{}",
                           headers={"X-Request-ID": "after"}) as response:
        assert await response.read() == script.body
    pair = await tap.wait_compared("after")
    assert pair["legs"]["upstream"]["file"] is not None
    assert [p.name for p in tap.recordings.glob("[0-9]*/*")] == ["after"]
    async with client.get(tap.admin_url + "/metrics") as response:
        assert "calltap_recording_shed 0.0" in await response.text()


async def test_one_long_stall_sheds_nothing(provider, make_tap, client, log) -> None:
    script, provider_url = provider
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url, max_loop_lag=MAX_LAG)
    time.sleep(1.5)
    await asyncio.sleep(0.2)
    async with client.post(tap.back_url + "/v1/chat/completions", data=b"{}",
                           headers={"X-Request-ID": "kept"}) as response:
        assert await response.read() == script.body
    await tap.wait_compared("kept")
    assert log.lines("recording.paused") == []
    assert tap.recording.governor.lag >= 1.4


async def test_a_shed_pair_leaves_no_capture_and_no_orphan_on_either_side(
        tmp_path: Path, client) -> None:
    async with scripted_topology(tmp_path / "rec", max_loop_lag=MAX_LAG,
                                 pairing_window=60.0) as opened:
        tap, provider, log = opened.tap, opened.provider, opened.log
        await shed(tap)
        status, headers, body = await post_chat(client, tap.front_url)
        assert status == 200 and body == provider.script.body
        assert await unrecorded(client, tap) == {
            ("downstream", "overload"): 1, ("upstream", "overload"): 1,
            ("downstream", "quota"): 0, ("upstream", "quota"): 0}
        await until(lambda: not tap.recording.governor.shedding, timeout=CALM_SECONDS + 5)

        async with client.post(tap.back_url + "/v1/chat/completions", data=b"{}",
                               headers={"X-Request-ID": "late-attempt"}) as response:
            assert await response.read() == provider.script.body
        status, headers, body = await post_chat(client, tap.front_url)
        assert status == 200 and body == provider.script.body
        pair = await tap.wait_compared(headers["X-Request-ID"])
        assert pair["comparison"]["verdict"] == "equal"
        await tap.pairs.housekeep()
        assert [p.name for p in tap.recordings.glob("[0-9]*/*")] == [headers["X-Request-ID"]]
        assert log.lines("pair.orphaned") == []
        assert (await unrecorded(client, tap))[("upstream", "overload")] == 2
