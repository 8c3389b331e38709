"""Slow clients beside fast ones: backpressure holds the slow streams back at the provider, the
fast ones are served as if the slow ones were not there, and calltap's memory stays flat.

Each slow client asks for a long answer (a million events, about 170 MiB) and reads one event
every 100 ms. If calltap read its upstream faster than its client reads, it would hold the
difference in memory; with backpressure it stops reading, the kernel's socket buffers fill
along the chain (loopback lets them grow to tens of MiB per connection), and the provider's
writes block with most of the answer unsent. calltap's RSS then grows by its buffers'
high-water mark per stream (a few MiB: what a stream used while it ran at full speed, before
the socket buffers filled), a fixed cost per stream, well below the bytes waiting for the slow
clients. The same batch of fast streams runs once alone and once beside the slow clients: both
times every fast stream completes byte-identical and compared, and beside them every fast
stream completes while every slow one is still unfinished. No wall-clock time is asserted.
The slow clients then hang up: both legs end `client_aborted`, the upstream request cancelled.
"""

from __future__ import annotations

import asyncio
import hashlib
from itertools import islice
from pathlib import Path

from tests.reliability.harness import MIB, Stack, chat_body, stack, streaming_provider
from tests.support.provider import answer_events

from calltap.fakes.provider import CHAT_PATH

SLOW_CLIENTS = 4
SLOW_EVENTS = 1_000_000
SLOW_READS = 30
"""Events each slow client reads, one per `SLOW_PAUSE`, before the fast batch starts."""
SLOW_PAUSE = 0.1
FAST_STREAMS = 50
FAST_EVENTS = 200
UNREAD_FRACTION = 0.25
"""calltap's RSS growth must stay under this share of the bytes sent but not read (about 0.15
measured: 4 MiB of calltap's own buffers per stream beside 26 MiB in the kernel's)."""
SENT_FRACTION = 0.5
"""Backpressure reached the provider: it sent less than this share of each slow answer. The
kernel's loopback buffers along the chain (four hops, each with autotuned send and receive
buffers) hold 30 to 50 MB of one stream; without backpressure the provider would have sent the
whole answer in the seconds this test waits."""


class SlowClient:
    """Reads one event per `SLOW_PAUSE` until told to hang up."""

    def __init__(self, run: Stack, key: str) -> None:
        self.run = run
        self.key = key
        self.content = f"slow {key}"
        self.body = bytearray()
        self.events = 0
        self.hang_up = asyncio.Event()
        self.finished = False

    async def read(self) -> None:
        async with self.run.client.post(
            self.run.front + CHAT_PATH, data=chat_body(self.content, SLOW_EVENTS),
            headers={"X-Request-ID": self.key, "Content-Type": "application/json"},
        ) as reply:
            while not self.hang_up.is_set():
                if reply.content.at_eof():
                    self.finished = True
                    return
                self.body += await reply.content.readuntil(b"\n\n")
                self.events += 1
                await asyncio.sleep(SLOW_PAUSE)

    def expected(self) -> bytes:
        """The first `events` events of the provider's answer."""
        marker = hashlib.sha256(self.content.encode()).hexdigest()[:16]
        return b"".join(islice(answer_events(marker, SLOW_EVENTS), self.events))


async def fast_batch(run: Stack, label: str) -> list[str]:
    """FAST_STREAMS streams at once; the keys in the order their bodies completed, each
    checked against the provider's bytes."""
    done: list[str] = []

    async def one(key: str) -> None:
        body = await run.stream(key, f"fast {key}", FAST_EVENTS)
        assert hashlib.sha256(body).hexdigest() == run.provider.sent[key].sha256
        done.append(key)

    await asyncio.gather(*(one(f"{label}-{n}") for n in range(FAST_STREAMS)))
    return done


async def test_slow_clients_are_held_back_without_slowing_fast_ones(tmp_path: Path,
                                                                    tally) -> None:
    provider = streaming_provider()
    async with stack(tmp_path, provider) as run:
        alone = await fast_batch(run, "alone")
        await run.calltap.wait_compared(run.client, FAST_STREAMS)
        await asyncio.sleep(1.0)
        baseline = run.calltap.rss()

        slow = [SlowClient(run, f"slow-{n}") for n in range(SLOW_CLIENTS)]
        readers = [asyncio.create_task(client.read()) for client in slow]
        async with asyncio.timeout(60):
            while min(client.events for client in slow) < SLOW_READS:
                await asyncio.sleep(SLOW_PAUSE)
        beside = await fast_batch(run, "beside")
        unfinished_when_fast_done = [not client.finished for client in slow]
        await run.calltap.wait_compared(run.client, 2 * FAST_STREAMS)
        peak = run.calltap.rss()
        sent = [provider.sent[client.key].bytes for client in slow]
        read = sum(len(client.body) for client in slow)

        for client in slow:
            client.hang_up.set()
        await asyncio.gather(*readers)
        await run.calltap.wait_compared(run.client, 2 * FAST_STREAMS + SLOW_CLIENTS)
        fast = {key: run.pair(key) for key in [*alone, *beside]}
        hung_up = [run.pair(client.key) for client in slow]
        events = {line["event"] for line in run.calltap.lines()}

    answer_size = sum(len(event) for event in answer_events("0" * 16, SLOW_EVENTS))
    unread = sum(sent) - read
    growth = peak - baseline
    assert sorted(alone) == sorted(f"alone-{n}" for n in range(FAST_STREAMS))
    assert sorted(beside) == sorted(f"beside-{n}" for n in range(FAST_STREAMS))
    assert all(unfinished_when_fast_done)
    assert max(sent) < SENT_FRACTION * answer_size
    assert growth < UNREAD_FRACTION * unread
    assert all(pair["comparison"]["verdict"] == "equal" for pair in fast.values())
    assert not events & {"capture.failed", "divergence"}
    for client, pair in zip(slow, hung_up, strict=True):
        assert client.body == client.expected()
        assert pair["legs"]["downstream"]["ended"] == "client_aborted"
        assert pair["legs"]["upstream"]["ended"] == "client_aborted"
    assert provider.cancelled == SLOW_CLIENTS
    tally.streams(2 * FAST_STREAMS)
    tally.fault("slow clients (one event per 100 ms) beside fast ones")
    tally.bytes_lost(0)
    tally.figure(f"{SLOW_CLIENTS} slow clients: bytes sent by the provider but unread",
                 f"{unread / MIB:.0f} MiB")
    tally.figure("calltap RSS growth meanwhile", f"{growth / MIB:.1f} MiB")
    tally.figure("provider bytes sent per slow answer (of its size)",
                 f"{max(sent) / MIB:.0f} of {answer_size / MIB:.0f} MiB")
