"""The relay benchmark's sustained and overload mode (`bench/relay.py --sustained`).

The same processes as the calltap topology (fake provider unpaced, re-labelling gateway,
`calltap serve`), under an open-loop load: requests start at a fixed rate whatever the answers
do, as traffic arrives, and every body is checked against the provider's bytes.

1. Comparison capacity: a burst of requests (closed loop, c=32) fills calltap's comparison
   backlog, then the pairs compared per second are read from /metrics while it drains. The
   workers get only the CPU nothing else wants, so under load they compare only what the relay
   leaves: with the relay's rate during the burst (R, req/s) and the drain's (D, pairs/s), the
   load this machine can both relay and compare is C = 1 / (1/R + 1/D), each request costing
   1/R of the machine to relay and 1/D to compare. The two runs offer shares of C.
2. 80% of it for `--minutes`: a row every 15 s (offered and relayed req/s, the comparison
   backlog, pairs compared and skipped). PASS when the backlog's mean over the last third of the
   run is no higher than over the first third plus a slack, and nothing was skipped.
3. 150% of it, against calltap with `compare_deadline` lowered (so that shedding shows within
   the run) and against calltap with recording off (`compared_paths` set to a path nothing
   calls, `record_other` off), in alternating blocks on the same machine: relayed req/s both
   ways and their ratio (target >= 0.9), pairs skipped by the counter, in `pair.skipped` lines
   of calltap's log and in pair.json, then `calltap scan` over copies of the skipped pairs.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from calltap import recordings
from relay import NOWHERE, Fleet, Topology, console, topology
from relay_load import LoadClient, Outcome, Workload, percentile, workload
from relay_procs import Server

STEADY, OVERLOAD = 0.8, 1.5
"""The offered loads, as shares of the comparison capacity."""
RATE_TARGET = 0.9
CARRIED = 0.95
"""A calltap that relays less than this share of the offered rate is past its capacity."""
ROW_SECONDS = 15.0
SAMPLE_SECONDS = 1.0
BLOCK_SECONDS = 30.0
"""The overload run alternates its two calltaps in blocks this long."""
OVERLOAD_DEADLINE = 10.0
"""calltap's `compare_deadline` in the overload run (60 s by default)."""
BURST = 900
"""Fewer than `max_compare_backlog` (1000): the burst fills the backlog without shedding."""
BURST_CONCURRENCY = 32
CONNECTIONS = 1024
"""The open-loop client's connection pool: more than the requests ever in flight."""
SLACK_PAIRS, SLACK_SHARE = 10.0, 0.2
"""The backlog's last third may exceed its first third by this many pairs or this share of it,
whichever is larger."""
DRAIN_TIMEOUT = 300.0
STALLED = 10.0
"""Seconds without a pair finalized, nothing waiting, after which waiting for the rest ends
(requests the client gave up on may never have reached calltap)."""
POLL = 0.1
MISMATCHES_SHOWN = 3


@dataclass(frozen=True, slots=True)
class Progress:
    """What calltap's /metrics says about its comparisons."""

    compared: float = 0.0
    skipped: dict[str, float] = field(default_factory=dict)
    backlog: float = 0.0
    failures: float = 0.0
    unrecorded: float = 0.0
    """Legs relayed unrecorded because recording was paused (any reason)."""
    lag: float = 0.0
    """The loop's worst lag over the last second (seconds)."""

    @property
    def finalized(self) -> float:
        return self.compared + sum(self.skipped.values()) + self.failures


def progress_of(metrics: str) -> Progress:
    compared, failures, backlog, unrecorded, lag = 0.0, 0.0, 0.0, 0.0, 0.0
    skipped: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "calltap_pairs_total":
                compared += sample.value
            elif sample.name == "calltap_pairs_skipped_total":
                skipped[sample.labels["reason"]] = sample.value
            elif sample.name == "calltap_compare_backlog_pairs":
                backlog = sample.value
            elif sample.name == "calltap_capture_failures_total":
                failures = sample.value
            elif sample.name == "calltap_unrecorded_legs_total":
                unrecorded += sample.value
            elif sample.name == "calltap_loop_lag_seconds":
                lag = sample.value
    return Progress(compared, skipped, backlog, failures, unrecorded, lag)


class Admin:
    """One calltap's /metrics, read over one keep-alive session."""

    def __init__(self, session: aiohttp.ClientSession, place: Topology) -> None:
        assert place.admin is not None
        self.session = session
        self.url = place.admin + "/metrics"
        self.place = place

    async def read(self) -> Progress:
        async with self.session.get(self.url) as response:
            return progress_of(await response.text())

    async def drained(self) -> Progress:
        """Wait until every pair sent was compared, skipped or failed (or nothing moved for
        `STALLED` seconds with nothing waiting, or the timeout)."""
        started = moved = time.perf_counter()
        progress = await self.read()
        while progress.finalized < self.place.sent:
            now = time.perf_counter()
            if now - started > DRAIN_TIMEOUT or (now - moved > STALLED and not progress.backlog):
                break
            await asyncio.sleep(POLL)
            previous, progress = progress, await self.read()
            if progress.finalized > previous.finalized:
                moved = time.perf_counter()
        return progress


class OpenLoad:
    """Requests started at `rate` per second: a slow answer never delays the next start."""

    def __init__(self, client: LoadClient, rate: float) -> None:
        self.client = client
        self.rate = rate
        self.started = 0
        self.offering = 0.0
        """Seconds from the first start to the last."""
        self.outcome = Outcome()
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, place: Topology, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        begun = loop.time()
        for number in range(round(self.rate * seconds)):
            delay = begun + number / self.rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.started += 1
            place.sent += 1
            task = asyncio.create_task(self.client.one(self.outcome))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self.offering = loop.time() - begun
        await asyncio.gather(*list(self._tasks))
        self.outcome.seconds += loop.time() - begun


@dataclass(slots=True)
class Watched:
    """A load's backlog samples (one a second) and its relayed requests."""

    backlog: list[float] = field(default_factory=list)
    outcome: Outcome = field(default_factory=Outcome)
    offered: float = 0.0
    """Requests started per second, as achieved."""


def row(label: str, *cells: str) -> None:
    console.print(f"{label:>10} " + " ".join(f"{cell:>12}" for cell in cells), highlight=False)


def header() -> None:
    row("elapsed s", "offered/s", "relayed/s", "backlog", "compared", "skipped", "unrecorded",
        "lag ms", "calltap")


async def watched(place: Topology, admin: Admin, client: LoadClient, rate: float,
                  seconds: float, label: str, *, since: Progress, clock: float) -> Watched:
    """Run an open load of `rate` for `seconds`, sampling the backlog every second and printing
    a row every 15 s (`clock`: the run's start, for the elapsed column)."""
    load = OpenLoad(client, rate)
    task = asyncio.create_task(load.run(place, seconds))
    result = Watched()
    last = (time.perf_counter(), 0, 0)
    while not task.done():
        await asyncio.wait([task], timeout=SAMPLE_SECONDS)
        progress = await admin.read()
        result.backlog.append(progress.backlog)
        now = time.perf_counter()
        if now - last[0] >= ROW_SECONDS or (task.done() and now - last[0] >= SAMPLE_SECONDS):
            span = now - last[0]
            row(f"{now - clock:.0f}", f"{(load.started - last[1]) / span:.1f}",
                f"{(load.outcome.requests - last[2]) / span:.1f}", f"{progress.backlog:.0f}",
                f"{progress.compared - since.compared:.0f}",
                f"{sum(progress.skipped.values()) - sum(since.skipped.values()):.0f}",
                f"{progress.unrecorded - since.unrecorded:.0f}", f"{progress.lag * 1000:.0f}",
                label)
            last = (now, load.started, load.outcome.requests)
    await task
    result.outcome = load.outcome
    result.offered = load.started / load.offering if load.offering else 0.0
    return result


# -- the three measurements ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Capacity:
    relay: float
    """R: req/s relayed by calltap (recording) in the burst, its workers starved."""
    drain: float
    """D: pairs/s compared while the burst's backlog drained."""

    @property
    def both(self) -> float:
        """C: req/s this machine can both relay and compare."""
        return 1 / (1 / self.relay + 1 / self.drain)


async def capacity(place: Topology, admin: Admin, work: Workload,
                   burst: int) -> Capacity | None:
    """R, D and so C above; None when the workers kept up with the burst (the backlog was
    empty as soon as it ended)."""
    async with LoadClient(place.url, BURST_CONCURRENCY, work, timestamps=False,
                          relabelled=True) as client:
        place.sent += burst
        outcome = await client.run(burst)
    console.print(f"burst: {burst} requests at c={BURST_CONCURRENCY} in {outcome.seconds:.1f} s"
                  f" ({outcome.rate:.1f} req/s relayed)")
    first, started = await admin.read(), time.perf_counter()
    last = first
    while last.backlog > 0 and time.perf_counter() - started < DRAIN_TIMEOUT:
        await asyncio.sleep(POLL)
        last = await admin.read()
    seconds = time.perf_counter() - started
    await admin.drained()
    if first.backlog == 0 or seconds <= 0:
        return None
    drain = (last.compared - first.compared) / seconds
    measured = Capacity(outcome.rate, drain)
    console.print(f"comparisons: {last.compared - first.compared:.0f} pairs compared in"
                  f" {seconds:.1f} s while {first.backlog:.0f} waiting drained: D = {drain:.1f}"
                  f" pairs/s; relay during the burst R = {outcome.rate:.1f} req/s\n"
                  f"capacity: C = 1 / (1/R + 1/D) = [bold]{measured.both:.1f} req/s[/] relayed"
                  f" and compared")
    return measured


def thirds(samples: list[float]) -> tuple[float, float]:
    """The mean of the first and of the last third of `samples`."""
    third = max(1, len(samples) // 3)
    return sum(samples[:third]) / third, sum(samples[-third:]) / third


async def steady(place: Topology, admin: Admin, work: Workload, rate: float,
                 minutes: float) -> bool:
    console.print(f"\n[bold]{STEADY:.0%} of capacity:[/] {rate:.1f} req/s offered for"
                  f" {minutes:g} min")
    header()
    before = await admin.read()
    async with LoadClient(place.url, CONNECTIONS, work, timestamps=False,
                          relabelled=True) as client:
        seen = await watched(place, admin, client, rate, minutes * 60, "recording",
                             since=before, clock=time.perf_counter())
    after = await admin.drained()
    skipped = sum(after.skipped.values()) - sum(before.skipped.values())
    first, last = thirds(seen.backlog)
    slack = max(SLACK_PAIRS, SLACK_SHARE * first)
    flat = last <= first + slack
    console.print(f"offered {seen.offered:.1f} req/s (target {rate:.1f}), relayed"
                  f" {seen.outcome.rate:.1f} req/s; backlog mean {first:.1f} over the first"
                  f" third, {last:.1f} over the last (slack {slack:.0f}: {SLACK_PAIRS:.0f} pairs"
                  f" or {SLACK_SHARE:.0%}); skipped {skipped:.0f}; body mismatches"
                  f" {len(seen.outcome.mismatches)}")
    passed = flat and skipped == 0 and not seen.outcome.mismatches
    console.print(f"{'[green]PASS[/]' if passed else '[red]MISS[/]'} backlog flat and nothing"
                  f" skipped at {STEADY:.0%}")
    return passed


def rotated(names: list[str], block: int) -> list[str]:
    shift = block % len(names)
    return names[shift:] + names[:shift]


async def overload(places: dict[str, Topology], admins: dict[str, Admin], work: Workload,
                   rate: float, minutes: float) -> dict[str, Watched]:
    """The same open load against each calltap in turn, block by block."""
    console.print(f"\n[bold]{OVERLOAD:.0%} of capacity:[/] {rate:.1f} req/s offered for"
                  f" {minutes:g} min against each calltap, in alternating {BLOCK_SECONDS:.0f} s"
                  f" blocks; `recording` runs with compare_deadline = {OVERLOAD_DEADLINE:.0f} s"
                  f" (60 by default) so that shedding shows within the run, `off` has recording"
                  f" off (compared_paths = {NOWHERE})")
    header()
    totals = {name: Watched() for name in places}
    starts = {name: await admin.read() for name, admin in admins.items()}
    clock = time.perf_counter()
    clients = {name: LoadClient(place.url, CONNECTIONS, work, timestamps=False, relabelled=True)
               for name, place in places.items()}
    for client in clients.values():
        await client.__aenter__()
    try:
        for block in range(max(1, round(minutes * 60 / BLOCK_SECONDS))):
            for name in rotated(list(places), block):
                seen = await watched(places[name], admins[name], clients[name], rate,
                                     BLOCK_SECONDS, name, since=starts[name], clock=clock)
                totals[name].outcome.absorb(seen.outcome)
                totals[name].offered += seen.offered
                totals[name].backlog += seen.backlog
    finally:
        for client in clients.values():
            await client.__aexit__(None, None, None)
    for total in totals.values():
        total.offered /= max(1, round(minutes * 60 / BLOCK_SECONDS))
    return totals


def compare_rates(totals: dict[str, Watched], rate: float, relay: float) -> bool:
    for name, total in totals.items():
        outcome = total.outcome
        console.print(f"{name:>10}: offered {total.offered:.1f} req/s (target {rate:.1f}),"
                      f" relayed {outcome.rate:.1f} req/s, ttfb p50"
                      f" {percentile(outcome.ttfb, 0.5) * 1000:.1f} ms p99"
                      f" {percentile(outcome.ttfb, 0.99) * 1000:.1f} ms, body mismatches"
                      f" {len(outcome.mismatches)}")
        for mismatch in outcome.mismatches[:MISMATCHES_SHOWN]:
            console.print(f"{'':>12}{mismatch}", highlight=False)
    ratio = totals["recording"].outcome.rate / (totals["off"].outcome.rate or 1.0)
    passed = ratio >= RATE_TARGET
    console.print(f"{'[green]PASS[/]' if passed else '[red]MISS[/]'} relayed req/s with"
                  f" recording / with recording off: {ratio:.3f} (target >= {RATE_TARGET})")
    for name, what in (("recording", "with recording on"), ("off", "with recording off")):
        carried = totals[name].outcome.rate
        if carried < CARRIED * rate:
            console.print(f"[yellow]note[/]: calltap {what} relayed {carried:.1f} req/s of the"
                          f" {rate:.1f} offered (R = {relay:.1f} in the closed-loop burst):"
                          f" {OVERLOAD:.0%} of the comparison capacity is more than this machine"
                          f" relays {what}, so the relay itself is overloaded, not only the"
                          f" comparisons (they run only on idle CPU)")
    return passed


def skipped_pairs(tree: Path) -> Iterator[tuple[Path, str]]:
    """Each pair directory whose pair.json says it was skipped, with the reason."""
    for pair_json in sorted(tree.glob(f"*/*/{recordings.PAIR_JSON}")):
        document = orjson.loads(pair_json.read_bytes())
        if isinstance(document.get("skipped"), dict):
            yield pair_json.parent, document["skipped"]["reason"]


def logged(server: Server) -> tuple[int, Counter[str], int]:
    """From calltap's log: its `pair.skipped` lines, its `capture.failed` lines by stage and
    error, and its `recording.paused` lines for overload."""
    skipped, failed, paused = 0, Counter[str](), 0
    for line in server.stdout.read_bytes().splitlines():
        if b'"pair.skipped"' in line or b'"capture.failed"' in line or b'"overload"' in line:
            entry = orjson.loads(line)
            if entry.get("event") == "pair.skipped":
                skipped += 1
            elif entry.get("event") == "capture.failed":
                failed[f"{entry.get('stage')} {entry.get('error')} {entry.get('errno')}"] += 1
            elif entry.get("event") == "recording.paused":
                paused += 1
    return skipped, failed, paused


async def shed(admin: Admin, server: Server, tree: Path, workdir: Path) -> bool:
    """Every skipped pair counted, logged once and in pair.json; `calltap scan` compares them."""
    progress = await admin.drained()
    counted = sum(progress.skipped.values())
    lines, failed, paused = logged(server)
    found = list(skipped_pairs(tree))
    reasons = {reason: sum(1 for _, r in found if r == reason) for reason in progress.skipped}
    console.print(f"skipped: {counted:.0f} by calltap_pairs_skipped_total"
                  f" ({', '.join(f'{r} {n:.0f}' for r, n in progress.skipped.items())}),"
                  f" {lines} pair.skipped log lines, {len(found)} pair.json with `skipped`"
                  f" ({', '.join(f'{r} {n}' for r, n in reasons.items())}); compared live"
                  f" {progress.compared:.0f}, capture failures {progress.failures:.0f}")
    console.print(f"recording shed: {progress.unrecorded:.0f} legs relayed unrecorded"
                  f" (calltap_unrecorded_legs_total) in {paused} overload pauses"
                  f" (recording.paused lines)")
    if failed:
        console.print("capture.failed by stage, error and errno: "
                      + ", ".join(f"{what}: {count}" for what, count in failed.most_common()))
    copies = workdir / "skipped-pairs"
    bodied = [directory for directory, _ in found
              if any(recordings.leg_body(directory, side) for side in recordings.SIDES)]
    for directory in bodied:
        shutil.copytree(directory, copies / directory.parent.name / directory.name)
    scanned = subprocess.run([sys.executable, "-m", "calltap", "scan", str(copies), "--json"],
                             capture_output=True, check=False) if bodied else None
    verdicts = orjson.loads(scanned.stdout)["verdicts"] if scanned is not None else {}
    console.print(f"calltap scan of the {len(bodied)} skipped pairs with a body recorded"
                  f" ({len(found) - len(bodied)} lost both to a recording failure):"
                  f" {', '.join(f'{n} {v}' for v, n in verdicts.items()) or 'none'}"
                  + (" (clean: a single leg checked, the other's body lost)"
                     if "clean" in verdicts else ""))
    passed = counted == lines == len(found) > 0 and sum(verdicts.values()) == len(bodied)
    console.print(f"{'[green]PASS[/]' if passed else '[red]MISS[/]'} every skipped pair"
                  f" counted, logged once, in pair.json and compared by calltap scan")
    return passed


# -- entry point -------------------------------------------------------------------------------


def variant(fleets: list[Fleet], workdir: Path, recordings_root: Path, env: dict[str, str],
            name: str, **settings: str) -> Fleet:
    """A fleet of its own (its own logs and recordings) for one calltap's settings."""
    (workdir / name).mkdir()
    (recordings_root / name).mkdir()
    fleet = Fleet(workdir / name, {**env, **settings}, recordings_root / name)
    fleets.append(fleet)
    return fleet


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


async def sustained(text_events: int, minutes: float, env: dict[str, str], workdir: Path,
                    recordings_root: Path) -> int:
    """The three measurements; the number of bodies that differed from the provider's."""
    work = workload(text_events)
    fleets = [Fleet(workdir, env, recordings_root)]
    make = functools.partial(variant, fleets, workdir, recordings_root, env)
    mismatches = 0
    try:
        provider = fleets[0].fake("provider", "provider", "--text-events", str(text_events))
        async with aiohttp.ClientSession() as session:
            with topology(make("default"), "calltap", provider) as place:
                admin = Admin(session, place)
                measured = await capacity(place, admin, work, BURST)
                if measured is None:
                    console.print("[red]the comparison backlog was empty after the burst: the"
                                  " workers keep up with all the relay carries here[/]")
                    return 0
                rate = measured.both
                await steady(place, admin, work, STEADY * rate, minutes)
            with ExitStack() as stack:
                shedding = make("shedding", CALLTAP_COMPARE_DEADLINE=str(OVERLOAD_DEADLINE))
                places = {
                    "recording": stack.enter_context(topology(shedding, "calltap", provider)),
                    "off": stack.enter_context(topology(make("off", CALLTAP_COMPARED_PATHS=NOWHERE),
                                                        "calltap", provider)),
                }
                admins = {name: Admin(session, place) for name, place in places.items()}
                totals = await overload(places, admins, work, OVERLOAD * rate, minutes)
                compare_rates(totals, OVERLOAD * rate, measured.relay)
                tree = shedding.recordings / f"recordings-{provider.name}"
                await shed(admins["recording"], places["recording"].servers["proxy"], tree,
                           workdir)
                mismatches = sum(len(total.outcome.mismatches) for total in totals.values())
    finally:
        for fleet in reversed(fleets):
            fleet.stop_all()
    return mismatches


def run_sustained(text_events: int, minutes: float, env: dict[str, str],
                  recordings_under: Path) -> int:
    """`relay.py --sustained`: 0 whatever the figures, 1 when any body differed."""
    started = time.perf_counter()
    console.print(f"[dim]{os.cpu_count()} cores, load average {load_average()} at the start[/]")
    with (tempfile.TemporaryDirectory(prefix="calltap-relay-bench-") as workdir,
          tempfile.TemporaryDirectory(prefix=".calltap-relay-bench-",
                                      dir=recordings_under) as recordings_root):
        console.print(f"[dim]calltap records under {recordings_root} (removed at the end)[/dim]")
        try:
            mismatches = asyncio.run(sustained(text_events, minutes, env, Path(workdir),
                                               Path(recordings_root)))
        except KeyboardInterrupt:
            console.print("[bold red]interrupted[/]: every server stopped")
            return 130
    console.print(f"[dim]load average {load_average()} at the end; run time"
                  f" {time.perf_counter() - started:.0f} s[/dim]")
    return 1 if mismatches else 0
