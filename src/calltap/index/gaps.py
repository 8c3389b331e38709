"""A local tree's pairs that have no index row: rows made for them from their pair.json.

A tree written before the index, or by a writer that died before its rows were spooled, has
pairs no segment names. Looking costs what changed: a day directory is listed again only when
its modification time moved (a pair directory created or removed changes it), or within
`SETTLE_NS` of the last look (a change in the same clock tick), and a capture seen before its
pair.json was written is looked at again until it has one. `calltap index rebuild` writes these
rows as segments; the readers of a local tree add them in memory meanwhile.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from calltap import recordings
from calltap.index.rows import row_of

SETTLE_NS = 2_000_000_000
UNKNOWN_REPLICA = ""
"""The `replica` of a row made by a reader: nobody wrote it."""


class Gaps:
    """The pairs of the tree at `root` that no row names yet."""

    def __init__(self, root: Path, *, legs_only: bool = False,
                 first_day: str | None = None) -> None:
        self.root = root
        self.legs_only = legs_only
        """Also a row (`recorded`) for a capture with leg bodies and no pair.json: one that
        calltap did not write (`scan` compares it)."""
        self.first_day = first_day
        self._seen: dict[str, tuple[int, int]] = {}
        """Day -> (its mtime, when it was listed), both in ns."""
        self._waiting: set[tuple[str, str]] = set()
        """Captures listed without a pair.json yet."""

    def rows(self, stored: Callable[[str], set[str]]) -> list[dict[str, Any]]:
        """Rows for every pair with a pair.json that `stored(day)` does not name."""
        found: list[dict[str, Any]] = []
        for day, mtime in _days(self.root):
            if self.first_day is not None and day < self.first_day:
                continue
            last = self._seen.get(day)
            now = time.time_ns()
            if last is not None and last[0] == mtime and now - last[1] > SETTLE_NS:
                continue
            self._seen[day] = (mtime, now)
            known = stored(day)
            for key in _keys(self.root / day):
                if key not in known:
                    self._waiting.add((day, key))
        for day, key in sorted(self._waiting):
            row = row_for(self.root, day, key, legs_only=self.legs_only)
            if row is not None or not (self.root / day / key).is_dir():
                self._waiting.discard((day, key))
            if row is not None:
                found.append(row)
        return found


def row_for(root: Path, day: str, key: str, replica: str = UNKNOWN_REPLICA, *,
            legs_only: bool = False) -> dict[str, Any] | None:
    """The row of the pair at `root/day/key`, or None while it has no readable pair.json (with
    `legs_only`, a capture with leg bodies and no pair.json has a `recorded` row)."""
    directory = root / day / key
    try:
        document = recordings.read_pair(directory)
    except recordings.PairUnreadable:
        if legs_only and not (directory / recordings.PAIR_JSON).exists() and any(
                recordings.leg_body(directory, side) for side in recordings.SIDES):
            return row_of({}, None, day=day, stored_as=key, replica=replica)
        return None
    legs = document.get("legs") if isinstance(document.get("legs"), dict) else {}
    try:
        request = recordings.request_body(directory, legs.get("downstream"))
    except OSError:
        request = None
    return row_of(document, request, day=day, stored_as=str(document.get("stored_as") or key),
                  replica=replica)


def _days(root: Path) -> list[tuple[str, int]]:
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    days = []
    for entry in entries:
        if recordings.is_day(entry.name) and entry.is_dir():
            try:
                days.append((entry.name, entry.stat().st_mtime_ns))
            except OSError:
                continue
    return sorted(days)


def _keys(day: Path) -> list[str]:
    try:
        return [entry.name for entry in os.scandir(day)
                if recordings.is_key(entry.name) and entry.is_dir()]
    except OSError:
        return []
