"""The comparison backlog: closed captures waiting for a worker, bounded in size and in age.

The workers run on idle CPU, so under a load past what they can compare the captures waiting for
one would pile up without end. Two bounds shed comparisons instead of traffic: a capture closing
while `max_compare_backlog` comparisons already wait is not compared (`backlog_full`), and a
capture whose comparison has not started `compare_deadline` seconds after it closed is not
compared (`deadline`), checked when a worker would take it, oldest first, so a stale job never
occupies a worker. A shed pair is still finalized: its files stay (masked, when body patterns are
configured, as a worker would have), its pair.json says `skipped` instead of holding a
comparison, and `calltap scan` can compare it later.

`Book` is the policy, pure (no clock, no asyncio); `Backlog` runs it on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from calltap.proxy.analysis import rewrite
from calltap.redact import BodyMasker

Reason = Literal["backlog_full", "deadline"]
REASONS: tuple[Reason, ...] = ("backlog_full", "deadline")
Token = TypeVar("Token")


@dataclass(frozen=True, slots=True)
class Skip:
    """Why a capture was not compared, how long it had waited since it closed (seconds), and
    how many comparisons were waiting then."""

    reason: Reason
    waited: float
    backlog: int

    def json(self) -> dict[str, Any]:
        """pair.json's `skipped` object."""
        return {"reason": self.reason, "waited": round(self.waited, 3)}


class Book(Generic[Token]):
    """Which job runs, waits or is skipped. `slots` jobs run at once (one per worker); while
    a slot is free nothing waits."""

    def __init__(self, slots: int, limit: int, deadline: float) -> None:
        self.free = slots
        self.limit = limit
        self.deadline = deadline
        self.waiting: deque[tuple[float, Token]] = deque()
        """Jobs waiting for a slot with when each capture closed, oldest first."""

    def arrive(self, token: Token, closed_at: float, now: float) -> Skip | bool:
        """A job ready for a worker: True when it takes a free slot, False when it waits,
        else why it is skipped."""
        waited = now - closed_at
        if waited > self.deadline:
            return Skip("deadline", waited, len(self.waiting))
        if self.free and not self.waiting:
            self.free -= 1
            return True
        if len(self.waiting) >= self.limit:
            return Skip("backlog_full", waited, len(self.waiting))
        self.waiting.append((closed_at, token))
        return False

    def release(self, now: float) -> tuple[Token | None, list[tuple[Token, Skip]]]:
        """A slot freed: the oldest waiting job still within the deadline takes it (None when
        there is none: the slot stays free), and the older ones past it are skipped."""
        skipped: list[tuple[Token, Skip]] = []
        while self.waiting:
            backlog = len(self.waiting)
            closed_at, token = self.waiting.popleft()
            waited = now - closed_at
            if waited <= self.deadline:
                return token, skipped
            skipped.append((token, Skip("deadline", waited, backlog)))
        self.free += 1
        return None, skipped

    def withdraw(self, token: Token) -> None:
        """A waiting job nobody waits for any more (its finalization was cancelled)."""
        for entry in self.waiting:
            if entry[1] is token:
                self.waiting.remove(entry)
                return


class Shed(Exception):
    """The capture is not compared: `skip` says why."""

    def __init__(self, skip: Skip) -> None:
        super().__init__(skip.reason)
        self.skip = skip


class Backlog:
    """The book on the event loop: `async with backlog.turn(closed_at):` holds a worker's slot,
    or raises `Shed`."""

    def __init__(self, slots: int, limit: int, deadline: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.book: Book[asyncio.Future[Skip | None]] = Book(slots, limit, deadline)
        self.clock = clock

    def __len__(self) -> int:
        return len(self.book.waiting)

    @contextlib.asynccontextmanager
    async def turn(self, closed_at: float) -> AsyncIterator[None]:
        """Hold a worker's slot for a capture that closed at `closed_at` (wall clock)."""
        slot: asyncio.Future[Skip | None] = asyncio.get_running_loop().create_future()
        decision = self.book.arrive(slot, closed_at, self.clock())
        if isinstance(decision, Skip):
            raise Shed(decision)
        if not decision:
            await self._wait(slot)
        try:
            yield
        finally:
            self._release()

    async def _wait(self, slot: asyncio.Future[Skip | None]) -> None:
        try:
            skip = await slot
        except asyncio.CancelledError:
            if slot.cancelled():
                self.book.withdraw(slot)
            elif slot.result() is None:
                self._release()
            raise
        if skip is not None:
            raise Shed(skip)

    def _release(self) -> None:
        """Hand the slot on; a job cancelled since it was queued hands it on in turn."""
        while True:
            taker, skipped = self.book.release(self.clock())
            for slot, skip in skipped:
                _settle(slot, skip)
            if taker is None or not taker.done():
                break
        if taker is not None:
            taker.set_result(None)


def _settle(slot: asyncio.Future[Skip | None], value: Skip | None) -> None:
    if not slot.done():
        slot.set_result(value)


def skipped_document(document: dict[str, Any], sizes: dict[str, int],
                     skip: Skip) -> dict[str, Any]:
    """A shed capture's pair.json: each leg's `bytes` as recorded (`sizes` by file name), no
    comparison or check, and the `skipped` object."""
    legs = document["legs"]
    for leg in _legs(legs.get("downstream"), legs.get("upstream"),
                     *legs.get("upstream_attempts", ())):
        if leg["file"] in sizes:
            leg["bytes"] = sizes[leg["file"]]
    document.pop("comparison", None)
    document.pop("check", None)
    document["skipped"] = skip.json()
    return document


def _legs(*legs: dict[str, Any] | None) -> Iterable[dict[str, Any]]:
    return (leg for leg in legs if leg is not None)


def mask_files(directory: Path, names: list[str], patterns: list[str]) -> dict[str, int]:
    """A shed capture's files masked as a worker masks them, so that what the body patterns
    match never stays on disk; each file's size after. Runs on the disk thread."""
    masker = BodyMasker(patterns)
    sizes: dict[str, int] = {}
    for name in names:
        path = directory / name
        body = path.read_bytes()
        masked = masker.mask(body)
        if masked != body:
            rewrite(str(path), masked)
        sizes[name] = len(masked)
    return sizes
