"""When recording itself is more than the machine can give: relay new requests unrecorded.

Recording a pair costs the event loop and the disk thread about a millisecond of CPU. Past the
load the machine can both relay and record, that cost queues every stream behind it: requests
wait, time out, and the disk thread, starved, drops the bodies it was handed. So while the loop
runs late on its timers (past `max_loop_lag` at most of the last `LATE_WINDOW` probes) or the disk
thread's backlog grows past a share of its bound, new requests are relayed without being
recorded, and recording resumes once both have stayed low for `CALM_SECONDS`. Legs already
recording go on; a back attempt whose front leg is recorded is recorded with it.

`Governor` is the policy, pure (no clock, no asyncio): it is told each probe's lag and the disk
backlog and says when shedding starts and ends. `lag_probe` measures the lag on the loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

PROBE_INTERVAL = 0.05
"""Seconds between two lag probes: a probe is one timer, so 20 a second cost nothing."""
LATE_WINDOW, LATE_NEEDED = 8, 6
"""Shedding starts when this many of the last probes were late: one late probe is a pause (a
collection, a large pair.json, a burst of connections); six of eight (each late past the limit,
so more than 0.6 s of them at the default 0.05 s) is a loop that cannot keep up, even when an
overloaded loop now and then fires a timer on time."""
CALM_SECONDS = 2.0
"""How long the lag and the backlog must stay low before recording resumes."""
DISK_SHARE, DISK_CALM_SHARE = 0.25, 0.0625
"""The disk thread's backlog, as a share of its bound, past which recording is shed, and under
which it counts as calm: shedding starts well before the bound drops recorded bodies."""
RECENT_PROBES = round(1.0 / PROBE_INTERVAL)
"""The probes the lag gauge reports the worst of: the last second's when they are on time."""

Change = Literal["shed", "resume"]


@dataclass(frozen=True, slots=True)
class Sample:
    """One probe: how late its timer fired (seconds), and the disk thread's backlog (bytes)."""

    lag: float
    disk_backlog: int


class Governor:
    """Whether new requests are recorded. `max_lag` 0 leaves the lag out (the disk backlog
    still counts); `max_disk_backlog` is the disk thread's bound in bytes."""

    def __init__(self, max_lag: float, max_disk_backlog: int) -> None:
        self.max_lag = max_lag
        self.disk_high = int(max_disk_backlog * DISK_SHARE)
        self.disk_calm = int(max_disk_backlog * DISK_CALM_SHARE)
        self.shedding = False
        self.shed_at: float | None = None
        """When the current (or the last) shedding began."""
        self.resumed_at: float | None = None
        """When the last shedding ended."""
        self.unrecorded = 0
        """Legs relayed unrecorded since shedding began (counted by the recording addon)."""
        self.recent: deque[float] = deque(maxlen=RECENT_PROBES)
        self._late: deque[bool] = deque(maxlen=LATE_WINDOW)
        self._calm_since: float | None = None

    @property
    def lag(self) -> float:
        """The worst lag of the last `RECENT_PROBES` probes."""
        return max(self.recent, default=0.0)

    def observe(self, now: float, sample: Sample) -> Change | None:
        """Take one probe at `now` (seconds, any monotonic clock); the change it makes."""
        self.recent.append(sample.lag)
        self._late.append(bool(self.max_lag) and sample.lag > self.max_lag)
        if not self.shedding:
            if sum(self._late) >= LATE_NEEDED or sample.disk_backlog > self.disk_high:
                self.shedding, self.shed_at = True, now
                self.unrecorded = 0
                self._calm_since = None
                return "shed"
            return None
        calm = (sample.lag <= self.max_lag / 2 or not self.max_lag) and (
            sample.disk_backlog <= self.disk_calm)
        if not calm:
            self._calm_since = None
            return None
        if self._calm_since is None:
            self._calm_since = now
        if now - self._calm_since < CALM_SECONDS:
            return None
        self.shedding, self.resumed_at = False, now
        return "resume"

    def recently(self, now: float, window: float) -> bool:
        """Shedding now, or it ended less than `window` seconds ago: a back attempt that finds
        no recorded front leg then most likely belongs to one relayed unrecorded."""
        return self.shedding or (self.resumed_at is not None and now - self.resumed_at < window)


async def lag_probe(observe: Callable[[float, float], None],
                    interval: float = PROBE_INTERVAL) -> None:
    """Forever: sleep `interval`, then `observe(now, lag)` with how late the timer fired."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + interval
        await asyncio.sleep(interval)
        now = loop.time()
        observe(now, max(0.0, now - due))
