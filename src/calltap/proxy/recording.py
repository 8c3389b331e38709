"""The recording addon: a capture directory per request, and the sinks that write its bodies.

At `LegStarted` it decides whether the leg is recorded (a compared path, or `record_other`, and
the disk quota not reached), reserves the capture directory under the leg's request id (a
client's id that has a capture already gets `<id>+N`, known before the request is forwarded) and
gives the request body its sink; at `ResponseStarted` it opens the response body's sink; at
`LegEnded` it closes both, which for a small exchange writes both files in one disk call. A back
attempt the pairing addon matched is recorded into its front leg's capture.
The quota is kept here: over it, recording pauses (the traffic goes on) until a rescan every
`QUOTA_RESCAN_INTERVAL` seconds finds room. So is the overload policy (`overload.py`): while the
loop runs late or the disk thread falls behind, new legs are relayed unrecorded. Each leg not
recorded for either reason raises `LegUnrecorded`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from calltap import recordings
from calltap.config import Config, ConfigError
from calltap.proxy.capture import Claim, Opener, Recorder, Sink
from calltap.proxy.hooks import (
    Addon,
    CaptureFailed,
    Hooks,
    LegEnded,
    LegStarted,
    LegUnrecorded,
    PauseReason,
    Recording,
    RecordingPaused,
    ResponseStarted,
)
from calltap.proxy.lifecycle import Kind
from calltap.proxy.overload import Governor, Sample, lag_probe
from calltap.proxy.relay import Leg

QUOTA_RESCAN_INTERVAL = 30.0


class RecordingAddon(Addon):
    """Owns the `Recorder` (the recordings tree, its disk thread and quota)."""

    def __init__(self, config: Config, hooks: Hooks, logger: Any,
                 opener: Opener | None = None) -> None:
        self.config = config
        self.hooks = hooks
        self.log = logger
        self.paired = config.front is not None and config.back is not None
        self.recorder = Recorder(config.recordings, max_capture_bytes=config.max_capture_bytes,
                                 quota_bytes=config.disk_quota_bytes,
                                 on_failure=self._failed, opener=opener)
        self.governor = Governor(config.max_loop_lag, self.recorder.disk.max_backlog)
        self._last_rescan = 0.0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Prepare the tree (ConfigError when it is not writable) and run the disk thread; on
        the way out, finish every queued file operation."""
        try:
            leftovers = await asyncio.to_thread(self.recorder.prepare)
        except OSError as exc:
            raise ConfigError(f"recordings: cannot write to {self.config.recordings}:"
                              f" {exc.strerror or exc}") from None
        self.recorder.start(asyncio.get_running_loop())
        if leftovers:
            self.log.warning("recording.leftovers", count=len(leftovers), files=leftovers[:50])
        probe = asyncio.create_task(lag_probe(self._probed))
        try:
            yield
        finally:
            probe.cancel()
            await self.recorder.stop()

    def health(self) -> dict[str, Any]:
        recorder = self.recorder
        return {"recorder": {"recordings": str(self.config.recordings),
                             "recording": not (recorder.paused or self.governor.shedding),
                             "paused": recorder.paused, "overloaded": self.governor.shedding,
                             "loop_lag_s": round(self.governor.lag, 4),
                             "used_bytes": recorder.used_bytes,
                             "quota_bytes": recorder.quota_bytes,
                             "held_bytes": recorder.disk.held_bytes,
                             "backlog_bytes": recorder.disk.backlog}}

    # -- hooks -------------------------------------------------------------------------------

    async def leg_started(self, event: LegStarted) -> None:
        leg = event.leg
        if leg.recording is None:
            if not (leg.compared or self.config.record_other):
                return
            reason = self._unrecorded(leg)
            if reason is not None:
                self.hooks.emit(LegUnrecorded(leg, reason))
                return
            reserved = await self._reserve(leg.key, leg.minted, leg.started)
            if reserved is None:
                return
            leg.key, claim = reserved
            leg.recording = Recording(leg.key, claim, self._kind(leg),
                                      orphan=leg.side == "upstream" and leg.compared
                                      and self.paired)
        stem = recordings.stem(leg.side, leg.attempt)  # type: ignore[arg-type]
        leg.request_sink = self._request_sink(leg.recording.claim, recordings.request_name(stem),
                                              leg.body_prefix, leg.body_whole)

    def response_started(self, event: ResponseStarted) -> None:
        leg = event.leg
        if leg.recording is not None:
            stem = recordings.stem(leg.side, leg.attempt)  # type: ignore[arg-type]
            name = recordings.body_name(stem, recordings.body_extension(leg.content_type))
            leg.sink = self.recorder.sink(leg.recording.claim, name)

    def leg_ended(self, event: LegEnded) -> None:
        """Close the leg's sinks: its files get their final names (or none, if not recorded)."""
        leg = event.leg
        for sink, attribute in ((leg.sink, "file"), (leg.request_sink, "request_file")):
            if sink is not None:
                name = sink.close()
                setattr(leg, attribute, name)
                if name is not None:
                    self.recorder.account(sink.recorded)

    async def housekeep(self) -> None:
        """Once paused, rescan the tree now and then, and resume once there is room."""
        now = time.monotonic()
        if not self.recorder.paused or now - self._last_rescan < QUOTA_RESCAN_INTERVAL:
            return
        self._last_rescan = now
        self.recorder.used_bytes = await asyncio.to_thread(self.recorder.measure)
        if not self.recorder.over_quota():
            self.recorder.paused = False
            self._paused_event(False)

    # -- helpers ------------------------------------------------------------------------------

    def _kind(self, leg: Leg) -> Kind:
        if not leg.compared:
            return "other"
        return "pair" if leg.side == "downstream" and self.paired else "single"

    def _unrecorded(self, leg: Leg) -> PauseReason | None:
        """Why a leg with no capture yet is not recorded, or None when it is. A back attempt
        with no recorded front leg is not recorded while shedding nor for a pairing window
        after it: its front leg was most likely shed."""
        recorder = self.recorder
        if recorder.paused:
            return "quota"
        if recorder.over_quota():
            recorder.paused = True
            self._last_rescan = time.monotonic()
            self._paused_event(True)
            return "quota"
        governor = self.governor
        if governor.shedding or (
                self.paired and leg.side == "upstream" and leg.compared
                and governor.recently(asyncio.get_running_loop().time(),
                                      self.config.pairing_window)):
            governor.unrecorded += 1
            return "overload"
        return None

    def _paused_event(self, paused: bool) -> None:
        self.hooks.emit(RecordingPaused(paused, self.recorder.used_bytes,
                                        self.recorder.quota_bytes))

    def _probed(self, now: float, lag: float) -> None:
        """One lag probe: start or end an overload pause, and say so."""
        governor = self.governor
        backlog = self.recorder.disk.backlog
        change = governor.observe(now, Sample(lag, backlog))
        if change is None:
            return
        used, quota = self.recorder.used_bytes, self.recorder.quota_bytes
        if change == "shed":
            self.hooks.emit(RecordingPaused(True, used, quota, "overload", lag=lag,
                                            disk_backlog=backlog))
        else:
            self.hooks.emit(RecordingPaused(
                False, used, quota, "overload", lag=lag, disk_backlog=backlog,
                unrecorded=governor.unrecorded, paused_for=now - (governor.shed_at or now)))

    async def _reserve(self, request_id: str, minted: bool,
                       started: float) -> tuple[str, Claim] | None:
        """The capture key and directory. A minted id is unique, so its directory is created
        on the disk thread while the request goes on; a client's id may need a `+N` suffix,
        which must be known before the request is forwarded."""
        if minted:
            return self.recorder.claim(request_id, started)
        return await self.recorder.reserve(request_id, started)

    def _request_sink(self, claim: Claim, name: str, prefix: bytes, whole: bool) -> Sink:
        """The request body's sink, closed with the response's when the leg ends, so that a
        small exchange reaches the disk in one call. A body read whole is complete: should it
        spill, it goes straight to its final name; a streamed one to a `.partial`."""
        sink = self.recorder.sink(claim, name, partial=not whole)
        if prefix:
            sink.write(prefix)
        return sink

    def _failed(self, stage: str, exc: BaseException, path: Path) -> None:
        self.hooks.emit(CaptureFailed(stage, exc, path))
