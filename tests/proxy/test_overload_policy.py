"""The overload policy (`Governor`), pure: recording is shed only once six of the loop's last eight
probes were late or the disk thread's backlog passes a quarter of its bound, and resumes only after
two calm seconds. Fed probes as the lag probe makes them, with made-up clocks."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calltap.proxy.overload import (
    CALM_SECONDS,
    LATE_NEEDED,
    LATE_WINDOW,
    PROBE_INTERVAL,
    Governor,
    Sample,
    lag_probe,
)

MAX_LAG = 0.1
BOUND = 64 * 1024 * 1024
LATE = Sample(0.3, 0)
CALM = Sample(0.0, 0)


def feed(governor: Governor, samples: list[Sample], start: float = 0.0) -> list[tuple[float, str]]:
    """Each sample at the time a probe taking it would fire (interval plus its lag); the
    changes with their times."""
    now, changes = start, []
    for sample in samples:
        now += PROBE_INTERVAL + sample.lag
        change = governor.observe(now, sample)
        if change is not None:
            changes.append((round(now, 6), change))
    return changes


def test_six_late_probes_of_eight_shed_and_two_calm_seconds_resume() -> None:
    governor = Governor(MAX_LAG, BOUND)
    assert feed(governor, [LATE, CALM, LATE, LATE, CALM, LATE, LATE]) == []
    assert feed(governor, [LATE], start=2.0) == [(2.35, "shed")]
    assert governor.shedding and governor.shed_at == 2.35
    calm = round(CALM_SECONDS / PROBE_INTERVAL)
    assert feed(governor, [CALM] * calm, start=2.35) == []
    (resumed, change), = feed(governor, [CALM] * 2, start=2.35 + calm * PROBE_INTERVAL)
    assert change == "resume" and 4.4 <= resumed <= 4.45
    assert not governor.shedding and governor.resumed_at == pytest.approx(resumed)


def test_one_long_stall_or_scattered_late_probes_never_shed() -> None:
    """A collection, a huge pair.json, a burst of connections: late once, then on time."""
    governor = Governor(MAX_LAG, BOUND)
    assert feed(governor, [Sample(5.0, 0), CALM, Sample(2.0, 0)]) == []
    assert feed(governor, [LATE, CALM] * 40) == []
    assert feed(Governor(MAX_LAG, BOUND), ([LATE] * 5 + [CALM] * 3) * 20) == []
    assert governor.lag == LATE.lag


def test_a_lag_at_the_limit_is_not_late_and_zero_leaves_the_lag_out() -> None:
    assert feed(Governor(MAX_LAG, BOUND), [Sample(MAX_LAG, 0)] * 100) == []
    assert feed(Governor(0.0, BOUND), [Sample(10.0, 0)] * 100) == []


def test_the_disk_backlog_past_a_quarter_of_its_bound_sheds_at_once() -> None:
    governor = Governor(0.0, BOUND)
    assert feed(governor, [Sample(0.0, BOUND // 4)]) == []
    assert feed(governor, [Sample(0.0, BOUND // 4 + 1)]) == [(0.05, "shed")]


def test_shedding_holds_until_the_backlog_falls_to_a_sixteenth_and_the_lag_to_half() -> None:
    governor = Governor(MAX_LAG, BOUND)
    feed(governor, [Sample(0.0, BOUND)])
    calm = round(CALM_SECONDS / PROBE_INTERVAL) + 1
    assert feed(governor, [Sample(0.0, BOUND // 16 + 1)] * calm) == []
    assert feed(governor, [Sample(MAX_LAG / 2 + 0.001, 0)] * calm) == []
    assert feed(governor, [Sample(MAX_LAG / 2, BOUND // 16)] * calm)[-1][1] == "resume"


def test_a_restless_probe_restarts_the_calm_seconds() -> None:
    governor = Governor(MAX_LAG, BOUND)
    feed(governor, [LATE] * LATE_NEEDED)
    assert governor.shedding
    half = round(CALM_SECONDS / PROBE_INTERVAL / 2)
    assert feed(governor, [CALM] * half + [LATE] + [CALM] * (half + 1)) == []
    assert governor.shedding


def test_recently_covers_the_shedding_and_a_window_after_it() -> None:
    governor = Governor(MAX_LAG, BOUND)
    assert not governor.recently(0.0, 30.0)
    feed(governor, [Sample(0.0, BOUND)])
    assert governor.recently(1000.0, 30.0)
    feed(governor, [CALM] * (round(CALM_SECONDS / PROBE_INTERVAL) + 1), start=0.05)
    resumed = governor.resumed_at
    assert resumed is not None and not governor.shedding
    assert governor.recently(resumed + 29.9, 30.0)
    assert not governor.recently(resumed + 30.0, 30.0)


probes = st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, BOUND)), max_size=200)


@given(probes)
def test_every_change_is_earned(raw: list[tuple[float, int]]) -> None:
    """For any probes: changes alternate, shed first; a shed comes on a probe whose backlog is
    past a quarter of the bound or that makes six late of the last eight; a resume after calm
    probes only, for at least the calm seconds."""
    governor = Governor(MAX_LAG, BOUND)
    now, history, last = 0.0, [], None
    for lag, backlog in raw:
        now += PROBE_INTERVAL + lag
        sample = Sample(lag, backlog)
        history.append((now, sample))
        change = governor.observe(now, sample)
        assert governor.shedding == (change == "shed" or (change is None and last == "shed"))
        if change is None:
            continue
        assert change != last
        last = change
        if change == "shed":
            window = [s for _, s in history[-LATE_WINDOW:]]
            assert backlog > BOUND // 4 or (
                sum(s.lag > MAX_LAG for s in window) >= LATE_NEEDED and lag > MAX_LAG)
        else:
            restless = max(i for i, (_, s) in enumerate(history)
                           if s.lag > MAX_LAG / 2 or s.disk_backlog > BOUND // 16)
            assert history[restless + 1][0] <= now - CALM_SECONDS


def test_each_shedding_counts_its_own_unrecorded_legs() -> None:
    governor = Governor(MAX_LAG, BOUND)
    feed(governor, [Sample(0.0, BOUND)])
    governor.unrecorded += 3
    feed(governor, [CALM] * (round(CALM_SECONDS / PROBE_INTERVAL) + 2), start=1.0)
    assert not governor.shedding and governor.unrecorded == 3
    feed(governor, [Sample(0.0, BOUND)], start=10.0)
    assert governor.shedding and governor.unrecorded == 0


def test_recording_resumes_at_the_calm_seconds_exactly() -> None:
    governor = Governor(MAX_LAG, BOUND)
    assert governor.observe(1.0, Sample(0.0, BOUND)) == "shed"
    assert governor.observe(2.0, CALM) is None
    assert governor.observe(2.0 + CALM_SECONDS - 0.25, CALM) is None
    assert governor.observe(2.0 + CALM_SECONDS, CALM) == "resume"
    assert governor.resumed_at == 2.0 + CALM_SECONDS


async def test_the_probe_says_how_late_its_timer_fired() -> None:
    seen: list[tuple[float, float]] = []
    probe = asyncio.create_task(lag_probe(lambda now, lag: seen.append((now, lag)), 0.02))
    await asyncio.sleep(0.1)
    time.sleep(0.2)
    await asyncio.sleep(0.1)
    probe.cancel()
    lags = [lag for _, lag in seen]
    assert 0.0 <= min(lags) < 0.02
    assert max(lags) >= 0.2 - 0.02
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(seen)]
    assert min(gaps) >= 0.02 - 0.001
