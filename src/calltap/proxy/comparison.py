"""The comparison addon: each closed capture finalized, off the relay's path.

At `CaptureClosed` a task waits, if need be, for the disk thread to have written the capture's
files (only then is it known which were recorded), names the upstream attempts (the compared one
is `upstream.<ext>`, the others `upstream.attempt-N.<ext>`), drafts pair.json and hands the job
to a worker process (`analysis.py`), which measures, masks, compares and writes pair.json
atomically. Then `PairCompared` carries the verdict and the alarms to the log and the metrics.
Every failure on the way is `capture.failed`: the relay never waits for or depends on any of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from calltap import recordings
from calltap.config import Config
from calltap.proxy.analysis import Job, Result, Workers, complete
from calltap.proxy.backlog import Backlog, Shed, Skip, mask_files, skipped_document
from calltap.proxy.capture import Recorder
from calltap.proxy.hooks import (
    Addon,
    CaptureClosed,
    CaptureFailed,
    Hooks,
    Mode,
    PairCompared,
    Recording,
)
from calltap.proxy.outcomes import alarms
from calltap.proxy.pair_document import (
    body_spec,
    draft,
    earlier_requests,
    forget_failed,
    mode_of,
)
from calltap.proxy.relay import Leg
from calltap.recordings import COMPLETE

RECENT_RESULTS = 4096
DRAIN_TIMEOUT = 30.0
"""Seconds shutdown waits for the comparisons of the captures it closed."""


class Comparisons(Addon):
    """Owns the worker processes and the finalizations under way."""

    def __init__(self, config: Config, hooks: Hooks, recorder: Recorder) -> None:
        self.hooks = hooks
        self.recorder = recorder
        self.workers = Workers(config.compare_workers, config.compare_niceness,
                               idle=config.compare_when_idle)
        self.backlog = Backlog(config.compare_workers, config.max_compare_backlog,
                               config.compare_deadline)
        self.mask_patterns = list(config.mask_body_patterns)
        self.redact_extra = config.redact_headers
        self.single_leg = config.front is None or config.back is None
        self._results: OrderedDict[str, Path | dict[str, Any]] = OrderedDict()
        """Recently finalized keys: their pair.json, or the document itself if it could not
        be written. Bounded, so memory does not grow with traffic."""
        self._waiters: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._abandoning = False

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await asyncio.to_thread(self.workers.warm)
        try:
            yield
        finally:
            await self.drain()
            await self.workers.stop()

    def health(self) -> dict[str, Any]:
        return {"compare_backlog": len(self.backlog)}

    def capture_closed(self, event: CaptureClosed) -> None:
        recording = event.recording
        sinks = [sink for leg in recording.legs for sink in (leg.sink, leg.request_sink)
                 if sink is not None]
        # Marked now, the wait joins the hand-over that carries the legs' last files.
        written = None if all(sink.settled for sink in sinks) else self.recorder.disk.mark()
        task = asyncio.get_running_loop().create_task(
            self._finalize(recording, written, time.time()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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

    async def wait(self, key: str, timeout: float) -> dict[str, Any]:
        """The pair.json of `key` once it has been finalized."""
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

    # -- finalization ----------------------------------------------------------------------

    async def _finalize(self, recording: Recording, written: asyncio.Future[Any] | None,
                        closed_at: float) -> None:
        try:
            if written is not None:
                await written
            event = await self._finalize_unguarded(recording, closed_at)
        except Exception as exc:
            self._failed("finalize", exc, recording.directory)
            document = {"request_id": recording.key, "error": type(exc).__name__}
            event = PairCompared(recording, document, "record", None)
        self._publish(recording.key, event.document, event.path)
        self.hooks.emit(event)

    async def _finalize_unguarded(self, recording: Recording, closed_at: float) -> PairCompared:
        legs = recording.legs
        for leg in legs:
            forget_failed(leg)
        chosen = self._name_attempts(recording)
        mode = mode_of(recording, chosen)
        document = draft(recording, chosen, mode, self.redact_extra)
        files = [name for leg in recording.legs for name in (leg.file, leg.request_file)
                 if name is not None]
        result = await self._analyze(recording, {
            "directory": str(recording.directory), "files": files,
            "mask_patterns": self.mask_patterns, "upstream": body_spec(chosen),
            "downstream": body_spec(recording.downstream), "mode": mode,
            "earlier_requests": earlier_requests(recording, chosen),
            "document": document, "closed_at": closed_at}) if files else None
        if isinstance(result, Skip):
            return await self._skipped(recording, document, mode, chosen, result, files)
        endings = result["endings"] if result is not None else {}
        for leg in legs:
            if leg.file in endings:
                leg.ended = endings[leg.file]
        facts = result["files"] if result is not None else {}
        complete(document, facts, mode, result["report"] if result else None, endings)
        if result is not None:
            document["compared_after"] = result["compared_after"]
        pair_json = recording.directory / recordings.PAIR_JSON
        if result is None:
            written = await self.recorder.write_pair(recording.directory, document)
        else:
            written = self._written_by_worker(result, pair_json)
        judgement = result["judgement"] if result is not None else None
        unpartnered = self.single_leg or recording.downstream is not None
        return PairCompared(
            recording, document, mode, pair_json if written else None,
            verdict=judgement.verdict if judgement is not None else None,
            codes=list(dict.fromkeys(str(f.code) for f in judgement.findings))
            if judgement is not None else [],
            alarms=alarms(judgement, mode, recording.downstream or chosen,
                          unpartnered=unpartnered),
            sizes={name: fact["bytes"] for name, fact in facts.items()}, chosen=chosen)

    async def _analyze(self, recording: Recording, job: Job) -> Result | Skip | None:
        try:
            async with self.backlog.turn(job["closed_at"]):
                return await self.workers.analyze(job)
        except Shed as shed:
            return shed.skip
        except asyncio.CancelledError:
            if not self._abandoning:
                raise
            self._failed("compare", TimeoutError("comparison abandoned on shutdown"),
                         recording.directory)
        except Exception as exc:
            self._failed("compare", exc, recording.directory)
        return None

    async def _skipped(self, recording: Recording, document: dict[str, Any], mode: Mode,
                       chosen: Leg | None, skip: Skip, files: list[str]) -> PairCompared:
        """A capture the backlog shed: pair.json written here, with what was recorded."""
        sizes = {leg.file: leg.sink.recorded for leg in recording.legs
                 if leg.file is not None and leg.sink is not None}
        if self.mask_patterns:
            sizes = await self.recorder.disk.call(mask_files, recording.directory, files,
                                                  self.mask_patterns)
        skipped_document(document, sizes, skip)
        written = await self.recorder.write_pair(recording.directory, document)
        pair_json = recording.directory / recordings.PAIR_JSON
        return PairCompared(recording, document, mode, pair_json if written else None,
                            sizes=sizes, chosen=chosen, skipped=skip)

    def _written_by_worker(self, result: Result, pair_json: Path) -> bool:
        """Account for the pair.json the worker wrote, or report why it could not."""
        failure = result["pair_json_error"]
        if failure is not None:
            self._failed("pair_json", OSError(failure["errno"], failure["strerror"]), pair_json)
            return False
        self.recorder.used_bytes += result["pair_json_bytes"]
        return True

    def _name_attempts(self, recording: Recording) -> Leg | None:
        """The compared attempt (the last complete one, else the last). Attempt 1 streams to
        `upstream.*` and later ones to `upstream.attempt-N.*`; when a later attempt is the
        compared one, attempt 1 moves to `upstream.attempt-1.*` and it takes `upstream.*`."""
        if not recording.attempts:
            return None
        recording.attempts.sort(key=lambda leg: leg.attempt or 0)
        complete_legs = [leg for leg in recording.attempts if leg.ended == COMPLETE]
        chosen = (complete_legs or recording.attempts)[-1]
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

    def _failed(self, stage: str, exc: BaseException, path: Path) -> None:
        self.hooks.emit(CaptureFailed(stage, exc, path))

    def _publish(self, key: str, document: dict[str, Any], path: Path | None) -> None:
        self._results[key] = path if path is not None else document
        while len(self._results) > RECENT_RESULTS:
            self._results.popitem(last=False)
        for waiter in self._waiters.pop(key, []):
            if not waiter.done():
                waiter.set_result(document)
