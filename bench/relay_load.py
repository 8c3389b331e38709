"""The relay benchmark's load client: streamed chat requests, every body checked by sha256.

The fake provider's bytes are a function of the request body, so the expected sha256 of each
answer is computed here from the same code, before any request is sent. Requests cycle through
a few distinct bodies (distinct ids in every chunk). A timestamping provider ends each chunk's
JSON object with `,"obfuscation":"t<time.time_ns() in 16 hex digits>"` (`data: [DONE]`, which
has no object, goes unstamped and unmeasured): the client notes the arrival time of every stamped
event (when the chunk that completes its line is read, so the whole event is in), and strips the
stamps before hashing, since only they vary between runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import aiohttp
import orjson

from calltap.fakes.provider import CHAT_PATH, answer, stream_events
from relay_passthrough import relabelled

DISTINCT_BODIES = 16
REQUEST_TIMEOUT = 120.0
STAMP = re.compile(rb',"obfuscation":"t([0-9a-f]{16})"')
"""The provider's send time in a chunk (`calltap.fakes.provider.STAMP`), which stripping takes
out whole."""


@dataclass(frozen=True, slots=True)
class Workload:
    """The request bodies to cycle through, the sha256 of each answer, events per answer."""

    bodies: tuple[bytes, ...]
    digests: tuple[str, ...]
    relabelled: tuple[str, ...]
    """The sha256 of each answer as the re-labelling gateway hands it on."""
    events: int
    answer_bytes: int


def workload(text_events: int) -> Workload:
    """Streamed text requests with usage: role chunk, `text_events` text chunks, finish chunk,
    usage chunk, `[DONE]`."""
    bodies, digests, relabelled_digests, events, sizes = [], [], [], set(), []
    for number in range(DISTINCT_BODIES):
        request: dict[str, Any] = {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": f"relay benchmark request {number}"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        body = orjson.dumps(request)
        chunks = stream_events(answer(body, request, text_events=text_events),
                               include_usage=True)
        expected = b"".join(chunks)
        bodies.append(body)
        digests.append(hashlib.sha256(expected).hexdigest())
        relabelled_digests.append(hashlib.sha256(relabelled(expected)).hexdigest())
        events.add(len(chunks))
        sizes.append(len(expected))
    assert len(events) == 1, events
    return Workload(tuple(bodies), tuple(digests), tuple(relabelled_digests), events.pop(),
                    sum(sizes) // len(sizes))


@dataclass(slots=True)
class Outcome:
    """What one load run saw."""

    requests: int = 0
    seconds: float = 0.0
    ttfb: list[float] = field(default_factory=list)
    """Seconds from sending the request to the first body byte."""
    latencies_ns: list[int] = field(default_factory=list)
    """Per event: arrival time minus the provider's timestamp."""
    mismatches: list[str] = field(default_factory=list)

    def absorb(self, other: Outcome) -> None:
        self.requests += other.requests
        self.seconds += other.seconds
        self.ttfb += other.ttfb
        self.latencies_ns += other.latencies_ns
        self.mismatches += other.mismatches

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (`fraction` in 0..1); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


class LoadClient:
    """`concurrency` workers on one keep-alive connection pool, posting to one URL."""

    def __init__(self, base_url: str, concurrency: int, work: Workload, *,
                 timestamps: bool, relabelled: bool = False) -> None:
        self.url = base_url.rstrip("/") + CHAT_PATH
        self.concurrency = concurrency
        self.work = work
        self.digests = work.relabelled if relabelled else work.digests
        """What each answer must hash to: through the re-labelling gateway, its bytes."""
        self.timestamps = timestamps
        self._sent = 0
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.concurrency),
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
            auto_decompress=False,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def run(self, requests: int, stagger: float = 0.0) -> Outcome:
        """Send `requests` requests, `concurrency` at a time; wall time from first to last.
        With `stagger`, the workers' first requests are spread evenly over that many seconds,
        so paced streams do not emit their events in lockstep."""
        outcome = Outcome()
        remaining = iter(range(requests))
        workers = min(self.concurrency, requests)

        async def worker(number: int) -> None:
            await asyncio.sleep(stagger * number / workers)
            for _ in remaining:
                await self.one(outcome)

        started = time.perf_counter()
        await asyncio.gather(*(worker(number) for number in range(workers)))
        outcome.seconds = time.perf_counter() - started
        return outcome

    async def one(self, outcome: Outcome) -> None:
        """One request, its body checked; what it saw goes into `outcome`."""
        assert self._session is not None
        number = self._sent % len(self.work.bodies)
        self._sent += 1
        body, expected = self.work.bodies[number], self.digests[number]
        try:
            status, digest, size, first, stamps = await self._fetch(body)
        except (aiohttp.ClientError, TimeoutError) as exc:
            outcome.mismatches.append(f"{self.url}: {type(exc).__name__}: {exc}")
            return
        outcome.requests += 1
        if first is not None:
            outcome.ttfb.append(first)
        outcome.latencies_ns.extend(stamps)
        if status != 200 or digest != expected:
            outcome.mismatches.append(f"{self.url}: body {number}: status {status}, {size} bytes,"
                                      f" sha256 {digest[:16]}… expected {expected[:16]}…")

    async def _fetch(self, body: bytes) -> tuple[int, str, int, float | None, list[int]]:
        """Status, sha256 and size of the answer (timestamps stripped), TTFB, event latencies."""
        assert self._session is not None
        headers = {"Content-Type": "application/json"}
        first: float | None = None
        stamps: list[int] = []
        started = time.perf_counter()
        async with self._session.post(self.url, data=body, headers=headers) as response:
            content = response.content
            if not self.timestamps:
                digest, size = hashlib.sha256(), 0
                async for chunk in content.iter_any():
                    if first is None:
                        first = time.perf_counter() - started
                    digest.update(chunk)
                    size += len(chunk)
                return response.status, digest.hexdigest(), size, first, stamps
            received = bytearray()
            scanned = 0
            async for chunk in content.iter_any():
                arrived = time.time_ns()
                if first is None:
                    first = time.perf_counter() - started
                received += chunk
                complete = received.rfind(b"\n") + 1
                stamps.extend(arrived - int(match[1], 16)
                              for match in STAMP.finditer(received, scanned, complete))
                scanned = max(scanned, complete)
            stripped = STAMP.sub(b"", received)
            return (response.status, hashlib.sha256(stripped).hexdigest(), len(stripped), first,
                    stamps)
