"""The pairing addon: which capture a back attempt belongs to, and when a capture is finalized.

It executes two pure parts: the pairing book (`pairing.py`: header, traceparent, fingerprint)
and the pair lifecycle (`lifecycle.py`: the actions once legs end, expire or shut down). At
`LegArrived` it fingerprints a compared request (a back attempt only when its `X-Request-ID`
names no front leg) and matches a back attempt to its front leg's capture; at `LegStarted` it
registers a front leg (and every capture) with both; at `LegEnded` it feeds the lifecycle and
raises `CaptureClosed` for each capture to finalize. Every second `housekeep` expires the front
legs the book gave up on (orphans), and on shutdown every capture is finalized as it stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from calltap.config import Config
from calltap.proxy.fingerprint import request_fingerprint
from calltap.proxy.hooks import (
    Addon,
    CaptureClosed,
    Hooks,
    LegArrived,
    LegEnded,
    LegStarted,
    PairCompared,
    PairsEvicted,
    Recording,
)
from calltap.proxy.lifecycle import Action, Finalize, Lifecycle
from calltap.proxy.pairing import FrontLeg, PairingBook
from calltap.proxy.relay import Leg
from calltap.recordings import REQUEST_TOO_LARGE

FINGERPRINT_INLINE_BYTES = 256 * 1024
"""Bodies larger than this are fingerprinted in a thread, so the loop does not stall."""


class Pairs(Addon):
    """Every open capture, by key, and the state that decides when each is finalized."""

    def __init__(self, config: Config, hooks: Hooks) -> None:
        self.hooks = hooks
        self.book = (PairingBook(config.pairing_window, config.max_pending_pairs)
                     if config.front is not None and config.back is not None else None)
        self.lifecycle = Lifecycle()
        self.open: dict[str, Recording] = {}

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """On the way out (no leg in flight any more), finalize every capture as it stands."""
        try:
            yield
        finally:
            self._execute(self.lifecycle.shutdown())

    def health(self) -> dict[str, Any]:
        return {"recorder": {"open_captures": len(self.open)}, "pending_pairs": self.pending}

    @property
    def pending(self) -> int:
        return self.book.pending if self.book is not None else 0

    # -- hooks -------------------------------------------------------------------------------

    async def leg_arrived(self, event: LegArrived) -> None:
        leg = event.leg
        if self.book is None or not leg.compared:
            return
        if leg.side == "downstream":
            leg.fingerprint = await _fingerprint(leg.body_prefix, leg.body_whole, leg.path)
            return
        request_id = _header_id(leg)
        # An attempt that carries its front leg's key pairs by it: its body need not be read.
        fingerprint = (None if self.book.knows(request_id)
                       else await _fingerprint(leg.body_prefix, leg.body_whole, leg.path))
        match = self.book.match_back(request_id, leg.trace_id, fingerprint, time.monotonic())
        recording = self.open.get(match.key) if match is not None else None
        if match is None or recording is None or not self.lifecycle.attempt_matched(match.key):
            return
        if recording.pairing is None or match.attempt == 1:
            recording.pairing = match.method
        leg.attempt = match.attempt
        leg.key = recording.key
        leg.recording = recording

    def leg_started(self, event: LegStarted) -> None:
        leg = event.leg
        recording = leg.recording
        if recording is None or recording.key in self.open:
            return
        self.open[recording.key] = recording
        self.lifecycle.open(recording.key, recording.kind, orphan=recording.orphan)
        if recording.kind == "pair" and self.book is not None:
            self.book.add_front(FrontLeg(recording.key, leg.trace_id, leg.fingerprint,
                                         time.monotonic()))

    def leg_ended(self, event: LegEnded) -> None:
        leg = event.leg
        recording = leg.recording
        if recording is None:
            return
        key = recording.key
        if leg.side == "upstream":
            recording.attempts.append(leg)
        else:
            recording.downstream = leg
        if recording.kind == "pair" and leg.attempt is not None:
            actions = self.lifecycle.attempt_ended(key)
        elif recording.kind == "pair" and leg.ended != REQUEST_TOO_LARGE:
            if self.book is not None:
                self.book.front_finished(key, time.monotonic())
            actions = self.lifecycle.front_ended(key)
        else:
            actions = self.lifecycle.single_ended(key)
        self._execute(actions)

    def pair_compared(self, event: PairCompared) -> None:
        self.lifecycle.finalized(event.recording.key)
        self.open.pop(event.recording.key, None)

    async def housekeep(self) -> None:
        """Close the fronts the pairing book gave up on, as orphans; say which it evicted."""
        if self.book is None:
            return
        evicted = self.book.evicted()
        if evicted:
            self.hooks.emit(PairsEvicted(evicted, self.book.max_pending))
        for key in self.book.expire(time.monotonic()):
            self._execute(self.lifecycle.expired(key))

    # -- executing the lifecycle's actions ------------------------------------------------

    def _execute(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Finalize):
                recording = self.open[action.key]
                recording.orphan = action.orphan
                self.hooks.emit(CaptureClosed(recording))
            else:
                self.open.pop(action.key, None)


def _header_id(leg: Leg) -> str | None:
    for name, value in leg.request_headers:
        if name.lower() == "x-request-id":
            return value
    return None


async def _fingerprint(body: bytes, whole: bool, path: str) -> str | None:
    """The request's fingerprint; parsed in a thread when the body is big enough to stall."""
    if not whole:
        return None
    if len(body) > FINGERPRINT_INLINE_BYTES:
        return await asyncio.to_thread(request_fingerprint, body, path)
    return request_fingerprint(body, path)

