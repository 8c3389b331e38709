"""The writer's merge policy, on names alone: a replica sealing once a minute leaves at most
FAN_IN - 1 segments a level of a day, each merge sealed at its newest input's time and named by
its inputs alone, every seal in exactly one segment, and no merge across days."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calltap.index import layout, tiers
from calltap.index.layout import Segment

MINUTE_MS = 60_000
START = int(datetime(2026, 11, 28, tzinfo=UTC).timestamp() * 1000)


def seal(sealed_ms: int, n: int, replica: str = "r1") -> Segment:
    """The segment a sealed file makes: its tag is the file's 8 characters."""
    day = datetime.fromtimestamp(sealed_ms / 1000, UTC).date().isoformat()
    return layout.segment(day, replica, sealed_ms, f"{n:08x}")


def seals(count: int, offset_minutes: int) -> list[Segment]:
    first = START + offset_minutes * MINUTE_MS
    return [seal(first + n * MINUTE_MS, n) for n in range(count)]


def base4_digits(number: int) -> int:
    total = 0
    while number:
        number, digit = divmod(number, tiers.FAN_IN)
        total += digit
    return total


def replay(sealed: list[Segment]) -> tuple[list[Segment], dict[Segment, list[Segment]]]:
    """What `simulate` does, keeping each merge's inputs."""
    own: list[Segment] = []
    inputs: dict[Segment, list[Segment]] = {}
    for segment in sealed:
        own.append(segment)
        while groups := tiers.due(own):
            for group in groups:
                target = tiers.merged(group)
                inputs[target] = group
                own = [s for s in own if s not in group] + [target]
    return own, inputs


def leaves(segment: Segment, inputs: dict[Segment, list[Segment]]) -> list[Segment]:
    """The sealed files' segments whose rows `segment` holds."""
    if segment not in inputs:
        return [segment]
    return [leaf for part in inputs[segment] for leaf in leaves(part, inputs)]


@settings(max_examples=40, deadline=None)
@given(count=st.integers(1, 3000), offset=st.integers(0, 1439))
def test_a_replica_leaves_few_segments_a_day_each_seal_in_one(count: int, offset: int) -> None:
    sealed = seals(count, offset)
    own, inputs = replay(sealed)
    assert sorted(own) == tiers.simulate(sealed)
    per_day: dict[str, int] = {}
    for segment in sealed:
        per_day[segment.day] = per_day.get(segment.day, 0) + 1
    for day, day_seals in per_day.items():
        kept = [s for s in own if s.day == day]
        levels = [tiers.level_of(s) for s in kept]
        assert all(levels.count(level) <= tiers.FAN_IN - 1 for level in set(levels))
        used = (len(f"{day_seals:b}") + 1) // 2  # the digits of day_seals in base 4
        assert len(kept) <= (tiers.FAN_IN - 1) * used
        assert len(kept) == base4_digits(day_seals)
    assert sorted(leaf for s in own for leaf in leaves(s, inputs)) == sorted(sealed)
    for target, group in inputs.items():
        assert target.sealed_ms == max(s.sealed_ms for s in group)
        assert {s.day for s in group} == {target.day}
        assert {tiers.level_of(s) for s in group} == {tiers.level_of(target) - 1}
        assert all(s.sealed_ms <= target.sealed_ms for s in leaves(target, inputs))


@settings(max_examples=40, deadline=None)
@given(count=st.integers(tiers.FAN_IN, 300), seed=st.integers(0, 2**32))
def test_names_depend_on_the_inputs_alone(count: int, seed: int) -> None:
    """The same seals give the same names (a retry finds its own merge), in whatever order a
    group is given; other inputs give another name."""
    sealed = seals(count, 0)
    assert tiers.simulate(sealed) == tiers.simulate(list(sealed))
    group = tiers.due(sealed[:tiers.FAN_IN])[0]
    shuffled = list(group)
    random.Random(seed).shuffle(shuffled)
    assert tiers.merged(shuffled) == tiers.merged(group)
    other = [*group[:-1], seal(group[-1].sealed_ms, 10**6)]
    assert tiers.merged(other).tag != tiers.merged(group).tag
    assert tiers.merged(other).countdown == tiers.merged(group).countdown


def test_levels_are_read_from_tags() -> None:
    base = seal(START, 0)
    assert tiers.level_of(base) == 0
    for tag, level in [("m1abcdef12", 1), ("m9zzzzzzzz", 9), ("m0abcdef12", 0),
                       ("m1abcdef1", 0), ("m1abcdef123", 0), ("0c1d2e3f4a5b6c7d", 0)]:
        assert tiers.level_of(layout.segment(base.day, "r1", START, tag)) == level
    merged = base
    for level in range(1, tiers.TOP_LEVEL + 1):
        merged = tiers.merged([merged, *(seal(START + n, n) for n in range(1, tiers.FAN_IN))]
                              if level == 1 else [merged] * tiers.FAN_IN)
        assert tiers.level_of(merged) == level
        assert layout.parse(merged.key) == merged
    assert tiers.due([merged] * tiers.FAN_IN) == []
    with pytest.raises(ValueError):
        tiers.merged([merged] * tiers.FAN_IN)


def test_groups_never_mix_days_replicas_or_levels() -> None:
    evening = seals(tiers.FAN_IN - 1, 1440 - tiers.FAN_IN + 1)
    morning = seals(tiers.FAN_IN - 1, 1440)
    other = [seal(START + n * MINUTE_MS, n, "r2") for n in range(tiers.FAN_IN - 1)]
    assert {s.day for s in evening} != {s.day for s in morning}
    assert tiers.due(evening + morning + other) == []
    upper = tiers.merged(seals(tiers.FAN_IN, 0))
    assert tiers.due([upper, *seals(tiers.FAN_IN - 1, 10)]) == []
    with pytest.raises(ValueError):
        tiers.merged([*evening, *morning])
    with pytest.raises(ValueError):
        tiers.merged([upper, *seals(tiers.FAN_IN - 1, 10)])
    with pytest.raises(ValueError):
        tiers.merged([*seals(2, 0), *other[:2]])


def test_the_oldest_of_a_level_are_merged_first() -> None:
    sealed = seals(tiers.FAN_IN + 2, 0)
    (group,) = tiers.due(sealed)
    assert sorted(group) == sorted(sealed[:tiers.FAN_IN])
