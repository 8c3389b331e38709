"""The divergence log addon: what calltap says about each finalized capture, one JSON line each.

One line per capture (`pair.compared`, `leg.checked` or `pair.orphaned`; `pair.skipped` when the
comparison backlog shed it), `leg.aborted` per leg that did not end complete (judged from what it
relayed), and the alarms people tail: a `divergence` per breaking finding of a comparison, a
`leg.defect` per fatal finding of a leg with no partner to compare it with. Which findings are
alarms is decided once, by `alarms`, from each finding's `Severity`; the metrics addon counts the
same list. Also `capture.failed`, `request.refused`, `recording.paused`/`resumed` and
`pairs.evicted`.
"""

from __future__ import annotations

from typing import Any

from calltap.codes import Severity
from calltap.proxy.analysis import Judgement
from calltap.proxy.backlog import Skip
from calltap.proxy.hooks import (
    Addon,
    Alarm,
    CaptureFailed,
    LegEnded,
    PairCompared,
    PairsEvicted,
    Recording,
    RecordingPaused,
    Refused,
)
from calltap.proxy.relay import Leg
from calltap.recordings import CLIENT_ABORTED, COMPLETE, SHUTDOWN

BREAKING = frozenset({Severity.FATAL, Severity.NEGOTIABLE})
CUT = frozenset({CLIENT_ABORTED, SHUTDOWN})
"""How a client's stream ends when the client hung up or calltap's shutdown cut it before its
terminal marker or an error frame (a hang-up after either is judged `complete` from what was
relayed): the shorter stream is nobody's defect, so its findings stay in pair.json (and
`pair.compared` says how it ended) but raise no `divergence` or `leg.defect` line. A request
finding still does: the request was sent whole, however its answer ended."""
EVICTED_LOGGED = 20
"""Request ids named in one `pairs.evicted` line (the count covers them all)."""


def alarms(judgement: Judgement | None, mode: str, leg: Leg | None,
           *, unpartnered: bool) -> list[Alarm]:
    """The findings worth a live line. A comparison's breaking findings are divergences; when a
    side could not be read nothing can be said across the sides, only each side's own fatal
    findings (as leg defects). A checked leg's fatal findings are leg defects when it has no
    partner (`unpartnered`: single-leg mode, an orphaned front leg). None for a stream the
    client or shutdown cut."""
    if judgement is None or leg is None:
        return []
    requests = [Alarm("divergence", finding, "request") for finding in judgement.findings
                if finding.side == "request" and finding.severity in BREAKING]
    if leg.ended in CUT:
        return requests if mode == "compare" else []
    if mode == "compare" and judgement.readable:
        return [Alarm("divergence", finding, finding.side)
                for finding in judgement.findings if finding.severity in BREAKING]
    if mode == "compare":
        return [Alarm("leg.defect", finding, side)
                for side in ("upstream", "downstream")
                for finding in judgement.sides.get(side, ())
                if finding.severity is Severity.FATAL] + requests
    if mode == "check" and unpartnered:
        return [Alarm("leg.defect", finding, leg.side)
                for finding in judgement.findings if finding.severity is Severity.FATAL]
    return []


class DivergenceLog(Addon):
    """Writes the lines above to calltap's structlog logger."""

    def __init__(self, logger: Any) -> None:
        self.log = logger

    def pair_compared(self, event: PairCompared) -> None:
        recording = event.recording
        capture = str(recording.directory)
        self.aborted(recording)
        leg = recording.downstream or event.chosen
        common = {"request_id": recording.key, "verdict": event.verdict, "codes": event.codes,
                  "capture": capture}
        if event.skipped is not None:
            self.skipped(event.skipped, recording, capture, common)
        elif recording.orphan:
            self.orphaned(recording, common)
        elif event.mode == "compare" and leg is not None:
            self.log.info(
                "pair.compared", pairing=recording.pairing, attempts=len(recording.attempts),
                bytes_upstream=_size(event.chosen, event.sizes),
                bytes_downstream=_size(recording.downstream, event.sizes),
                downstream_ended=leg.ended,
                compared_after=event.document.get("compared_after"), **common)
        elif event.mode == "check" and leg is not None:
            self.log.info("leg.checked", side=leg.side, bytes=_size(leg, event.sizes),
                          ended=leg.ended, **common)
        for alarm in event.alarms:
            finding = alarm.finding
            place = ({"turn": finding.turn, "tool": finding.tool} if alarm.side == "request"
                     else {"choice": finding.choice})
            self.log.warning(alarm.event, request_id=recording.key, code=str(finding.code),
                             severity=str(alarm.severity), side=alarm.side,
                             count=finding.count, capture=capture, **place)

    def skipped(self, skip: Skip, recording: Recording, capture: str,
                common: dict[str, Any]) -> None:
        """`pair.skipped` for a capture the comparison backlog shed (and `pair.orphaned` too
        for an orphan: it is still one)."""
        self.log.warning("pair.skipped", request_id=recording.key, capture=capture,
                         reason=skip.reason, waited=round(skip.waited, 3), backlog=skip.backlog)
        if recording.orphan:
            self.orphaned(recording, common)

    def orphaned(self, recording: Recording, common: dict[str, Any]) -> None:
        side = "downstream" if recording.downstream is not None else "upstream"
        self.log.warning("pair.orphaned", side=side, **common)

    def leg_ended(self, event: LegEnded) -> None:
        """A leg nobody records is judged by its socket alone, at once."""
        leg = event.leg
        if leg.recording is None and leg.ended != COMPLETE:
            self._aborted(leg.key, leg)

    def aborted(self, recording: Recording) -> None:
        """`leg.aborted` for each leg of the recording that did not end complete, as judged
        from what it relayed (so only once the capture was read)."""
        for leg in recording.legs:
            if leg.ended != COMPLETE:
                self._aborted(recording.key, leg)

    def _aborted(self, key: str, leg: Leg) -> None:
        self.log.warning("leg.aborted", request_id=key, side=leg.side, ended=leg.ended,
                         status=leg.status, bytes=leg.bytes, error=leg.error)

    def capture_failed(self, event: CaptureFailed) -> None:
        exc = event.error
        self.log.error("capture.failed", stage=event.stage, error=type(exc).__name__,
                       errno=getattr(exc, "errno", None), path=str(event.path))

    def refused(self, event: Refused) -> None:
        self.log.warning("request.refused", side=event.leg, status=event.status,
                         code=event.code, error=event.error)

    def recording_paused(self, event: RecordingPaused) -> None:
        if event.reason == "overload":
            self._overload(event)
        elif event.paused:
            self.log.warning("recording.paused", reason=event.reason,
                             used_bytes=event.used_bytes, quota_bytes=event.quota_bytes)
        else:
            self.log.info("recording.resumed", reason=event.reason,
                          used_bytes=event.used_bytes, quota_bytes=event.quota_bytes)

    def _overload(self, event: RecordingPaused) -> None:
        lag = round(event.lag or 0.0, 4)
        if event.paused:
            self.log.warning("recording.paused", reason=event.reason, loop_lag=lag,
                             disk_backlog_bytes=event.disk_backlog)
        else:
            self.log.info("recording.resumed", reason=event.reason, loop_lag=lag,
                          disk_backlog_bytes=event.disk_backlog, unrecorded=event.unrecorded,
                          paused_for=round(event.paused_for or 0.0, 3))

    def pairs_evicted(self, event: PairsEvicted) -> None:
        self.log.warning("pairs.evicted", count=len(event.keys), max_pending=event.max_pending,
                         request_ids=event.keys[:EVICTED_LOGGED])


def _size(leg: Leg | None, sizes: dict[str, int]) -> int | None:
    if leg is None or leg.file is None:
        return None
    return sizes.get(leg.file)
