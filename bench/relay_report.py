"""The relay benchmark's figures and how they are printed: rich tables, then PASS/MISS per target.

Latency added per hop, per percentile: over direct, (topology - direct) / 2 hops, which charges each
relay with the gateway's share as well; and calltap's over the pass-through, (calltap -
pass-through) / 2 hops, what calltap adds where a bare relay would stand, the target. CPU per event
per leg is a proxy process's CPU over the measured paced load divided by (events relayed x 2 legs):
each proxy process relays every event twice, client side and provider side. calltap's figure counts
its whole process tree (the comparison workers), read once every pair was compared; the figure for
its own process alone is shown beside it.
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass, field

import aiohttp
from rich.console import Console
from rich.table import Table

from relay_load import Outcome, Workload, percentile
from relay_procs import Cpu

HOPS = 2
LEGS = 2
CPU_TARGET = 1.1
FIXED_COST_TARGET_MS = 1.0
FIXED_COST_MOONSHOT_MS = 0.6
LATENCY_TARGET_MS = 1.0
"""Added per-event p99 per hop over the pass-through, up to `CALM_STREAMS` paced streams."""
BUSY_LATENCY_TARGET_MS = 2.0
"""The same with more paced streams (the busy case, 64 by default)."""
CALM_STREAMS = 8
COMPARED_WITHIN_S = 60.0
"""Every pair recorded during a block must be compared this soon after the block's load."""
ROLES = ("client", "provider", "gateway", "proxy")
RECORDING_OFF = "recording off"
"""With --recording-off, the unpaced phase's fourth topology: calltap relaying the same load
with nothing paired, recorded or compared."""


@dataclass(frozen=True, slots=True)
class Plan:
    serial_requests: int
    concurrent_requests: int
    concurrency: int
    blocks: int
    """Unpaced runs are measured in this many blocks per topology, taken in turns."""
    paced_streams: int
    paced_rounds: int
    text_events: int
    pacing: float

    def per_block(self, total: int) -> int:
        """Requests per unpaced block, so that the blocks add up to about `total`."""
        return max(1, round(total / self.blocks))


@dataclass(slots=True)
class Usage:
    """CPU seconds per role ("proxy" is the pass-through or calltap) over measured loads."""

    cpu: dict[str, Cpu] = field(default_factory=dict)
    seconds: float = 0.0
    machine_ticks: tuple[int, int] = (0, 0)
    """The machine's busy and total CPU ticks meanwhile, whoever used them."""

    def absorb(self, other: Usage) -> None:
        for role, spent in other.cpu.items():
            self.cpu[role] = self.cpu[role] + spent if role in self.cpu else spent
        self.seconds += other.seconds
        self.machine_ticks = (self.machine_ticks[0] + other.machine_ticks[0],
                              self.machine_ticks[1] + other.machine_ticks[1])

    @property
    def machine_busy(self) -> float:
        """The share of all the machine's CPUs that was busy."""
        busy, total = self.machine_ticks
        return busy / total if total else 0.0


@dataclass(slots=True)
class Measured:
    """One topology's measured blocks added up: what the client saw, what the processes spent
    (calltap: until each block's last pair was compared), and that comparison tail."""

    outcome: Outcome = field(default_factory=Outcome)
    usage: Usage = field(default_factory=Usage)
    compare_tail: float | None = None
    """Seconds calltap needed after each block's last response to compare every pair,
    added up."""
    longest_tail: float = 0.0
    """The longest of those tails."""

    def absorb(self, outcome: Outcome, usage: Usage, tail: float | None) -> None:
        self.outcome.absorb(outcome)
        self.usage.absorb(usage)
        if tail is not None:
            self.compare_tail = (self.compare_tail or 0.0) + tail
            self.longest_tail = max(self.longest_tail, tail)


@dataclass(slots=True)
class Throughput:
    serial: Measured = field(default_factory=Measured)
    concurrent: Measured = field(default_factory=Measured)


@dataclass(slots=True)
class Results:
    work: Workload
    throughput: dict[str, Throughput] = field(default_factory=dict)
    paced: dict[str, Measured] = field(default_factory=dict)
    verdicts: dict[str, float] = field(default_factory=dict)
    """calltap's pairs by verdict (the last instance's /metrics)."""
    capture_failures: float = 0.0
    undrained: list[str] = field(default_factory=list)

    def outcomes(self) -> list[Outcome]:
        runs = [m.outcome for t in self.throughput.values() for m in (t.serial, t.concurrent)]
        return runs + [m.outcome for m in self.paced.values()]

    def mismatches(self) -> list[str]:
        return [line for outcome in self.outcomes() for line in outcome.mismatches]


def ms(seconds: float) -> str:
    return "–" if math.isnan(seconds) else f"{seconds * 1e3:.2f}"


def table(title: str, *columns: str) -> Table:
    out = Table(title=title)
    for number, column in enumerate(columns):
        out.add_column(column, justify="left" if number == 0 else "right")
    return out


def tail(measured: Measured) -> str:
    """The comparison tail: seconds calltap spent comparing after the last responses."""
    return f"{measured.compare_tail:.2f}" if measured.compare_tail is not None else ""


def per_event_leg(seconds: float, events: int, legs: int = LEGS) -> float:
    """µs of CPU per event per leg."""
    return seconds / (events * legs) * 1e6 if events else math.nan


class Report:
    def __init__(self, results: Results, plan: Plan, console: Console) -> None:
        self.results = results
        self.plan = plan
        self.console = console
        self.events = results.work.events
        """Events per stream."""

    def print(self, loop: str, malloc: str, recordings: str) -> None:
        work = self.results.work
        self.console.print(
            f"\n[bold]calltap relay benchmark[/]  Python {platform.python_version()},"
            f" aiohttp {aiohttp.__version__}, loop {loop}, {os.cpu_count()} CPUs,"
            f" load average now {os.getloadavg()[0]:.2f}\n"
            f"servers' GLIBC_TUNABLES: {malloc}; calltap records under {recordings}\n"
            f"{work.events} events per stream ({self.plan.text_events} text), {work.answer_bytes}"
            f" bytes; bodies sha256-checked: {sum(o.requests for o in self.results.outcomes())}")
        self.throughput()
        self.request_cpu()
        self.latency()
        self.event_cpu()
        self.targets()
        self.calltap_state()

    def throughput(self) -> None:
        plan = self.plan
        c = plan.concurrency
        serial_total = plan.per_block(plan.serial_requests) * plan.blocks
        concurrent_total = plan.per_block(plan.concurrent_requests) * plan.blocks
        out = table(f"Unpaced provider: {serial_total} requests at c=1, {concurrent_total} at"
                    f" c={c}, per topology, in {plan.blocks} blocks taken in turns",
                    "topology", "req/s c=1", "TTFB p50 ms", "TTFB p99 ms", f"req/s c={c}",
                    "TTFB p50 ms", "TTFB p99 ms", "mismatches")
        for name, figures in self.results.throughput.items():
            serial, concurrent = figures.serial.outcome, figures.concurrent.outcome
            out.add_row(name, f"{serial.rate:.1f}", ms(percentile(serial.ttfb, 0.5)),
                        ms(percentile(serial.ttfb, 0.99)), f"{concurrent.rate:.1f}",
                        ms(percentile(concurrent.ttfb, 0.5)),
                        ms(percentile(concurrent.ttfb, 0.99)),
                        str(len(serial.mismatches) + len(concurrent.mismatches)))
        self.console.print(out)

    def request_cpu(self) -> None:
        out = table(f"CPU ms per request by process, unpaced c={self.plan.concurrency} run"
                    " (/proc utime+stime)", "topology", *ROLES, "proxy tree", "all",
                    "machine busy", "compare tail s")
        for name, figures in self.results.throughput.items():
            measured = figures.concurrent
            usage, requests = measured.usage, measured.outcome.requests or 1
            cells = [ms(usage.cpu[role].own / requests) if role in usage.cpu else ""
                     for role in ROLES]
            proxy = usage.cpu.get("proxy")
            tree = ms(proxy.tree / requests) if proxy is not None else ""
            total = sum(cpu.tree for cpu in usage.cpu.values())
            out.add_row(name, *cells, tree, ms(total / requests), f"{usage.machine_busy:.0%}",
                        tail(measured))
        self.console.print(out)

    def latency(self) -> None:
        plan = self.plan
        out = table("Per-event latency (arrival - provider timestamp), events"
                    f" {plan.pacing * 1e3:g} ms apart, {plan.paced_streams} staggered streams"
                    f" x {plan.paced_rounds}",
                    "topology", "events", "p50 ms", "p99 ms", "added/hop p50 ms",
                    "added/hop p99 ms", "over")
        for name, figures in self.results.paced.items():
            values = figures.outcome.latencies_ns
            row = [name, str(len(values)), ms(percentile(values, 0.5) / 1e9),
                   ms(percentile(values, 0.99) / 1e9)]
            if name == "direct":
                out.add_row(*row, "", "", "")
                continue
            for base in ("direct", "pass-through") if name == "calltap" else ("direct",):
                added = [ms(self.added_per_hop(name, base, q) / 1e3) for q in (0.5, 0.99)]
                out.add_row(*row, *added, base)
                row = ["", "", "", ""]
        self.console.print(out)

    def added_per_hop(self, name: str, base: str, quantile: float) -> float:
        """Milliseconds a topology's per-event latency at `quantile` exceeds `base`'s, per hop."""
        paced = self.results.paced
        return (percentile(paced[name].outcome.latencies_ns, quantile)
                - percentile(paced[base].outcome.latencies_ns, quantile)) / HOPS / 1e6

    def event_cpu(self) -> None:
        out = table("CPU per relayed event per leg, paced load (/proc utime+stime)",
                    "process", "CPU s", "events x legs", "µs/event/leg", "busy",
                    "compare tail s")
        for name, figures in self.results.paced.items():
            proxy = figures.usage.cpu.get("proxy")
            if proxy is None:
                continue
            shares = [("process", proxy.own)]
            if name == "calltap":
                shares.append(("process tree (comparison workers included)", proxy.tree))
            events = self.relayed(figures)
            for label, seconds in shares:
                out.add_row(f"{name} {label}", f"{seconds:.2f}", str(events * LEGS),
                            f"{per_event_leg(seconds, events):.1f}",
                            f"{seconds / figures.usage.seconds:.0%}", tail(figures))
        for name, figures in self.results.paced.items():
            gateway = figures.usage.cpu.get("gateway")
            if gateway is not None:
                events = self.relayed(figures)
                out.add_row(f"fake gateway ({name} run), 1 leg", f"{gateway.own:.2f}",
                            str(events), f"{per_event_leg(gateway.own, events, 1):.1f}",
                            f"{gateway.own / figures.usage.seconds:.0%}", "")
        self.console.print(out)
        busy = ", ".join(f"{name} {figures.usage.machine_busy:.0%}"
                         for name, figures in self.results.paced.items())
        self.console.print(f"machine busy during the paced loads: {busy}")

    def targets(self) -> None:
        out = table("Targets", "target", "measured", "ratio", "limit", "")
        self.fixed_cost(out)
        bare, tap = self.results.paced["pass-through"], self.results.paced["calltap"]
        bare_cost = self.cost(bare, "own")
        streams = self.plan.paced_streams
        for label in ("tree", "own"):
            cost = self.cost(tap, label)
            ratio = cost / bare_cost
            self.verdict(out, f"calltap CPU/event/leg ({label}) vs pass-through, paced"
                         f" c={streams}", f"{cost:.1f} vs {bare_cost:.1f} µs", ratio,
                         CPU_TARGET, ratio <= CPU_TARGET)
        limit = LATENCY_TARGET_MS if streams <= CALM_STREAMS else BUSY_LATENCY_TARGET_MS
        added = self.added_per_hop("calltap", "pass-through", 0.99)
        self.verdict(out, f"calltap added latency p99 per hop over pass-through, c={streams}",
                     f"{added:.3f} ms", added, limit, added <= limit)
        runs = [m for t in self.results.throughput.values() for m in (t.serial, t.concurrent)]
        longest = max(m.longest_tail for m in [*runs, *self.results.paced.values()])
        compared = not self.results.undrained and longest <= COMPARED_WITHIN_S
        self.verdict(out, "every pair compared after its block's load", f"{longest:.2f} s",
                     longest, COMPARED_WITHIN_S, compared)
        self.console.print(out)
        self.console.print("[dim]PASS/MISS is information: the exit status only reflects"
                           " body mismatches and crashes[/dim]")

    def fixed_cost(self, out: Table) -> None:
        """What a pair costs calltap beyond relaying it: its whole process tree's CPU per
        request minus the pass-through's (unpaced, nothing deferred: each block is measured
        until its last pair was compared), and the two shares of it."""
        bare = self.results.throughput["pass-through"].concurrent
        tap = self.results.throughput["calltap"].concurrent
        bare_proxy, tap_proxy = bare.usage.cpu.get("proxy"), tap.usage.cpu.get("proxy")
        if bare_proxy is None or tap_proxy is None:
            return
        bare_ms = bare_proxy.own / (bare.outcome.requests or 1) * 1e3
        own_ms = tap_proxy.own / (tap.outcome.requests or 1) * 1e3
        tree_ms = tap_proxy.tree / (tap.outcome.requests or 1) * 1e3
        fixed = tree_ms - bare_ms
        c = self.plan.concurrency
        self.verdict(out, f"fixed cost per pair: calltap tree - pass-through, ms/request, c={c}",
                     f"{tree_ms:.2f} - {bare_ms:.2f} = {fixed:.2f} ms", fixed,
                     FIXED_COST_TARGET_MS, fixed <= FIXED_COST_TARGET_MS)
        requests = tap.outcome.requests or 1
        loop_ms = tap_proxy.main_thread / requests * 1e3
        out.add_row("  of which calltap's loop thread - pass-through",
                    f"{loop_ms - bare_ms:.2f} ms", "", "", "")
        out.add_row("  of which calltap's other threads (the disk thread)",
                    f"{own_ms - loop_ms:.2f} ms", "", "", "")
        out.add_row("  of which the comparison workers", f"{tree_ms - own_ms:.2f} ms", "", "",
                    "")
        off = self.results.throughput.get(RECORDING_OFF)
        off_proxy = off.concurrent.usage.cpu.get("proxy") if off is not None else None
        if off_proxy is not None:
            off_ms = off_proxy.tree / (off.concurrent.outcome.requests or 1) * 1e3
            out.add_row("  calltap with recording off - pass-through", f"{off_ms - bare_ms:.2f} ms",
                        "", "", "")
            out.add_row("  calltap tree - calltap with recording off", f"{tree_ms - off_ms:.2f} ms",
                        "", "", "")
        out.add_row("  moonshot", f"{fixed:.2f} ms", f"{fixed:.2f}",
                    f"{FIXED_COST_MOONSHOT_MS:g}",
                    "[green]met[/]" if fixed <= FIXED_COST_MOONSHOT_MS else "[dim]not yet[/]")

    def relayed(self, paced: Measured) -> int:
        """Events each process relayed (per leg) during the measured paced load."""
        return paced.outcome.requests * self.events

    def cost(self, paced: Measured, share: str) -> float:
        proxy = paced.usage.cpu.get("proxy")
        if proxy is None:
            return math.nan
        return per_event_leg(proxy.tree if share == "tree" else proxy.own, self.relayed(paced))

    @staticmethod
    def verdict(out: Table, name: str, shown: str, ratio: float, limit: float,
                passed: bool) -> None:
        mark = "[bold green]PASS[/]" if passed else "[bold red]MISS[/]"
        out.add_row(name, shown, "–" if math.isnan(ratio) else f"{ratio:.2f}", f"{limit:g}",
                    mark)

    def calltap_state(self) -> None:
        results = self.results
        verdicts = ", ".join(f"{v} {n:.0f}" for v, n in sorted(results.verdicts.items()))
        self.console.print(f"calltap pairs compared (last instance): {verdicts or 'none'};"
                           f" capture failures {results.capture_failures:.0f}")
        if set(results.verdicts) - {"equal"} or results.capture_failures:
            self.console.print("[bold red]calltap judged a faithful pair other than equal, or"
                               " failed to record one: see its log[/]")
        for line in results.undrained:
            self.console.print(f"[bold red]comparison backlog not drained: {line}[/]")

    def mismatches(self) -> bool:
        """Print every body mismatch loudly; True when there was any."""
        mismatches = self.results.mismatches()
        if not mismatches:
            return False
        self.console.print(f"[bold red]BODY MISMATCH: {len(mismatches)} response(s) differ from"
                           " the provider's bytes[/]")
        for line in mismatches[:20]:
            self.console.print(f"[red]  {line}[/]")
        return True
