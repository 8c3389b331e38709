"""What calltap logs when a recording is finalized, and what it counts: one line per pair
(`pair.compared`, `leg.checked` or `pair.orphaned`), `leg.aborted` per leg that did not end
complete (judged from what it relayed), and the alarms people tail: a `divergence` per breaking
finding of a comparison, a `leg.defect` per fatal finding of a leg with no partner to compare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from calltap.dialects import UNKNOWN
from calltap.proxy.metrics import Metrics
from calltap.proxy.relay import Leg
from calltap.recordings import CLIENT_ABORTED, COMPLETE, SHUTDOWN

if TYPE_CHECKING:
    from calltap.proxy.pairs import Recording

BREAKING = ("fatal", "negotiable")
CUT = frozenset({CLIENT_ABORTED, SHUTDOWN})
"""How a client's stream ends when the client hung up or calltap's shutdown cut it before its
terminal marker (a hang-up after it is judged `complete` from what was relayed): the shorter
stream is nobody's defect, so its findings stay in pair.json (and `pair.compared` says how it
ended) but raise no `divergence` or `leg.defect` line."""


class Outcomes:
    """Logs and counts the outcome of each finalized recording."""

    def __init__(self, logger: Any, metrics: Metrics, *, single_leg: bool) -> None:
        self.log = logger
        self.metrics = metrics
        self.single_leg = single_leg


    def outcome(self, recording: Recording, chosen: Leg | None, mode: str,
                report: dict[str, Any] | None, facts: dict[str, Any]) -> None:
        """The lines that close a recording: how it was compared (or checked, or orphaned),
        each leg that did not end complete, and each alarm."""
        capture = str(recording.directory)
        findings = report["findings"] if report is not None else []
        verdict = report["verdict"] if report is not None else None
        codes = list(dict.fromkeys(finding["code"] for finding in findings))
        if verdict is not None:
            self.metrics.pairs.labels(verdict).inc()
        self.aborted(recording)
        leg = recording.downstream or chosen
        if recording.orphan:
            side = "downstream" if recording.downstream is not None else "upstream"
            self.metrics.orphans.labels(side).inc()
            self.log.warning("pair.orphaned", request_id=recording.key, side=side,
                             verdict=verdict, codes=codes, capture=capture)
        elif mode == "compare":
            assert leg is not None
            self.log.info(
                "pair.compared", request_id=recording.key, verdict=verdict, codes=codes,
                pairing=recording.pairing, attempts=len(recording.attempts),
                bytes_upstream=_size(chosen, facts),
                bytes_downstream=_size(recording.downstream, facts),
                downstream_ended=leg.ended, capture=capture)
        elif mode == "check":
            assert leg is not None
            self.log.info("leg.checked", request_id=recording.key, side=leg.side,
                          verdict=verdict, codes=codes, bytes=_size(leg, facts),
                          ended=leg.ended, capture=capture)
        if report is None or leg is None or leg.ended in CUT:
            return
        if mode == "compare":
            self._comparison(recording.key, report, capture)
        elif mode == "check" and (self.single_leg or recording.downstream is not None):
            self._defects(recording.key, report["findings"], leg.side, capture)

    def _comparison(self, key: str, report: dict[str, Any], capture: str) -> None:
        """A `divergence` line per breaking finding; when a side could not be read, nothing
        can be said across the sides, only each side's own defects."""
        sides = ("upstream", "downstream")
        if any(report[side]["dialect"] == UNKNOWN for side in sides):
            for side in sides:
                self._defects(key, report[side]["findings"], side, capture)
            return
        for finding in report["findings"]:
            if finding["severity"] in BREAKING:
                self.metrics.divergences.labels(finding["code"]).inc()
                self.log.warning(
                    "divergence", request_id=key, code=finding["code"],
                    severity=finding["severity"], side=finding.get("side"),
                    choice=finding.get("choice"), count=finding.get("count"), capture=capture)

    def _defects(self, key: str, findings: list[dict[str, Any]], side: str,
                     capture: str) -> None:
        """A `leg.defect` line per fatal finding of a leg with no partner to be compared with
        (an orphaned front leg, single-leg mode, a partner that could not be read)."""
        for finding in findings:
            if finding["severity"] == "fatal":
                self.metrics.leg_defects.labels(finding["code"]).inc()
                self.log.warning(
                    "leg.defect", request_id=key, code=finding["code"],
                    severity=finding["severity"], side=side, choice=finding.get("choice"),
                    count=finding.get("count"), capture=capture)

    def aborted(self, recording: Recording) -> None:
        """`leg.aborted` for each leg of the recording that did not end complete, as judged
        from what it relayed (so only once the capture was read)."""
        for leg in (recording.downstream, *recording.attempts):
            if leg is not None and leg.ended != COMPLETE:
                self.log.warning("leg.aborted", request_id=recording.key, side=leg.side,
                                 ended=leg.ended, status=leg.status, bytes=leg.bytes,
                                 error=leg.error)



def _size(leg: Leg | None, facts: dict[str, Any]) -> int | None:
    if leg is None or leg.file is None or leg.file not in facts:
        return None
    return facts[leg.file]["bytes"]
