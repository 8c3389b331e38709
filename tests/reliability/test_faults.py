"""Faults injected into a running topology, one test each: what the client got, what calltap
recorded and what it logged.

Everything runs on loopback in this process (client -> calltap front -> scripted gateway ->
calltap back -> scripted provider, tests/support/topology.py), except where a signal must reach
a real `calltap serve` process (test_faults_signals.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import shutil
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from tests.proxy.test_endings import read_until_error, wait_for
from tests.proxy.test_failopen import forkserver_workers
from tests.reliability.harness import MIB, parse_metrics
from tests.support.logs import LogLines
from tests.support.provider import ProviderScript
from tests.support.streams import chat_request, chat_stream
from tests.support.topology import GatewayScript, scripted_topology

import calltap.proxy.recording
from calltap.proxy.app import Calltap
from calltap.proxy.capture import Opener

CHAT = "/v1/chat/completions"


@dataclass
class Scripted:
    tap: Calltap
    provider: ProviderScript
    provider_url: str
    gateway: GatewayScript
    client: aiohttp.ClientSession
    log: LogLines
    arrived: list[str]
    """Request ids in the order they reached the gateway."""

    async def post(self, body: bytes | None = None,
                   headers: dict[str, str] | None = None) -> tuple[str, bytes]:
        """A chat request through the front: the capture key and the whole body received."""
        async with self.client.post(self.tap.front_url + CHAT, data=body or chat_request(),
                                    headers=headers or {}) as reply:
            assert reply.status == 200
            return reply.headers["X-Request-ID"], await reply.read()

    def capture(self, key: str) -> Path:
        (directory,) = self.tap.recordings.glob(f"*/{key}")
        return directory

    async def metrics(self) -> dict[str, float]:
        async with self.client.get(self.tap.admin_url + "/metrics") as reply:
            return parse_metrics(await reply.text())

    def events(self, key: str) -> list[str]:
        return [line["event"] for line in self.log.lines() if line.get("request_id") == key]


@asynccontextmanager
async def scripted(tmp_path: Path, *, hold: asyncio.Event | None = None,
                   opener: Opener | None = None, **settings: Any) -> AsyncIterator[Scripted]:
    """The whole topology with scripted fakes; a gateway given `hold` waits for it before
    forwarding each request."""
    async with (
        scripted_topology(tmp_path / "rec", opener=opener, stop_grace=None,
                          **settings) as opened,
        aiohttp.ClientSession(auto_decompress=False) as client,
    ):
        opened.gateway.script.hold = hold
        yield Scripted(opened.tap, opened.provider.script, opened.provider.url,
                       opened.gateway.script, client, opened.log,
                       opened.gateway.script.arrived)


# -- streams cut short ------------------------------------------------------------------------


async def test_client_abort_mid_stream_cancels_upstream_and_records_both_legs(
    tmp_path: Path, tally
) -> None:
    async with scripted(tmp_path) as run:
        run.provider.body = chat_stream("word " * 200)
        run.provider.hold_after = 582
        reply = await run.client.post(run.tap.front_url + CHAT, data=chat_request())
        key = reply.headers["X-Request-ID"]
        got = await reply.content.readexactly(582)
        reply.close()
        await wait_for(lambda: run.provider.cancelled)
        pair = await run.tap.wait_compared(key)
        directory = run.capture(key)
        aborted = {line["side"]: line["ended"] for line in run.log.lines("leg.aborted")}
        (compared,) = run.log.lines("pair.compared")
        divergences = run.log.lines("divergence")
    assert got == run.provider.body[:582]
    assert (directory / "downstream.sse").read_bytes() == got
    assert (directory / "upstream.sse").read_bytes() == got
    assert pair["legs"]["downstream"]["ended"] == "client_aborted"
    assert pair["legs"]["upstream"]["ended"] == "client_aborted"
    assert aborted == {"downstream": "client_aborted", "upstream": "client_aborted"}
    assert compared["downstream_ended"] == "client_aborted"
    assert divergences == []
    tally.fault("client abort mid-stream")


async def test_provider_reset_mid_stream_reaches_the_client_as_the_same_truncation(
    tmp_path: Path, tally
) -> None:
    async with scripted(tmp_path) as run:
        run.provider.body = chat_stream("word " * 200)
        run.provider.reset_after = 485
        async with run.client.post(run.tap.front_url + CHAT, data=chat_request()) as reply:
            key = reply.headers["X-Request-ID"]
            got, error = await read_until_error(reply)
        pair = await run.tap.wait_compared(key)
        directory = run.capture(key)
        aborted = {line["side"]: line["ended"] for line in run.log.lines("leg.aborted")}
        divergences = run.log.lines("divergence")
    assert isinstance(error, aiohttp.ClientPayloadError)
    assert got == run.provider.body[:485]
    assert b"[DONE]" not in got
    assert (directory / "upstream.sse").read_bytes() == got
    assert (directory / "downstream.sse").read_bytes() == got
    assert pair["legs"]["upstream"]["ended"] == "upstream_reset"
    assert pair["legs"]["downstream"]["ended"] == "upstream_reset"
    assert aborted == {"downstream": "upstream_reset", "upstream": "upstream_reset"}
    sides = pair["comparison"]["upstream"]["findings"], pair["comparison"]["downstream"]["findings"]
    assert all("DONE_MISSING" in {f["code"] for f in findings} for findings in sides)
    assert pair["comparison"]["verdict"] != "diverged" and divergences == []
    tally.fault("provider reset mid-stream")
    tally.bytes_lost(0)


async def test_provider_stall_past_the_read_timeout_ends_the_stream(tmp_path: Path,
                                                                    tally) -> None:
    async with scripted(tmp_path, read_timeout=0.5) as run:
        run.provider.hold_after = 291
        async with run.client.post(run.tap.front_url + CHAT, data=chat_request()) as reply:
            key = reply.headers["X-Request-ID"]
            got, error = await read_until_error(reply)
        pair = await run.tap.wait_compared(key)
        await wait_for(lambda: run.provider.cancelled)
        aborted = {line["side"]: line["ended"] for line in run.log.lines("leg.aborted")}
    assert error is not None
    assert got == run.provider.body[:291]
    assert pair["legs"]["upstream"]["ended"] == "timeout"
    assert pair["legs"]["upstream"]["bytes"] == 291
    # The front's read from the gateway, silent as long, may time out first: either is honest.
    assert pair["legs"]["downstream"]["ended"] in ("upstream_reset", "timeout")
    assert aborted["upstream"] == "timeout"
    assert aborted["downstream"] == pair["legs"]["downstream"]["ended"]
    tally.fault("provider stall past the read timeout")


# -- the gateway misbehaving --------------------------------------------------------------------


async def test_gateway_never_calling_the_back_leg_leaves_an_orphan(tmp_path: Path,
                                                                   tally) -> None:
    async with scripted(tmp_path, pairing_window=0.5) as run:
        run.gateway.target = run.provider_url
        key, body = await run.post()
        pair = await run.tap.wait_compared(key)
        (orphaned,) = run.log.lines("pair.orphaned")
        metrics = await run.metrics()
        directory = run.capture(key)
    assert body == run.provider.body
    assert (directory / "downstream.sse").read_bytes() == body
    assert pair["orphaned"] is True and "upstream" not in pair["legs"]
    assert pair["check"]["verdict"] == "clean"
    assert (orphaned["request_id"], orphaned["side"]) == (key, "downstream")
    assert metrics['calltap_orphaned_legs_total{leg="downstream"}'] == 1
    tally.fault("gateway never calling the back leg")


async def test_gateway_retry_keeps_every_attempt(tmp_path: Path, tally) -> None:
    async with scripted(tmp_path) as run:
        run.gateway.retry_first = True
        run.provider.delay = 0.005
        key, body = await run.post()
        pair = await run.tap.wait_compared(key)
        (compared,) = run.log.lines("pair.compared")
        directory = run.capture(key)
    assert body == run.provider.body
    assert pair["attempts"] == 2 and compared["attempts"] == 2
    first, second = pair["legs"]["upstream_attempts"]
    assert (first["attempt"], first["ended"]) == (1, "client_aborted")
    assert (second["attempt"], second["ended"]) == (2, "complete")
    assert first["file"] == "upstream.attempt-1.sse"
    assert run.provider.body.startswith((directory / "upstream.attempt-1.sse").read_bytes())
    assert (directory / "upstream.sse").read_bytes() == body
    assert pair["comparison"]["verdict"] == "equal"
    tally.fault("gateway retrying")


async def test_retry_storm_on_one_request_id_never_overwrites(tmp_path: Path, tally) -> None:
    storm = 40
    async with scripted(tmp_path) as run:
        run.provider.reply_with_request = True
        contents = [f"storm {n}" for n in range(storm)]
        replies = await asyncio.gather(*(
            run.post(chat_request(content), {"X-Request-ID": "storm"}) for content in contents))
        pairs = [await run.tap.wait_compared(key) for key, _ in replies]
        directories = {key: run.capture(key) for key, _ in replies}
    keys = [key for key, _ in replies]
    assert sorted(keys) == sorted(["storm", *(f"storm+{n}" for n in range(2, storm + 1))])
    for content, (key, body), pair in zip(contents, replies, pairs, strict=True):
        directory = directories[key]
        assert body == chat_stream(content, marker=content.replace(" ", "-"))
        assert orjson.loads((directory / "downstream.request").read_bytes()) == orjson.loads(
            chat_request(content))
        assert (directory / "upstream.sse").read_bytes() == body
        assert (directory / "downstream.sse").read_bytes() == body
        assert (pair["pairing"], pair["attempts"]) == ("header", 1)
        assert pair["comparison"]["verdict"] == "equal"
    tally.fault(f"retry storm: one request id {storm} times at once")
    tally.streams(storm)


async def test_pending_pair_overflow_evicts_the_oldest_and_says_so(tmp_path: Path,
                                                                   tally) -> None:
    limit, requests = 4, 10
    hold = asyncio.Event()
    async with scripted(tmp_path, hold=hold, max_pending_pairs=limit) as run:
        run.provider.reply_with_request = True
        sent = [asyncio.create_task(run.post(chat_request(f"over {n}"),
                                             {"X-Request-ID": f"over-{n}"}))
                for n in range(requests)]
        await wait_for(lambda: len(run.arrived) == requests)
        await wait_for(lambda: run.log.lines("pairs.evicted"), timeout=5)
        pending = run.tap.health()["pending_pairs"]
        hold.set()
        replies = await asyncio.gather(*sent)
        pairs = {key: await run.tap.wait_compared(key) for key, _ in replies}
        order = run.arrived[:requests]
        oldest, kept = order[: requests - limit], order[requests - limit :]
        lone = {key: await run.tap.wait_compared(f"{key}+2") for key in oldest}
        (evicted,) = run.log.lines("pairs.evicted")
        orphaned = {(line["request_id"], line["side"]) for line in run.log.lines("pair.orphaned")}
        metrics = await run.metrics()
        health = run.tap.health()
    assert pending == limit
    for n, (_, body) in enumerate(replies):
        assert body == chat_stream(f"over {n}", marker=f"over-{n}")
    assert evicted["count"] == requests - limit and evicted["max_pending"] == limit
    assert evicted["request_ids"] == oldest
    assert metrics["calltap_evicted_pairs_total"] == requests - limit
    for key in kept:
        assert pairs[key]["comparison"]["verdict"] == "equal"
    for key in oldest:
        assert pairs[key]["orphaned"] is True and "upstream" not in pairs[key]["legs"]
        assert lone[key]["orphaned"] is True and "downstream" not in lone[key]["legs"]
        assert {(key, "downstream"), (f"{key}+2", "upstream")} <= orphaned
    assert health["recorder"]["open_captures"] == 0
    tally.fault("pending-pair overflow")


# -- the disk -------------------------------------------------------------------------------------


class FlakyDisk:
    """An opener for capture files: normal, a full disk (/dev/full: ENOSPC on the first
    write), or a broken one (a descriptor that cannot be written: EBADF)."""

    def __init__(self) -> None:
        self.state = "ok"

    def __call__(self, path: str, flags: int) -> int:
        if self.state == "full":
            return os.open("/dev/full", os.O_WRONLY)
        if self.state == "broken":
            return os.open("/dev/null", os.O_RDONLY)
        return os.open(path, flags | os.O_EXCL, 0o600)


async def test_disk_full_and_write_errors_are_survived_and_recording_resumes(
    tmp_path: Path, tally
) -> None:
    disk = FlakyDisk()
    async with scripted(tmp_path, opener=disk) as run:
        run.provider.body = chat_stream("word " * 5000)
        outcomes = {}
        for state in ("ok", "full", "broken", "ok"):
            disk.state = state
            key, body = await run.post()
            outcomes[key] = state, body, await run.tap.wait_compared(key)
        failures = run.log.lines("capture.failed")
        metrics = await run.metrics()
    assert all(body == run.provider.body for _, body, _ in outcomes.values())
    (first, full, broken, resumed) = outcomes.values()
    for _, _, pair in (first, resumed):
        assert pair["comparison"]["verdict"] == "equal"
        assert pair["legs"]["downstream"]["sha256"] == hashlib.sha256(run.provider.body).hexdigest()
    for _, _, pair in (full, broken):
        assert pair["legs"]["downstream"]["file"] is None
        assert pair["legs"]["upstream"]["file"] is None
        assert "comparison" not in pair
    assert {f["errno"] for f in failures} == {errno.ENOSPC, errno.EBADF}
    assert metrics["calltap_capture_failures_total"] == len(failures)
    tally.fault("disk full on the recordings dir")
    tally.fault("write errors on the recordings dir")


async def test_quota_pauses_recording_and_resumes_once_space_is_freed(
    tmp_path: Path, tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calltap.proxy.recording, "QUOTA_RESCAN_INTERVAL", 0.0)
    async with scripted(tmp_path, disk_quota_bytes=4096) as run:
        first, body = await run.post()
        await run.tap.wait_compared(first)
        paused_key, paused_body = await run.post()
        paused = run.log.lines("recording.paused")
        health = run.tap.health()
        shutil.rmtree(run.capture(first))
        await wait_for(lambda: run.log.lines("recording.resumed"), timeout=5)
        resumed_key, resumed_body = await run.post()
        resumed = await run.tap.wait_compared(resumed_key)
        metrics = await run.metrics()
    assert body == paused_body == resumed_body == run.provider.body
    assert len(paused) == 1 and paused[0]["quota_bytes"] == 4096
    assert health["recorder"]["paused"] is True
    assert not list(run.tap.recordings.glob(f"*/{paused_key}"))
    assert resumed["comparison"]["verdict"] == "equal"
    assert metrics["calltap_recording_paused"] == 0
    tally.fault("recordings quota reached, then space freed")


# -- the comparator -----------------------------------------------------------------------------


async def stopped_worker_with_a_job(run: Scripted) -> tuple[str, bytes]:
    """Stop the tap's one comparison worker, then send a request: once its legs ended, the
    comparison job waits on the stopped worker. The request's key and body."""
    (worker,) = forkserver_workers()
    os.kill(worker, signal.SIGSTOP)
    key, body = await run.post()
    await wait_for(lambda: list(run.tap.recordings.glob(f"*/{key}/upstream.sse")))
    directory = run.capture(key)
    await wait_for(lambda: (directory / "downstream.sse").exists())
    await asyncio.sleep(0.2)
    return key, body


async def test_comparison_worker_dying_mid_job_costs_only_that_comparison(
    tmp_path: Path, tally
) -> None:
    async with scripted(tmp_path) as run:
        try:
            key, body = await stopped_worker_with_a_job(run)
        finally:
            for pid in forkserver_workers():
                os.kill(pid, signal.SIGKILL)
        lost = await run.tap.wait_compared(key)
        failed = run.log.lines("capture.failed")
        next_key, next_body = await run.post()
        compared = await run.tap.wait_compared(next_key)
    assert body == next_body == run.provider.body
    assert lost["comparison"] is None
    assert (run.capture(key) / "downstream.sse").read_bytes() == body
    assert [(f["stage"], f["error"]) for f in failed] == [("compare", "WorkerFailed")]
    assert compared["comparison"]["verdict"] == "equal"
    tally.fault("comparison worker dying mid-comparison")


async def test_a_worker_dying_costs_only_its_job_not_those_waiting_for_it(
    tmp_path: Path, tally
) -> None:
    """With the one worker stopped, of three pairs it holds one and two wait in the backlog.
    Killed, it takes the one it was running with it; its replacement compares the two."""
    async with scripted(tmp_path) as run:
        try:
            first, body = await stopped_worker_with_a_job(run)
            others = [(await run.post())[0] for _ in range(2)]
            for key in others:
                await wait_for(lambda key=key: list(
                    run.tap.recordings.glob(f"*/{key}/downstream.sse")))
            await asyncio.sleep(0.2)
            waiting = run.tap.comparisons.health()["compare_backlog"]
        finally:
            for pid in forkserver_workers():
                os.kill(pid, signal.SIGKILL)
        lost = await run.tap.wait_compared(first)
        compared = [await run.tap.wait_compared(key) for key in others]
        failed = run.log.lines("capture.failed")
    assert body == run.provider.body
    assert waiting == 2
    assert lost["comparison"] is None
    assert [(f["stage"], f["error"], f["path"]) for f in failed] == [
        ("compare", "WorkerFailed", str(run.capture(first)))]
    assert [pair["comparison"]["verdict"] for pair in compared] == ["equal", "equal"]
    tally.fault("comparison worker dying with comparisons waiting")


async def test_a_job_raising_in_the_worker_is_logged_and_the_next_pair_compared(
    tmp_path: Path, tally
) -> None:
    """The comparison job raises inside the worker (here: a capture file gone before the
    worker reads it, the same path as any exception in the comparator): that pair gets no
    comparison and one `capture.failed`, the worker lives on and compares the next pair."""
    async with scripted(tmp_path) as run:
        (worker,) = forkserver_workers()
        try:
            key, body = await stopped_worker_with_a_job(run)
            (run.capture(key) / "downstream.sse").unlink()
        finally:
            os.kill(worker, signal.SIGCONT)
        broken = await run.tap.wait_compared(key)
        failed = run.log.lines("capture.failed")
        next_key, next_body = await run.post()
        compared = await run.tap.wait_compared(next_key)
        assert forkserver_workers() == [worker]
    assert body == next_body == run.provider.body
    assert broken["comparison"] is None
    assert [(f["stage"], f["error"]) for f in failed] == [("compare", "WorkerFailed")]
    assert compared["comparison"]["verdict"] == "equal"
    tally.fault("comparison job raising in its worker")


async def test_a_hung_comparison_worker_cannot_keep_shutdown_waiting(tmp_path: Path,
                                                                     tally) -> None:
    async with scripted(tmp_path) as run:
        try:
            key, body = await stopped_worker_with_a_job(run)
            await run.tap.comparisons.drain(timeout=0.5)
            pair = await run.tap.wait_compared(key, timeout=1)
            failed = run.log.lines("capture.failed")
        finally:
            # The abandoned job's worker is killed and replaced meanwhile: one listed here may be
            # gone by the time it is killed.
            for pid in forkserver_workers():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    assert body == run.provider.body
    assert pair["comparison"] is None
    assert orjson.loads((run.capture(key) / "pair.json").read_bytes()) == pair
    assert [(f["stage"], f["error"]) for f in failed] == [("compare", "TimeoutError")]
    tally.fault("comparison worker hung at shutdown")


# -- size -----------------------------------------------------------------------------------------


def one_event_stream(size: int) -> bytes:
    """A chat stream whose one content event carries `size` bytes of text."""
    delta = {"id": "chatcmpl-big", "object": "chat.completion.chunk", "created": 1,
             "model": "gpt-test"}
    big = orjson.dumps({**delta, "choices": [{"index": 0, "delta": {"content": "x" * size}}]})
    finish = orjson.dumps({**delta, "choices": [{"index": 0, "delta": {},
                                                 "finish_reason": "stop"}]})
    return b"data: " + big + b"\n\ndata: " + finish + b"\n\ndata: [DONE]\n\n"


@pytest.mark.parametrize("max_capture_bytes", [None, 96 * MIB],
                         ids=["default-capture-limit", "raised-capture-limit"])
async def test_a_single_64_mib_event(tmp_path: Path, tally,
                                     max_capture_bytes: int | None) -> None:
    settings = {} if max_capture_bytes is None else {"max_capture_bytes": max_capture_bytes}
    async with scripted(tmp_path, **settings) as run:
        run.provider.body = one_event_stream(64 * MIB)
        run.provider.chunk_size = MIB
        key, body = await run.post()
        pair = await run.tap.wait_compared(key, timeout=60)
        events = {line["event"] for line in run.log.lines()}
    limit = run.tap.config.max_capture_bytes
    assert hashlib.sha256(body).digest() == hashlib.sha256(run.provider.body).digest()
    legs = pair["legs"]
    if len(body) > limit:
        for side in ("downstream", "upstream"):
            assert legs[side]["ended"] == "capture_truncated"
            assert legs[side]["relay_ended"] == "complete"
            assert legs[side]["bytes"] == limit
            assert legs[side]["bytes_relayed"] == len(body)
        assert pair["comparison"]["verdict"] == "inconclusive"
        assert "CAPTURE_TRUNCATED" in {f["code"] for f in pair["comparison"]["findings"]}
    else:
        assert legs["upstream"]["sha256"] == hashlib.sha256(body).hexdigest()
        assert pair["comparison"]["verdict"] == "equal"
    assert "capture.failed" not in events
    tally.fault("a single 64 MiB event")
    tally.bytes_lost(0)


