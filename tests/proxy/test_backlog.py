"""The comparison backlog's policy (`Book`) and its loop side (`Backlog`): every job is run or
skipped exactly once, skipped iff it waited past the deadline or arrived to a full backlog,
and the oldest job within the deadline is the one a freed worker takes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calltap.proxy.backlog import Backlog, Book, Shed, Skip, skipped_document

DEADLINE = 10.0

Step = tuple[str, float]
steps = st.lists(st.one_of(
    st.tuples(st.just("arrive"), st.floats(0.0, 2 * DEADLINE)),
    st.tuples(st.just("tick"), st.floats(0.0, DEADLINE)),
    st.tuples(st.just("finish"), st.just(0.0)),
), max_size=60)


@dataclass
class Run:
    """What a simulation of the book saw."""

    book: Book[int]
    now: float = 100.0
    closed: dict[int, float] = field(default_factory=dict)
    outcomes: dict[int, list[tuple[str, float]]] = field(default_factory=dict)
    """Per job: ("run", waited) or (reason, waited), once each."""
    full_on_arrival: set[int] = field(default_factory=set)
    running: list[int] = field(default_factory=list)
    started: list[int] = field(default_factory=list)

    def note(self, token: int, what: str, waited: float) -> None:
        self.outcomes.setdefault(token, []).append((what, waited))
        if what == "run":
            self.running.append(token)
            self.started.append(token)

    def arrive(self, age: float) -> None:
        token = len(self.closed)
        self.closed[token] = self.now - age
        if not self.book.free and len(self.book.waiting) >= self.book.limit:
            self.full_on_arrival.add(token)
        decision = self.book.arrive(token, self.closed[token], self.now)
        if isinstance(decision, Skip):
            self.note(token, decision.reason, decision.waited)
        elif decision:
            self.note(token, "run", age)

    def finish(self) -> None:
        if not self.running:
            return
        self.running.pop(0)
        taker, skipped = self.book.release(self.now)
        for token, skip in skipped:
            self.note(token, skip.reason, skip.waited)
        if taker is not None:
            self.note(taker, "run", self.now - self.closed[taker])


@given(st.integers(1, 3), st.integers(1, 4), steps)
def test_every_job_is_run_or_skipped_once_and_only_for_its_reason(
        slots: int, limit: int, script: list[Step]) -> None:
    run = Run(Book(slots, limit, DEADLINE))
    for kind, value in script:
        if kind == "arrive":
            run.arrive(value)
        elif kind == "tick":
            run.now += value
        else:
            run.finish()
        assert len(run.running) + run.book.free == slots
        assert not (run.book.free and run.book.waiting)
        assert len(run.book.waiting) <= limit
    while run.running:
        run.finish()
    assert set(run.outcomes) == set(run.closed)
    for token, outcomes in run.outcomes.items():
        ((what, waited),) = outcomes
        if what == "run":
            assert waited <= DEADLINE
        elif what == "deadline":
            assert waited > DEADLINE
        else:
            assert what == "backlog_full" and token in run.full_on_arrival
    assert all(run.outcomes[token][0][0] != "run" for token in run.full_on_arrival)
    assert run.started == sorted(run.started)


def test_a_skip_is_written_as_pair_json_says() -> None:
    document = {"legs": {"downstream": {"file": "downstream.sse", "bytes": None},
                         "upstream": {"file": "upstream.sse", "bytes": None}},
                "comparison": None}
    skipped_document(document, {"upstream.sse": 7, "downstream.sse": 9},
                     Skip("deadline", 61.23456, 3))
    assert document == {"legs": {"downstream": {"file": "downstream.sse", "bytes": 9},
                                 "upstream": {"file": "upstream.sse", "bytes": 7}},
                        "skipped": {"reason": "deadline", "waited": 61.235}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_freed_worker_skips_the_stale_and_runs_the_oldest_fresh_job() -> None:
    clock = Clock()
    backlog = Backlog(1, 3, DEADLINE, clock)
    order: list[str] = []

    async def job(name: str, closed_at: float) -> None:
        try:
            async with backlog.turn(closed_at):
                order.append(name)
        except Shed as shed:
            order.append(f"{name}:{shed.skip.reason}")

    held = backlog.turn(clock.now)
    await held.__aenter__()
    tasks = [asyncio.create_task(job("stale", clock.now)), asyncio.create_task(job(
        "fresh", clock.now + 5))]
    await asyncio.sleep(0)
    abandoned = asyncio.create_task(job("abandoned", clock.now + 5))
    await asyncio.sleep(0)
    assert len(backlog) == 3
    abandoned.cancel()
    await asyncio.gather(abandoned, return_exceptions=True)
    assert len(backlog) == 2
    clock.now += DEADLINE + 1
    await held.__aexit__(None, None, None)
    await asyncio.gather(*tasks)
    assert order == ["stale:deadline", "fresh"]
    assert len(backlog) == 0 and backlog.book.free == 1


async def test_a_capture_arriving_to_a_full_backlog_is_shed_at_once() -> None:
    backlog = Backlog(1, 1, DEADLINE, Clock())
    async with backlog.turn(1000.0):
        waiting = asyncio.create_task(backlog.turn(1000.0).__aenter__())
        await asyncio.sleep(0)
        with pytest.raises(Shed) as shed:
            async with backlog.turn(1000.0):
                pass
        assert shed.value.skip == Skip("backlog_full", 0.0, 1)
    await waiting


async def test_a_slot_freed_for_a_job_cancelled_in_the_meantime_goes_to_the_next() -> None:
    backlog = Backlog(1, 3, DEADLINE, Clock())
    ran: list[str] = []

    async def job(name: str) -> None:
        async with backlog.turn(1000.0):
            ran.append(name)

    held = backlog.turn(1000.0)
    await held.__aenter__()
    first, second = asyncio.create_task(job("first")), asyncio.create_task(job("second"))
    await asyncio.sleep(0)
    first.cancel()
    await held.__aexit__(None, None, None)
    await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 5)
    assert ran == ["second"] and backlog.book.free == 1 and len(backlog) == 0
