"""The legs being relayed right now: counted for `/healthz`, and on shutdown given a grace
period, then cut, each saying why it ended (`shutdown`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from calltap.proxy.relay import Leg
from calltap.recordings import SHUTDOWN

CANCEL_WAIT = 5.0
"""Seconds shutdown waits for the legs it cut to wind down (close their files, hand on)."""


class InFlight:
    """Each leg under way, by the task relaying it."""

    def __init__(self) -> None:
        self._legs: dict[asyncio.Task[Any], Leg] = {}

    def __len__(self) -> int:
        return len(self._legs)

    @contextlib.contextmanager
    def relaying(self, leg: Leg) -> Iterator[None]:
        """Count `leg` as in flight while the current task relays it."""
        task = asyncio.current_task()
        assert task is not None
        self._legs[task] = leg
        try:
            yield
        finally:
            del self._legs[task]

    async def settle(self, grace: float) -> int:
        """Wait up to `grace` seconds for the legs in flight to end, then cut the rest; how
        many were cut."""
        if self._legs:
            await asyncio.wait(list(self._legs), timeout=grace)
        remaining = list(self._legs.items())
        for task, leg in remaining:
            leg.cancel_reason = SHUTDOWN
            task.cancel()
        if remaining:
            await asyncio.wait([task for task, _ in remaining], timeout=CANCEL_WAIT)
        return len(remaining)
