"""The keep addon: with `keep = diverged`, what nobody will look at is not kept.

At staging volume nearly every pair is equal, and an equal pair is evidence nobody reads. So a
finalized capture is kept when it is worth a look (a verdict other than equal or clean, an
orphaned leg, a fatal finding on any leg, or no verdict at all) and otherwise only at the
`keep_equal_sample` rate, chosen by a hash of the request id: every replica and every rerun keeps
the same ones. The rest are deleted from the local tree (or the spool, before any upload) and
counted in `calltap_pairs_discarded_total`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter

from calltap.config import Config
from calltap.proxy.capture import Recorder
from calltap.proxy.hooks import Addon, PairCompared

UNREMARKABLE = frozenset({"equal", "clean"})
"""Verdicts that alone make a capture not worth keeping."""
SAMPLE_SCALE = float(1 << 64)


def sampled(request_id: str, rate: float) -> bool:
    """Whether `request_id` falls in the kept share `rate` (0 to 1), the same answer everywhere."""
    digest = hashlib.sha256(request_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / SAMPLE_SCALE < rate


def worth_keeping(event: PairCompared) -> bool:
    """A capture somebody may need: anything but an equal pair or a clean leg without alarms."""
    return (event.verdict not in UNREMARKABLE or event.recording.orphan
            or bool(event.alarms))


class Keeping(Addon):
    """Decides each finalized capture's fate; `kept(event)` is what the uploader asks too."""

    def __init__(self, config: Config, recorder: Recorder, registry: CollectorRegistry) -> None:
        self.only_diverged = config.keep == "diverged"
        self.sample = config.keep_equal_sample
        self.recorder = recorder
        self.discarded = Counter("calltap_pairs_discarded",
                                 "Finalized captures deleted by keep = diverged",
                                 registry=registry)
        self._deleting: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """On the way out, finish the deletions under way: a discarded pair left in a spool
        would be uploaded at the next start."""
        try:
            yield
        finally:
            if self._deleting:
                await asyncio.gather(*self._deleting, return_exceptions=True)

    def kept(self, event: PairCompared) -> bool:
        if not self.only_diverged or worth_keeping(event):
            return True
        return sampled(event.recording.key, self.sample)

    def pair_compared(self, event: PairCompared) -> None:
        if event.path is None or self.kept(event):
            return
        self.discarded.inc()
        task = asyncio.get_running_loop().create_task(self._delete(event.recording.directory))
        self._deleting.add(task)
        task.add_done_callback(self._deleting.discard)

    async def _delete(self, directory: Path) -> None:
        freed = await asyncio.to_thread(_remove_tree, directory)
        self.recorder.account(-freed)


def _remove_tree(directory: Path) -> int:
    """Delete a capture directory; the bytes it held."""
    try:
        size = sum(path.stat().st_size for path in directory.iterdir() if path.is_file())
    except OSError:
        size = 0
    shutil.rmtree(directory, ignore_errors=True)
    return size
