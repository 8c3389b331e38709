"""Which recorded pairs a replay (or an export) works through: one pair directory, or every pair
of a recordings tree that was compared (only those with one of the asked codes, if any).

A tree is read lazily, one pair at a time, so replaying everything staging ever saw holds one
pair's bodies in memory, not the tree's. A pair in a tree that cannot be replayed (an orphaned
leg, a missing body) is skipped and said so; a single pair that cannot be is an error.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from calltap import recordings
from calltap.replay.cassette import (
    CassetteError,
    Recorded,
    finding_codes,
    load,
    with_recorded_requests,
)


@dataclass
class Selection:
    directories: list[Path]
    single: Recorded | None = None
    """The pair, already read, when the selection is one pair directory."""
    skipped: list[str] = field(default_factory=list)
    """Why each skipped pair of a tree could not be replayed."""

    def pairs(self) -> Iterator[Recorded]:
        if self.single is not None:
            yield self.single
            return
        for directory in self.directories:
            try:
                yield load(directory)
            except CassetteError as error:
                self.skipped.append(str(error))


def select(root: Path, codes: Collection[str] = ()) -> Selection:
    """The pair directory `root`, or the compared pairs of the tree under it with any of
    `codes`; CassetteError when `root` is a pair that cannot be replayed or holds no such pair."""
    if not root.is_dir():
        raise CassetteError(f"{root}: no such directory")
    if (root / recordings.PAIR_JSON).is_file():
        return Selection([root], load(root))
    wanted = set(codes)
    chosen = [directory for directory in recordings.capture_directories(root)
              if _compared_with(directory, wanted)]
    if not chosen:
        with_codes = f" with {', '.join(sorted(wanted))}" if wanted else ""
        raise CassetteError(f"{root}: no compared pair{with_codes} to replay")
    return Selection(chosen)


def _compared_with(directory: Path, wanted: set[str]) -> bool:
    try:
        comparison = recordings.read_pair(directory).get("comparison")
    except recordings.PairUnreadable:
        return False
    if not isinstance(comparison, dict):
        return False
    if not wanted or wanted.intersection(finding_codes(comparison)):
        return True
    return bool(wanted.intersection(finding_codes(with_recorded_requests(directory,
                                                                         comparison))))
