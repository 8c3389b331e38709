"""Under a load past what the workers can compare, calltap sheds comparisons, not traffic: with
one worker busy (its slot held), a capture arriving to a full backlog and one that waited past
`compare_deadline` are not compared. Each is relayed whole, recorded (masked as a worker would
have), logged once (`pair.skipped`), counted, finalized with a `skipped` pair.json, kept under
`keep = diverged` (an equal pair compared live is not), and `calltap scan` compares it later with
the verdict a live comparison would have given."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families
from tests.proxy.conftest import post_chat
from tests.support.topology import scripted_topology

from calltap.proxy.app import Calltap

DEADLINE = 1.0
DIVERGING = (b"Paris1", b"Rome1")


async def metrics(client, tap: Calltap) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with client.get(tap.admin_url + "/metrics") as response:
        text = await response.text()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def healthz(client, tap: Calltap) -> dict[str, Any]:
    async with client.get(tap.admin_url + "/healthz") as response:
        return await response.json()


async def until_waiting(tap: Calltap, count: int) -> None:
    for _ in range(200):
        if len(tap.comparisons.backlog) == count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(tap.comparisons.backlog)} comparisons waiting, not {count}")


async def test_shed_pairs_are_logged_counted_kept_and_scanned_later(tmp_path: Path,
                                                                    client) -> None:
    recordings = tmp_path / "rec"
    async with scripted_topology(recordings, compare_deadline=DEADLINE,
                                 max_compare_backlog=1, mask_body_patterns=("weather",),
                                 keep="diverged", keep_equal_sample=0.0) as opened:
        tap, provider, gateway, log = opened.tap, opened.provider, opened.gateway, opened.log
        answer = provider.script.body
        provider.script.chunk_size = len(answer)
        busy = tap.comparisons.backlog.turn(time.time())
        await busy.__aenter__()

        gateway.script.replace = DIVERGING
        status, headers, body = await post_chat(client, tap.front_url)
        assert status == 200 and body == answer.replace(*DIVERGING) != answer
        late = headers["X-Request-ID"]
        await until_waiting(tap, 1)
        assert (await healthz(client, tap))["compare_backlog"] == 1
        assert (await metrics(client, tap))[("calltap_compare_backlog_pairs", ())] == 1

        gateway.script.replace = None
        status, headers, body = await post_chat(client, tap.front_url)
        assert status == 200 and body == answer
        full = headers["X-Request-ID"]
        full_pair = await tap.wait_compared(full)

        await asyncio.sleep(DEADLINE + 0.2)
        await busy.__aexit__(None, None, None)
        late_pair = await tap.wait_compared(late)
        status, headers, _ = await post_chat(client, tap.front_url)
        compared = await tap.wait_compared(headers["X-Request-ID"])
        discarded = headers["X-Request-ID"]

        counted = await metrics(client, tap)
        health = await healthz(client, tap)

    skipped = [{name: line[name] for name in ("request_id", "capture", "reason", "backlog",
                                              "level")} for line in log.lines("pair.skipped")]
    assert skipped == [
        {"request_id": full, "capture": str(recordings / _day(tap, full) / full),
         "reason": "backlog_full", "backlog": 1, "level": "warning"},
        {"request_id": late, "capture": str(recordings / _day(tap, late) / late),
         "reason": "deadline", "backlog": 1, "level": "warning"},
    ]
    waited = {line["request_id"]: line["waited"] for line in log.lines("pair.skipped")}
    assert waited[full] < DEADLINE < waited[late]
    assert not log.lines("pair.compared", full) and not log.lines("pair.compared", late)
    assert log.lines("pair.compared", headers["X-Request-ID"])[0]["verdict"] == "equal"

    assert counted[("calltap_pairs_skipped_total", (("reason", "backlog_full"),))] == 1
    assert counted[("calltap_pairs_skipped_total", (("reason", "deadline"),))] == 1
    assert counted[("calltap_pairs_total", (("verdict", "equal"),))] == 1
    assert counted[("calltap_compare_backlog_pairs", ())] == 0
    assert health["compare_backlog"] == 0

    assert full_pair["skipped"] == {"reason": "backlog_full", "waited": waited[full]}
    assert late_pair["skipped"] == {"reason": "deadline", "waited": waited[late]}
    assert "comparison" in compared and "skipped" not in compared
    for key, pair in ((full, full_pair), (late, late_pair)):
        directory = recordings / _day(tap, key) / key
        on_disk = orjson.loads((directory / "pair.json").read_bytes())
        assert on_disk["skipped"] == pair["skipped"] and on_disk["legs"] == pair["legs"]
        assert "comparison" not in on_disk
        for side in ("downstream", "upstream"):
            leg = pair["legs"][side]
            assert leg["bytes"] == (directory / leg["file"]).stat().st_size > 0
            request = (directory / leg["request_file"]).read_bytes()
            assert b"[masked]" in request and b"weather" not in request

    scan = subprocess.run([sys.executable, "-m", "calltap", "scan", str(recordings), "--json"],
                          capture_output=True, check=False)
    summary = orjson.loads(scan.stdout)
    assert not list(recordings.glob(f"*/{discarded}"))
    assert summary["verdicts"] == {"diverged": 1, "equal": 1}
    ((not_equal,),) = [[entry["capture"] for entry in summary["not_equal"]]]
    assert not_equal.endswith(late)
    assert scan.returncode == 1
    assert counted[("calltap_pairs_discarded_total", ())] == 1


def _day(tap: Calltap, key: str) -> str:
    (directory,) = tap.recordings.glob(f"*/{key}")
    return directory.parent.name
