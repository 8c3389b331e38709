"""Where the index lives in a recordings location, and how its segments are named.

`_index/day=YYYY-MM-DD/<segment>.parquet`: Hive-style partitions, so that Athena, Trino,
ClickHouse and DuckDB prune by day. A segment's name starts with the time it was sealed counted
down from a far date, so that a plain key listing (which is ascending) gives the newest first;
then the replica that wrote it (two writers never collide) and a name of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from calltap import recordings

INDEX = "_index"
SUFFIX = ".parquet"
HORIZON_MS = 10**13
"""Milliseconds since the epoch are counted down from here (the year 2286): 13 digits."""
REPLICA_NAME = re.compile(r"[A-Za-z0-9._-]{1,63}")
SEGMENT_NAME = re.compile(
    r"(?P<countdown>[0-9]{13})-(?P<replica>[A-Za-z0-9._-]{1,63})-(?P<tag>[a-z0-9]{1,32})"
    + re.escape(SUFFIX))
PARTITION = re.compile(r"day=(?P<day>[0-9]{4}-[0-9]{2}-[0-9]{2})")


@dataclass(frozen=True, slots=True, order=True)
class Segment:
    """One segment's key, parsed: ordered newest first within a day."""

    day: str
    countdown: str
    replica: str
    tag: str

    @property
    def key(self) -> str:
        return f"{INDEX}/day={self.day}/{self.countdown}-{self.replica}-{self.tag}{SUFFIX}"

    @property
    def sealed_ms(self) -> int:
        return HORIZON_MS - 1 - int(self.countdown)


def segment(day: str, replica: str, sealed_ms: int, tag: str) -> Segment:
    """The segment `replica` seals at `sealed_ms` for `day`; `tag` tells its segments apart."""
    if not recordings.is_day(day):
        raise ValueError(f"not a day: {day!r}")
    return Segment(day, f"{HORIZON_MS - 1 - sealed_ms:013d}", replica_name(replica), tag)


def parse(key: str) -> Segment | None:
    """The segment a key names (relative to the location), or None for anything else."""
    parts = key.split("/")
    if len(parts) != 3 or parts[0] != INDEX:
        return None
    partition, name = PARTITION.fullmatch(parts[1]), SEGMENT_NAME.fullmatch(parts[2])
    if partition is None or name is None or not recordings.is_day(partition["day"]):
        return None
    return Segment(partition["day"], name["countdown"], name["replica"], name["tag"])


def day_prefix(day: str) -> str:
    return f"{INDEX}/day={day}/"


def replica_name(name: str) -> str:
    """A writer's name as segment names can hold it: other characters become `_`, at most 63."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:63]
    return cleaned if REPLICA_NAME.fullmatch(cleaned) else "replica"
