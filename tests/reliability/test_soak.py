"""Soak: a steady load for a bounded time, after which calltap holds what it held before it.

`CLIENTS` clients each send paced streams back to back for CALLTAP_SOAK_SECONDS (default 60;
`make reliability` runs may set it longer) through `calltap serve`. calltap's RSS and open files
are sampled once a second. The first fifth of the run is its warm-up (pools fill, the allocator
reaches its working set, the bounded table of recent results fills); a leak then shows as the
last fifth sitting above the second fifth. Tolerance: 4 MiB, or 1 KiB per request sent between
the two windows when that is larger. Over 60 s about 1,500 requests pass between the windows,
so a leak of 4 KiB per request (a leg's state, a pending-pair entry; a capture's buffer is
16 KiB) breaks it, while glibc's arenas, which round what they hold to whole pages and keep some
memory after a burst, move RSS by a few MiB at most (0.2 MiB measured). Open files under load
may differ by a few sockets (pooled connections come and go); a descriptor leaked per request
would be hundreds. When the load stops, no capture file is left open and the pending-pair
registry empties once the pairing window (2 s here) has passed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import statistics
import time
from pathlib import Path

from tests.reliability.harness import MIB, stack, streaming_provider

SECONDS = float(os.environ.get("CALLTAP_SOAK_SECONDS", "60"))
CLIENTS = 24
EVENTS = 50
PACE = 0.01
PAIRING_WINDOW = 2.0
SAMPLE_INTERVAL = 1.0
RSS_TOLERANCE = 4 * MIB
RSS_PER_REQUEST = 1024
FD_TOLERANCE = 8


async def test_steady_load_keeps_memory_and_descriptors_flat(tmp_path: Path, tally) -> None:
    provider = streaming_provider(delay=PACE)
    sent = mismatched = 0
    async with stack(tmp_path, provider, pairing_window=PAIRING_WINDOW) as run:
        deadline = time.monotonic() + SECONDS

        async def client(number: int) -> None:
            nonlocal sent, mismatched
            count = 0
            while time.monotonic() < deadline:
                key = f"soak-{number}-{count}"
                body = await run.stream(key, f"soak {number} {count}", EVENTS)
                sent += 1
                count += 1
                mismatched += hashlib.sha256(body).hexdigest() != provider.sent[key].sha256

        samples: list[tuple[int, int, int]] = []

        async def sample() -> None:
            while time.monotonic() < deadline:
                fds = run.calltap.fds()
                samples.append((sent, run.calltap.rss(), len(fds)))
                await asyncio.sleep(SAMPLE_INTERVAL)

        await asyncio.gather(sample(), *(client(number) for number in range(CLIENTS)))
        await run.calltap.wait_compared(run.client, sent)
        async with asyncio.timeout(PAIRING_WINDOW + 10):
            while (health := await run.calltap.health(run.client))["pending_pairs"]:
                await asyncio.sleep(0.2)
        recordings = str(run.calltap.recordings)
        open_captures = [fd for fd in run.calltap.fds() if fd.startswith(recordings)
                         and "/_index/" not in fd]  # the index's spool of rows stays open
        metrics = await run.calltap.metrics(run.client)
        events = {line["event"] for line in run.calltap.lines()}

    fifth = max(1, len(samples) // 5)
    early, late = samples[fifth : 2 * fifth], samples[-fifth:]
    requests_between = late[0][0] - early[0][0]
    rss_early = statistics.median(rss for _, rss, _ in early)
    rss_late = statistics.median(rss for _, rss, _ in late)
    fds_early = max(fds for _, _, fds in early)
    fds_late = max(fds for _, _, fds in late)
    assert mismatched == 0
    assert sent > CLIENTS * 10
    assert metrics['calltap_pairs_total{verdict="equal"}'] == sent
    assert rss_late - rss_early <= max(RSS_TOLERANCE, RSS_PER_REQUEST * requests_between)
    assert fds_late <= fds_early + FD_TOLERANCE
    assert open_captures == []
    assert health["pending_pairs"] == 0
    assert health["in_flight"] == 0 and health["recorder"]["open_captures"] == 0
    assert health["recorder"]["held_bytes"] == health["recorder"]["backlog_bytes"] == 0
    assert not events & {"capture.failed", "leg.aborted", "pair.orphaned"}
    tally.streams(sent)
    tally.bytes_lost(0)
    tally.figure(f"soak {SECONDS:.0f} s, {CLIENTS} clients: requests", str(sent))
    tally.figure("soak RSS (second fifth -> last fifth)",
                 f"{rss_early / MIB:.1f} -> {rss_late / MIB:.1f} MiB")
    tally.figure("soak open files under load (second fifth -> last fifth)",
                 f"{fds_early} -> {fds_late}")
