"""The relay core's hooks: typed events, once per leg or per pair, and the addons that take them.

The core (`proxy/app.py`) relays bytes and says what happened; everything else calltap does
with a leg — recording it, pairing it, comparing it, logging, counting, serving the admin API —
is an addon: a class with a method named after each event it wants (`leg_ended(self, event)`)
and, optionally, a `running()` async context manager entered when calltap starts and left when
it stops, in reverse order, through one `AsyncExitStack`. A new feature is a new addon file.

Nothing here runs per chunk. The events a leg raises, in order: `LegArrived` (the request is
admitted; the pairing addon finds the front leg of a back attempt), `LegStarted` (the recording
addon reserves its capture), `ResponseStarted` (status and headers known: the body's sink is
opened), `LegEnded`. Per capture: `CaptureClosed` (every leg ended: compare it), then
`PairCompared`. Handlers of the async events are awaited in addon order; a handler that raises
is reported as `CaptureFailed` and the traffic goes on (recording is fail-open).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from calltap.codes import Severity
from calltap.proxy.backlog import Skip
from calltap.proxy.capture import Claim
from calltap.proxy.lifecycle import Kind
from calltap.proxy.relay import Leg
from calltap.transcript import Finding

Mode = Literal["compare", "check", "record"]
PauseReason = Literal["quota", "overload"]
PAUSE_REASONS: tuple[PauseReason, ...] = ("quota", "overload")


@dataclass(eq=False, slots=True)
class Recording:
    """One capture directory and the legs recorded into it."""

    key: str
    claim: Claim
    kind: Kind
    orphan: bool = False
    downstream: Leg | None = None
    attempts: list[Leg] = field(default_factory=list)
    pairing: str | None = None

    @property
    def directory(self) -> Path:
        return self.claim.path

    @property
    def legs(self) -> list[Leg]:
        return [leg for leg in (self.downstream, *self.attempts) if leg is not None]


@dataclass(frozen=True, slots=True)
class Alarm:
    """A finding worth a live log line: `divergence` (across the legs) or `leg.defect` (one
    leg's own fatal finding, with no partner to compare it with)."""

    event: Literal["divergence", "leg.defect"]
    finding: Finding
    side: str | None

    @property
    def severity(self) -> Severity:
        return self.finding.severity


class Event:
    hook: ClassVar[str]


@dataclass(slots=True)
class LegArrived(Event):
    hook: ClassVar[str] = "leg_arrived"
    leg: Leg


@dataclass(slots=True)
class LegStarted(Event):
    hook: ClassVar[str] = "leg_started"
    leg: Leg


@dataclass(slots=True)
class ResponseStarted(Event):
    hook: ClassVar[str] = "response_started"
    leg: Leg


@dataclass(slots=True)
class LegEnded(Event):
    hook: ClassVar[str] = "leg_ended"
    leg: Leg


@dataclass(slots=True)
class CaptureClosed(Event):
    hook: ClassVar[str] = "capture_closed"
    recording: Recording


@dataclass(slots=True)
class PairCompared(Event):
    """A recording was finalized: pair.json written (or not: `path` None) and judged."""

    hook: ClassVar[str] = "pair_compared"
    recording: Recording
    document: dict[str, Any]
    mode: Mode
    path: Path | None
    verdict: str | None = None
    codes: list[str] = field(default_factory=list)
    alarms: list[Alarm] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    """Recorded body bytes by file name."""
    chosen: Leg | None = None
    """The compared upstream attempt."""
    skipped: Skip | None = None
    """Why the capture was not compared (the comparison backlog shed it)."""


@dataclass(slots=True)
class Refused(Event):
    hook: ClassVar[str] = "refused"
    leg: str
    status: int
    code: str
    error: str | None = None


@dataclass(slots=True)
class CaptureFailed(Event):
    hook: ClassVar[str] = "capture_failed"
    stage: str
    error: BaseException
    path: Path


@dataclass(slots=True)
class RecordingPaused(Event):
    """Recording stopped (`paused`) or resumed: `reason` `quota` when the disk quota stopped it
    (a rescan found room again), `overload` when the loop's lag or the disk thread's backlog did
    (`overload.py`)."""

    hook: ClassVar[str] = "recording_paused"
    paused: bool
    used_bytes: int
    quota_bytes: int
    reason: PauseReason = "quota"
    lag: float | None = None
    """The loop's lag (seconds) that started an overload pause."""
    disk_backlog: int | None = None
    """The disk thread's backlog (bytes) that started an overload pause, or then."""
    unrecorded: int | None = None
    """Legs relayed unrecorded during the overload pause that ended."""
    paused_for: float | None = None
    """Seconds the overload pause that ended lasted."""


@dataclass(slots=True)
class LegUnrecorded(Event):
    """A leg calltap would have recorded was relayed unrecorded: recording was paused."""

    hook: ClassVar[str] = "leg_unrecorded"
    leg: Leg
    reason: PauseReason


@dataclass(slots=True)
class PairsEvicted(Event):
    """Front legs dropped unpaired to keep `max_pending_pairs`."""

    hook: ClassVar[str] = "pairs_evicted"
    keys: list[str]
    max_pending: int


class Addon:
    """Base for addons: override the hooks you need (a method per `Event.hook`), `running()`
    to hold a resource while calltap runs, `health()` to add to `/healthz`."""

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        yield

    def health(self) -> dict[str, Any]:
        return {}


def merge_health(health: dict[str, Any], addons: list[Addon]) -> dict[str, Any]:
    """`health` with each addon's `health()` merged in, in addon order: a section (a dict)
    extends the section of that name, any other value is set."""
    for addon in addons:
        for name, value in addon.health().items():
            if isinstance(value, dict):
                health.setdefault(name, {}).update(value)
            else:
                health[name] = value
    return health


Handler = Callable[[Any], Any]


class Hooks:
    """Calls each addon's method for an event, in addon order. The lists are built once, so an
    event nobody handles costs a dictionary lookup."""

    def __init__(self, addons: list[Addon], root: Path) -> None:
        self.addons = addons
        self.root = root
        """Named by a failure no capture directory is known for."""
        self._handlers: dict[str, list[Handler]] = {}
        self._queue: deque[Event] = deque()
        self._dispatching = False

    def handlers(self, hook: str) -> list[Handler]:
        found = self._handlers.get(hook)
        if found is None:
            found = [getattr(addon, hook) for addon in self.addons if hasattr(addon, hook)]
            self._handlers[hook] = found
        return found

    def emit(self, event: Event) -> None:
        """Run the handlers of a synchronous event; one that raises does not stop the rest.
        An event raised by a handler waits until every handler has had the current one, so
        each addon sees a leg end before the capture it closed."""
        if self._dispatching:
            self._queue.append(event)
            return
        self._dispatching = True
        try:
            self._dispatch(event)
            while self._queue:
                self._dispatch(self._queue.popleft())
        finally:
            self._dispatching = False

    def _dispatch(self, event: Event) -> None:
        for handler in self.handlers(event.hook):
            try:
                handler(event)
            except Exception as exc:
                self._failed(event, exc)

    async def emit_async(self, event: Event) -> None:
        """Await the handlers of an event that may wait (a capture directory being made)."""
        for handler in self.handlers(event.hook):
            try:
                result = handler(event)
                if isinstance(result, Awaitable):
                    await result
            except Exception as exc:
                self._failed(event, exc)

    def _failed(self, event: Event, exc: Exception) -> None:
        if isinstance(event, CaptureFailed):
            return
        self.emit(CaptureFailed(event.hook, exc, self.root))
