"""Which of a writer's own segments to merge, and what a merge is named: tiers, as in an LSM tree.

A replica seals a segment about once a minute, and every reader pays per object. So a writer
merges its own segments of a day as it goes: a sealed file makes a segment of level 0, and FAN_IN
segments of one level become one of the next. A replica then holds at most FAN_IN - 1 segments a
level, a dozen or so a day instead of 1,440. A merge is named after its inputs (the same inputs,
the same name: a retry finds its own earlier attempt) and sealed at the newest input's time, so
every row of a segment still started before its seal time, which newest-first readers rely on.

Pure: no store, no DuckDB; the writer does the merges this names.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict

from calltap.index import layout

FAN_IN = 4
TOP_LEVEL = 9
"""Segments of this level are not merged further: 4^9 seals are half a year of minutes, so a
day never gets there; it bounds the level to one digit of the tag."""
MERGED = re.compile(r"m(?P<level>[1-9])[a-z0-9]{8}")
"""The tag of a merge: `m`, its level, and 8 characters derived from its inputs."""


def level_of(segment: layout.Segment) -> int:
    """0 for a sealed file's segment (or any name that is not a merge's), else the merge's."""
    match = MERGED.fullmatch(segment.tag)
    return int(match["level"]) if match else 0


def merged(inputs: list[layout.Segment]) -> layout.Segment:
    """The segment a merge of `inputs` (one day, one replica, one level below TOP_LEVEL) is
    stored as: sealed at the newest input's time, tagged with the next level and a digest of
    the inputs' keys (so that its name depends on them alone)."""
    if not inputs:
        raise ValueError("a merge needs inputs")
    first = inputs[0]
    level = level_of(first)
    if level >= TOP_LEVEL:
        raise ValueError(f"segments of level {level} are not merged")
    for segment in inputs:
        if (segment.day, segment.replica, level_of(segment)) != (first.day, first.replica, level):
            raise ValueError("a merge's inputs share a day, a replica and a level")
    keys = "\n".join(sorted(segment.key for segment in inputs))
    digest = hashlib.sha256(keys.encode()).hexdigest()[:8]
    newest = min(inputs, key=lambda segment: segment.countdown)
    return layout.segment(first.day, first.replica, newest.sealed_ms, f"m{level + 1}{digest}")


def due(own: list[layout.Segment]) -> list[list[layout.Segment]]:
    """The merges to do now: for each day (and replica) and level below TOP_LEVEL holding at
    least FAN_IN of `own`, its FAN_IN oldest. Merging them and asking again cascades up."""
    tiers: dict[tuple[str, str, int], list[layout.Segment]] = defaultdict(list)
    for segment in own:
        level = level_of(segment)
        if level < TOP_LEVEL:
            tiers[(segment.day, segment.replica, level)].append(segment)
    return [sorted(tier, key=lambda s: (s.countdown, s.tag), reverse=True)[:FAN_IN]
            for _, tier in sorted(tiers.items()) if len(tier) >= FAN_IN]


def settle(own: list[layout.Segment]) -> list[layout.Segment]:
    """`own` once every merge due is done, each group replaced by its merge."""
    while groups := due(own):
        for group in groups:
            own = [segment for segment in own if segment not in group] + [merged(group)]
    return own


def simulate(seals: list[layout.Segment]) -> list[layout.Segment]:
    """What a writer leaves after storing `seals` in turn and merging what is due after each
    (no store failing, nothing deleted under it): the objects a replica leaves, newest first."""
    own: list[layout.Segment] = []
    for seal in seals:
        own = settle([*own, seal])
    return sorted(own)
