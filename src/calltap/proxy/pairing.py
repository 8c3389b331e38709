"""The pairing book: which front leg an upstream (back) attempt belongs to.

No I/O and no clock: every call that needs the time takes `now`, monotonic seconds from
the same clock as `FrontLeg.started`.

A back attempt is matched by, in order:

1. `header`: its `X-Request-ID` is the key of a front leg in the book;
2. `traceparent`: its trace id is a front leg's trace id. A client tracing a whole multi-step
   run sends one trace id on many requests, so the candidates sharing that trace id are
   narrowed to those with the attempt's fingerprint when any has it, then chosen as below;
3. `fingerprint`: the front legs with the attempt's content fingerprint, chosen as below.

Choosing among candidates (oldest first): the oldest that has no back attempt yet and is
still open; else the oldest without a back attempt whose front leg already ended; else the
most recent one already matched, whose retry or fallback this attempt then is. So
identical concurrent requests pair in arrival order and never cross, and a gateway
retrying the same content adds attempts to the request it is retrying. Each match counts
as one more attempt for its front key (1-based).

Lifetime: an entry without a back attempt is matchable by trace id or fingerprint for
`window` seconds after its front leg started (or ended, once it ended); then `expire`
returns it as an orphan. A matched entry lives while its front leg is open and `window`
seconds after it ended, then is dropped quietly. A header match only needs the entry to
be in the book. Past `max_pending` entries, the oldest entry is dropped at once; if it
had no back attempt its key is reported as an orphan by the next `expire`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

PairingMethod = Literal["header", "traceparent", "fingerprint"]


@dataclass(frozen=True, slots=True)
class FrontLeg:
    """A chat-like request that entered the front listener."""

    key: str
    trace_id: str | None
    fingerprint: str | None
    started: float


@dataclass(frozen=True, slots=True)
class Match:
    """The front leg a back attempt belongs to, how it was found, and which attempt it is."""

    key: str
    method: PairingMethod
    attempt: int


@dataclass(slots=True)
class _Entry:
    leg: FrontLeg
    attempts: int = 0
    finished: float | None = None

    def matchable(self, now: float, window: float) -> bool:
        if self.finished is not None:
            return now - self.finished <= window
        return self.attempts > 0 or now - self.leg.started <= window


Group = dict[str, _Entry]


class PairingBook:
    """Front legs waiting for (or already given) their upstream attempts.

    Bounded by `max_pending` entries. Call `expire` periodically (say once a second): it
    walks only the entries older than the window, and it also hands over the keys evicted
    over `max_pending` (every one of them, however many arrived since the last call: the
    caller holds an open capture for each key until it learns that the key is an orphan).
    """

    def __init__(self, window: float = 60.0, max_pending: int = 10_000) -> None:
        if window <= 0 or max_pending < 1:
            raise ValueError("window must be positive and max_pending at least 1")
        self.window = window
        self.max_pending = max_pending
        self._entries: dict[str, _Entry] = {}
        self._by_trace: dict[str, Group] = {}
        self._by_fingerprint: dict[str, Group] = {}
        self._evicted: deque[str] = deque()

    @property
    def pending(self) -> int:
        """Front legs in the book, matched or not."""
        return len(self._entries)

    def add_front(self, leg: FrontLeg) -> None:
        """Register a chat-like front leg as it starts. A key already in the book (a client
        id reused across midnight) replaces the older entry."""
        previous = self._entries.get(leg.key)
        if previous is not None:
            self._evict(previous)
        entry = _Entry(leg)
        self._entries[leg.key] = entry
        if leg.trace_id is not None:
            self._by_trace.setdefault(leg.trace_id, {})[leg.key] = entry
        if leg.fingerprint is not None:
            self._by_fingerprint.setdefault(leg.fingerprint, {})[leg.key] = entry
        while len(self._entries) > self.max_pending:
            self._evict(next(iter(self._entries.values())))

    def knows(self, request_id: str | None) -> bool:
        """Whether a back attempt with this `X-Request-ID` pairs by header: then nothing else
        about it is needed."""
        return request_id is not None and request_id in self._entries

    def match_back(
        self,
        request_id: str | None,
        trace_id: str | None,
        fingerprint: str | None,
        now: float,
    ) -> Match | None:
        """The front leg this back attempt belongs to, counted as its next attempt; None
        when nothing matches (the attempt is an orphan)."""
        found = self._find(request_id, trace_id, fingerprint, now)
        if found is None:
            return None
        entry, method = found
        entry.attempts += 1
        return Match(entry.leg.key, method, entry.attempts)

    def front_finished(self, key: str, now: float) -> None:
        """The front leg ended; its entry stays matchable for `window` more seconds, since
        the gateway may still be finishing or retrying upstream. Unknown keys are ignored."""
        entry = self._entries.get(key)
        if entry is not None and entry.finished is None:
            entry.finished = now

    def expire(self, now: float) -> list[str]:
        """Drop entries past their lifetime and return the orphans: keys of front legs that
        never got a back attempt (including those evicted over `max_pending` since the
        last call), oldest first."""
        orphans = list(self._evicted)
        self._evicted.clear()
        stale: list[_Entry] = []
        for entry in self._entries.values():
            if now - entry.leg.started <= self.window:
                break
            if not entry.matchable(now, self.window):
                stale.append(entry)
        for entry in stale:
            self._drop(entry)
            if entry.attempts == 0:
                orphans.append(entry.leg.key)
        return orphans

    def evicted(self) -> list[str]:
        """The keys evicted over `max_pending` without a back attempt since the last `expire`,
        oldest first (the next `expire` returns them among its orphans)."""
        return list(self._evicted)

    def attempts(self, key: str) -> int:
        """Back attempts matched to `key` so far (0 when unknown or never matched)."""
        entry = self._entries.get(key)
        return entry.attempts if entry is not None else 0

    def _find(
        self, request_id: str | None, trace_id: str | None, fingerprint: str | None, now: float
    ) -> tuple[_Entry, PairingMethod] | None:
        if self.knows(request_id):
            return self._entries[request_id], "header"
        by_trace = self._by_trace.get(trace_id) if trace_id is not None else None
        if by_trace is not None:
            entry = None
            if fingerprint is not None:
                same_content = (e for e in by_trace.values() if e.leg.fingerprint == fingerprint)
                entry = self._choose(same_content, now)
            if entry is None:
                entry = self._choose(by_trace.values(), now)
            if entry is not None:
                return entry, "traceparent"
        by_content = self._by_fingerprint.get(fingerprint) if fingerprint is not None else None
        if by_content is not None:
            entry = self._choose(by_content.values(), now)
            if entry is not None:
                return entry, "fingerprint"
        return None

    def _choose(self, candidates: Iterable[_Entry], now: float) -> _Entry | None:
        """Among candidates in arrival order: the oldest unmatched open one, else the oldest
        unmatched ended one, else the most recent matched one (a retry)."""
        unmatched_ended: _Entry | None = None
        latest_matched: _Entry | None = None
        for entry in candidates:
            if not entry.matchable(now, self.window):
                continue
            if entry.attempts:
                latest_matched = entry
            elif entry.finished is None:
                return entry
            elif unmatched_ended is None:
                unmatched_ended = entry
        return unmatched_ended or latest_matched

    def _evict(self, entry: _Entry) -> None:
        self._drop(entry)
        if entry.attempts == 0:
            self._evicted.append(entry.leg.key)

    def _drop(self, entry: _Entry) -> None:
        leg = entry.leg
        del self._entries[leg.key]
        indexes = ((self._by_trace, leg.trace_id), (self._by_fingerprint, leg.fingerprint))
        for index, value in indexes:
            if value is not None:
                group = index[value]
                del group[leg.key]
                if not group:
                    del index[value]
