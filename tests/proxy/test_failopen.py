"""Recording is fail-open: disk errors, a dying comparator worker, the capture size limit and
the disk quota never change a byte the client receives."""

from __future__ import annotations

import hashlib
import os
import signal
from pathlib import Path
from typing import Any

from tests.proxy.conftest import chat_stream, post_chat


def full_disk_opener(path: str, flags: int) -> int:
    """Every capture file is /dev/full: the first flush fails with ENOSPC, like a full disk."""
    return os.open("/dev/full", os.O_WRONLY)


async def test_full_disk_leaves_client_bytes_identical(
    provider, gateway, make_tap, client, log
) -> None:
    script, provider_url = provider
    gateway_script, gateway_url = gateway
    script.body = chat_stream("word " * 20_000)
    tap = await make_tap(
        front=("127.0.0.1", 0),
        gateway=gateway_url,
        back=("127.0.0.1", 0),
        provider=provider_url,
        opener=full_disk_opener,
    )
    gateway_script.target = tap.back_url
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200
    assert hashlib.sha256(body).digest() == hashlib.sha256(script.body).digest()
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert pair["legs"]["downstream"]["file"] is None
    assert "comparison" not in pair
    failures = log.lines("capture.failed")
    assert failures and all(f["error"] == "OSError" for f in failures)
    assert any(f["errno"] == 28 for f in failures)
    async with client.get(tap.admin_url + "/metrics") as response:
        metrics = await response.text()
    assert f"calltap_capture_failures_total {float(len(failures))}" in metrics


def forkserver_workers() -> list[int]:
    """Worker processes: children of this process's forkserver child."""

    def children(pid: int) -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        return found

    workers = []
    for child in children(os.getpid()):
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        if b"forkserver" in cmdline:
            workers.extend(children(child))
    return workers


async def test_dead_comparator_worker_is_logged_and_replaced(
    topology: dict[str, Any], client, log
) -> None:
    tap, provider = topology["tap"], topology["provider"]
    workers = forkserver_workers()
    assert workers
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    status, headers, body = await post_chat(client, tap.front_url)
    assert status == 200 and body == provider.body
    first = await tap.wait_compared(headers["X-Request-ID"])
    assert first["comparison"] is None
    assert log.lines("capture.failed")[-1]["stage"] == "compare"
    _, headers, body = await post_chat(client, tap.front_url)
    second = await tap.wait_compared(headers["X-Request-ID"])
    assert second["comparison"]["verdict"] == "equal"


async def test_capture_limit_truncates_recording_not_relay(provider, make_tap, client) -> None:
    script, provider_url = provider
    script.body = chat_stream("word " * 500)
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url, max_capture_bytes=1000)
    async with client.post(
        tap.back_url + "/v1/chat/completions", data=b"{}", headers={"X-Request-ID": "big-1"}
    ) as response:
        body = await response.read()
    assert body == script.body
    pair = await tap.wait_compared("big-1")
    leg = pair["legs"]["upstream"]
    assert leg["ended"] == "capture_truncated"
    assert leg["relay_ended"] == "complete"
    assert leg["bytes"] == 1000
    assert leg["bytes_relayed"] == len(script.body)
    assert leg["sha256"] == hashlib.sha256(script.body[:1000]).hexdigest()
    codes = {f["code"] for f in pair["check"]["findings"]}
    assert "CAPTURE_TRUNCATED" in codes


async def test_disk_quota_pauses_recording_but_not_relay(provider, make_tap, client, log) -> None:
    script, provider_url = provider
    tap = await make_tap(
        back=("127.0.0.1", 0), provider=provider_url, disk_quota_bytes=len(script.body)
    )
    for request_id in ("q-1", "q-2", "q-3"):
        async with client.post(
            tap.back_url + "/v1/chat/completions", data=b"{}", headers={"X-Request-ID": request_id}
        ) as response:
            assert await response.read() == script.body
    await tap.wait_compared("q-1")
    assert [p.name for p in tap.recordings.glob("[0-9]*/*")] == ["q-1"]
    paused = log.lines("recording.paused")
    assert len(paused) == 1
    assert paused[0]["quota_bytes"] == len(script.body)
    assert paused[0]["reason"] == "quota"
    async with client.get(tap.admin_url + "/healthz") as response:
        health = await response.json()
    assert health["recorder"]["paused"] is True
    async with client.get(tap.admin_url + "/metrics") as response:
        metrics = await response.text()
    assert 'calltap_unrecorded_legs_total{leg="upstream",reason="quota"} 2.0' in metrics
    assert "calltap_recording_paused 1.0" in metrics


async def test_leftover_partial_files_are_kept_and_reported(
    provider, make_tap, tmp_path, log
) -> None:
    _, provider_url = provider
    leftover = tmp_path / "rec" / "2026-11-29" / "crashed-1" / "upstream.sse.partial"
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"data: {}\n\n")
    await make_tap(back=("127.0.0.1", 0), provider=provider_url)
    line = log.lines("recording.leftovers")[0]
    assert line["count"] == 1
    assert line["files"] == ["2026-11-29/crashed-1/upstream.sse.partial"]
    assert leftover.read_bytes() == b"data: {}\n\n"
