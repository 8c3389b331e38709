"""Open captures and how they close: pairing state, the comparison off-loop, pair.json, the log.

A `Recording` is one capture directory. It is a `pair` (a compared front leg waiting for its
upstream attempts), a `single` leg checked on its own (single-leg mode, or an orphan), or an
`other` request that is recorded but never compared. When its legs have ended it is finalized:
the compared upstream attempt is renamed `upstream.<ext>` (the others are
`upstream.attempt-N.<ext>`), a worker measures, masks and compares the files and writes
pair.json atomically (the relay's process only drafts it), then the outcome is logged.
Every failure on the way is `capture.failed`: the relay never waits for or depends on any of
it. Finalizing first waits, if need be, for the disk thread to have closed the capture's
files: only then is it known which were recorded.

While they stream, the first upstream attempt is written as `upstream.<ext>.partial` and a
retry as `upstream.attempt-N.<ext>.partial`; those are the names a crash leaves behind.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from calltap import recordings
from calltap.proxy.analysis import BodySpec, Job, Result, Workers, complete
from calltap.proxy.capture import Claim, Recorder
from calltap.proxy.metrics import Metrics
from calltap.proxy.outcomes import Outcomes
from calltap.proxy.pairing import FrontLeg, Match, PairingBook
from calltap.proxy.relay import Leg
from calltap.recordings import CAPTURE_TRUNCATED, COMPLETE
from calltap.redact import redact_headers

Kind = Literal["pair", "single", "other"]
Mode = Literal["compare", "check", "record"]
RECENT_RESULTS = 4096
DRAIN_TIMEOUT = 30.0
"""Seconds shutdown waits for the comparisons of the captures it closed."""
EVICTED_LOGGED = 20
"""Request ids named in one `pairs.evicted` line (the count covers them all)."""


@dataclass(eq=False, slots=True)
class Recording:
    key: str
    claim: Claim
    kind: Kind
    downstream: Leg | None = None
    attempts: list[Leg] = field(default_factory=list)
    pairing: str | None = None
    in_flight: int = 0
    front_done: bool = False
    orphan: bool = False
    closing: bool = False

    @property
    def directory(self) -> Path:
        return self.claim.path


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


class Pairs:
    """Tracks every open recording and finalizes each once its legs have ended."""

    def __init__(self, *, recorder: Recorder, book: PairingBook | None, metrics: Metrics,
                 logger: Any, workers: Workers, mask_patterns: tuple[str, ...],
                 redact_extra: tuple[str, ...], single_leg: bool) -> None:
        self.recorder = recorder
        self.book = book
        self.metrics = metrics
        self.log = logger
        self.workers = workers
        self.mask_patterns = list(mask_patterns)
        self.redact_extra = redact_extra
        self.outcomes = Outcomes(logger, metrics, single_leg=single_leg)
        self.open: dict[str, Recording] = {}
        self._results: OrderedDict[str, Path | dict[str, Any]] = OrderedDict()
        """Recently finalized keys: their pair.json, or the document itself if it could not
        be written. Bounded, so memory does not grow with traffic."""
        self._waiters: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._abandoning = False

    # -- legs starting and ending ------------------------------------------------------------

    def open_recording(self, key: str, claim: Claim, kind: Kind) -> Recording:
        recording = Recording(key, claim, kind)
        self.open[key] = recording
        return recording

    def add_front(self, recording: Recording, trace_id: str | None, fingerprint: str | None,
                  started: float) -> None:
        assert self.book is not None
        self.book.add_front(FrontLeg(recording.key, trace_id, fingerprint, started))

    def match_back(self, request_id: str | None, trace_id: str | None,
                   fingerprint: str | None, now: float) -> tuple[Recording, Match] | None:
        """The open pair this upstream attempt belongs to (counted in flight), or None."""
        if self.book is None:
            return None
        match = self.book.match_back(request_id, trace_id, fingerprint, now)
        if match is None:
            return None
        recording = self.open.get(match.key)
        if recording is None or recording.closing or recording.kind != "pair":
            return None
        recording.in_flight += 1
        if recording.pairing is None or match.attempt == 1:
            recording.pairing = match.method
        return recording, match

    def front_ended(self, recording: Recording, leg: Leg, now: float) -> None:
        recording.downstream = leg
        recording.front_done = True
        if recording.kind == "pair" and self.book is not None:
            self.book.front_finished(recording.key, now)
        self._maybe_close(recording)

    def attempt_ended(self, recording: Recording, leg: Leg) -> None:
        recording.attempts.append(leg)
        recording.in_flight -= 1
        self._maybe_close(recording)

    def single_ended(self, recording: Recording, leg: Leg) -> None:
        if leg.side == "downstream":
            recording.downstream = leg
        else:
            recording.attempts.append(leg)
        self._close(recording)

    def expire(self, now: float) -> None:
        """Close the fronts the pairing book gave up on, as orphans; say which it evicted to
        stay within its size."""
        if self.book is None:
            return
        evicted = self.book.evicted()
        if evicted:
            self.metrics.evicted.inc(len(evicted))
            self.log.warning("pairs.evicted", count=len(evicted),
                             max_pending=self.book.max_pending,
                             request_ids=evicted[:EVICTED_LOGGED])
        for key in self.book.expire(now):
            recording = self.open.get(key)
            if recording is None or recording.closing or recording.attempts or recording.in_flight:
                continue
            recording.orphan = True
            if recording.front_done:
                self._close(recording)

    def close_all(self) -> None:
        """On shutdown, once no leg is in flight: close every recording as it stands."""
        for recording in list(self.open.values()):
            if recording.closing:
                continue
            if recording.kind == "pair" and not recording.attempts:
                recording.orphan = True
            if recording.downstream is not None or recording.attempts:
                self._close(recording)
            else:
                self.open.pop(recording.key, None)

    async def drain(self, timeout: float = DRAIN_TIMEOUT) -> None:
        """Wait for every finalization under way. Comparisons still running after `timeout`
        seconds (a worker hung on a pathological pair, or stopped) are abandoned: their
        pair.json is written without the comparison and `capture.failed` says so, so that a
        hung worker can never keep the process from exiting."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._tasks:
            remaining = deadline - loop.time()
            if remaining <= 0:
                self._abandoning = True
                for task in self._tasks:
                    task.cancel()
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
                return
            await asyncio.wait(list(self._tasks), timeout=remaining)

    def _maybe_close(self, recording: Recording) -> None:
        if recording.closing or not recording.front_done or recording.in_flight:
            return
        if recording.kind != "pair" or recording.attempts or recording.orphan:
            self._close(recording)

    def _close(self, recording: Recording) -> None:
        recording.closing = True
        task = asyncio.get_running_loop().create_task(self._finalize(recording))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- finalization ----------------------------------------------------------------------

    async def _finalize(self, recording: Recording) -> None:
        try:
            await self._finalize_unguarded(recording)
        except Exception as exc:
            self.capture_failed("finalize", exc, recording.directory)
            self.outcomes.aborted(recording)
            self._publish(recording.key, {"request_id": recording.key, "error": type(exc).__name__})
        finally:
            self.open.pop(recording.key, None)

    async def _finalize_unguarded(self, recording: Recording) -> None:
        legs = [leg for leg in (recording.downstream, *recording.attempts) if leg is not None]
        sinks = [sink for leg in legs for sink in (leg.sink, leg.request_sink) if sink is not None]
        if not all(sink.settled for sink in sinks):
            await self.recorder.disk.settle()
        for leg in legs:
            _forget_failed(leg)
        chosen = self._name_attempts(recording)
        down = recording.downstream
        files = [name for leg in (down, *recording.attempts) if leg is not None
                 for name in (leg.file, leg.request_file) if name is not None]
        mode = self._mode(recording, chosen)
        document = self._document(recording, chosen, {}, mode, None)
        result: Result | None = None
        if files:
            job: Job = {
                "directory": str(recording.directory),
                "files": files,
                "mask_patterns": self.mask_patterns,
                "upstream": _spec(chosen),
                "downstream": _spec(down),
                "mode": mode,
                "document": document,
            }
            try:
                result = await self.workers.analyze(job)
            except asyncio.CancelledError:
                if not self._abandoning:
                    raise
                self.capture_failed("compare", TimeoutError("comparison abandoned on shutdown"),
                                    recording.directory)
            except Exception as exc:
                self.capture_failed("compare", exc, recording.directory)
        pair_json = recording.directory / recordings.PAIR_JSON
        facts = result["files"] if result is not None else {}
        report = result["report"] if result is not None else None
        endings = result["endings"] if result is not None else {}
        for leg in legs:
            if leg.file in endings:
                leg.ended = endings[leg.file]
        complete(document, facts, mode, report, endings)
        if result is None:
            written = await self.recorder.write_pair(recording.directory, document)
        else:
            written = self._written_by_worker(result, pair_json)
        self.outcomes.outcome(recording, chosen, mode, report, facts)
        self._publish(recording.key, document, pair_json if written else None)

    def _written_by_worker(self, result: Result, pair_json: Path) -> bool:
        """Account for the pair.json the worker wrote, or report why it could not."""
        failure = result["pair_json_error"]
        if failure is not None:
            self.capture_failed("pair_json", OSError(failure["errno"], failure["strerror"]),
                                pair_json)
            return False
        self.recorder.used_bytes += result["pair_json_bytes"]
        return True

    def _mode(self, recording: Recording, chosen: Leg | None) -> Mode:
        if recording.kind == "other":
            return "record"
        if recording.kind == "pair" and chosen is not None and recording.downstream is not None:
            if chosen.file is not None and recording.downstream.file is not None:
                return "compare"
            return "record"
        return "check"

    def _name_attempts(self, recording: Recording) -> Leg | None:
        """The compared attempt (the last complete one, else the last). Attempt 1 streams to
        `upstream.*` and later ones to `upstream.attempt-N.*`; when a later attempt is the
        compared one, attempt 1 moves to `upstream.attempt-1.*` and it takes `upstream.*`."""
        if not recording.attempts:
            return None
        recording.attempts.sort(key=lambda leg: leg.attempt or 0)
        complete = [leg for leg in recording.attempts if leg.ended == COMPLETE]
        chosen = (complete or recording.attempts)[-1]
        if recording.kind != "pair" or chosen.attempt == 1:
            return chosen
        first = recording.attempts[0]
        if first.attempt == 1:
            self._rename_leg(recording.directory, first, "upstream", recordings.attempt_stem(1))
        self._rename_leg(recording.directory, chosen, recordings.attempt_stem(chosen.attempt),
                         "upstream")
        return chosen

    def _rename_leg(self, directory: Path, leg: Leg, old: str, new: str) -> None:
        """Move a leg's files from stem `old` to stem `new`."""
        for attribute in ("file", "request_file"):
            name = getattr(leg, attribute)
            target = recordings.restemmed(name, old, new) if name is not None else None
            if target is not None and self.recorder.rename(directory, name, target):
                setattr(leg, attribute, target)

    def _document(self, recording: Recording, chosen: Leg | None, facts: dict[str, Any],
                  mode: str, report: dict[str, Any] | None) -> dict[str, Any]:
        legs: dict[str, Any] = {}
        if recording.downstream is not None:
            legs["downstream"] = self._leg_json(recording.downstream, facts)
        if chosen is not None:
            legs["upstream"] = self._leg_json(chosen, facts)
        if len(recording.attempts) > 1:
            legs["upstream_attempts"] = [self._leg_json(leg, facts) for leg in recording.attempts]
        document: dict[str, Any] = {
            "request_id": recording.key,
            "pairing": recording.pairing,
            "attempts": len(recording.attempts),
            "orphaned": recording.orphan,
            "legs": legs,
        }
        if mode == "compare":
            document["comparison"] = report
        elif mode == "check":
            document["check"] = report
        return document

    def _leg_json(self, leg: Leg, facts: dict[str, Any]) -> dict[str, Any]:
        file_facts = facts.get(leg.file) if leg.file is not None else None
        truncated = leg.sink is not None and leg.sink.truncated
        out: dict[str, Any] = {
            "method": leg.method,
            "path": leg.path,
            "status": leg.status,
            "request_headers": redact_headers(leg.request_headers, self.redact_extra),
            "response_headers": redact_headers(leg.response_headers, self.redact_extra),
            "started_at": iso(leg.started),
            "first_byte_at": iso(leg.first_byte_at),
            "finished_at": iso(leg.finished),
            "bytes": file_facts["bytes"] if file_facts else None,
            "sha256": file_facts["sha256"] if file_facts else None,
            "ended": CAPTURE_TRUNCATED if truncated else leg.ended,
            "file": leg.file,
            "content_encoding": leg.content_encoding,
            "bytes_relayed": leg.bytes,
            "request_file": leg.request_file,
        }
        if truncated:
            out["relay_ended"] = leg.ended
        if leg.attempt is not None:
            out["attempt"] = leg.attempt
        if leg.error is not None:
            out["error"] = leg.error
        return out

    def capture_failed(self, stage: str, exc: BaseException, path: Path) -> None:
        self.metrics.capture_failures.inc()
        self.log.error("capture.failed", stage=stage, error=type(exc).__name__,
                       errno=getattr(exc, "errno", None), path=str(path))

    def _publish(self, key: str, document: dict[str, Any], path: Path | None = None) -> None:
        self._results[key] = path if path is not None else document
        while len(self._results) > RECENT_RESULTS:
            self._results.popitem(last=False)
        for waiter in self._waiters.pop(key, []):
            if not waiter.done():
                waiter.set_result(document)

    async def wait(self, key: str, timeout: float) -> dict[str, Any]:
        known = self._results.get(key)
        if isinstance(known, Path):
            return orjson.loads(known.read_bytes())
        if known is not None:
            return known
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout)
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[key]


def _forget_failed(leg: Leg) -> None:
    """Drop the file names of the leg's bodies the disk thread could not record."""
    if leg.sink is not None and leg.sink.failed:
        leg.file = None
    if leg.request_sink is not None and leg.request_sink.failed:
        leg.request_file = None


def _spec(leg: Leg | None) -> BodySpec | None:
    if leg is None or leg.file is None:
        return None
    return {"file": leg.file, "request_file": leg.request_file, "path": leg.path,
            "content_encoding": leg.content_encoding, "content_type": leg.content_type or None,
            "status": leg.status, "truncated": leg.sink is not None and leg.sink.truncated,
            "ended": leg.ended, "bytes_relayed": leg.bytes}
