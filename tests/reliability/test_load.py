"""Load: a thousand streams held open at once through front -> gateway -> back -> provider, each
byte-identical to the provider's, recorded and compared, with calltap's memory measured.

The provider holds every stream after its first event until all of them are open, so the
thousand really are in flight together (calltap's own gauge says so) before 200 events each
flow. calltap runs as `calltap serve` in its own process: its RSS is its own. Its upstream pool
is raised to 1,100 connections (default 512: past the pool a request waits for a free
connection, so a thousand held streams would wait forever on the provider's gate). Each stream
needs about six file descriptors in calltap (two client sockets, two upstream sockets, two
capture files) and four in this process, so the soft limit is raised to 16,384 where the hard
limit allows.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from tests.reliability.harness import MIB, raise_fd_limit, stack, streaming_provider

STREAMS = 1000
EVENTS = 200
TEXT_EVENTS = EVENTS - 3
"""Role delta, text deltas, finish reason, [DONE]: 200 events."""
WARM_UP = 8
SAMPLE_INTERVAL = 0.05
FD_LIMIT = 16_384


async def sample_peak(read, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], read())
        await asyncio.sleep(SAMPLE_INTERVAL)


async def test_a_thousand_concurrent_streams_are_relayed_recorded_and_compared(
    tmp_path: Path, tally
) -> None:
    if raise_fd_limit(FD_LIMIT) < FD_LIMIT:
        pytest.skip(f"needs {FD_LIMIT} open files (ulimit -n)")
    provider = streaming_provider()
    async with stack(tmp_path, provider, upstream_connections=1100) as run:
        for number in range(WARM_UP):
            await run.stream(f"warm-{number}", f"warm-up {number}", TEXT_EVENTS)
        await run.calltap.wait_compared(run.client, WARM_UP)
        await asyncio.sleep(1.0)
        baseline = run.calltap.rss()
        provider.script.gate = STREAMS
        provider.release.clear()
        peak, stop = [baseline], asyncio.Event()
        sampler = asyncio.create_task(sample_peak(run.calltap.rss, peak, stop))
        keys = [f"load-{number}" for number in range(STREAMS)]
        bodies = [asyncio.create_task(run.stream(key, f"question {key}", TEXT_EVENTS))
                  for key in keys]
        await asyncio.wait_for(provider.all_open.wait(), 120)
        metrics = await run.calltap.metrics(run.client)
        in_flight = {side: metrics[f'calltap_streams_in_flight{{leg="{side}"}}']
                     for side in ("downstream", "upstream")}
        held_rss = run.calltap.rss()
        held_fds = len(run.calltap.fds())
        provider.release.set()
        received = await asyncio.gather(*bodies)
        await run.calltap.wait_compared(run.client, WARM_UP + STREAMS)
        stop.set()
        await sampler
        metrics = await run.calltap.metrics(run.client)

        assert in_flight == {"downstream": STREAMS, "upstream": STREAMS}
        assert provider.most_open == STREAMS
        for key, body in zip(keys, received, strict=True):
            assert hashlib.sha256(body).hexdigest() == provider.sent[key].sha256, key
            assert body.count(b"\n\n") == EVENTS
        for key in keys:
            pair = run.pair(key)
            assert pair["pairing"] == "header" and pair["attempts"] == 1
            assert pair["comparison"]["verdict"] == "equal", key
            for leg in ("downstream", "upstream"):
                assert pair["legs"][leg]["ended"] == "complete"
                assert pair["legs"][leg]["sha256"] == provider.sent[key].sha256
        assert metrics['calltap_pairs_total{verdict="equal"}'] == WARM_UP + STREAMS
        assert metrics.get("calltap_capture_failures_total", 0) == 0
        events = {line["event"] for line in run.calltap.lines()}
        assert not events & {"capture.failed", "leg.aborted", "pair.orphaned", "divergence"}

    growth = peak[0] - baseline
    tally.streams(STREAMS)
    tally.bytes_lost(0)
    tally.figure(f"calltap RSS before {STREAMS} streams", f"{baseline / MIB:.0f} MiB")
    tally.figure(f"calltap peak RSS, {STREAMS} streams x {EVENTS} events",
                 f"{peak[0] / MIB:.0f} MiB")
    tally.figure("calltap RSS per in-flight stream",
                 f"{growth / STREAMS / 1024:.0f} KiB (peak), "
                 f"{(held_rss - baseline) / STREAMS / 1024:.0f} KiB (all held open)")
    tally.figure(f"calltap open files, {STREAMS} streams held", str(held_fds))
