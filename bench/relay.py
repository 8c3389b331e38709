"""What calltap costs on the relay path, against a bare aiohttp pass-through in the same run.

Everything runs on 127.0.0.1, each server in its own process: the fake provider (200 text
events per stream), a gateway that re-labels every chunk (a bare pass-through rewriting each
completion id for one of the same length, as real gateways do: the two legs' bodies differ, so
calltap's comparator reads and compares both), and in between one of three topologies:

  direct        client -> provider
  pass-through  client -> pass-through -> gateway -> pass-through -> provider
                (bench/relay_passthrough.py: one process, two listeners, nothing recorded)
  calltap       client -> front -> gateway -> back -> provider
                (`python -m calltap serve`, recording and comparison on)

and with --recording-off, in the unpaced phase, a calltap with `compared_paths` naming a path
nothing calls: the same relay with nothing paired, recorded or compared.

Phase 1, unpaced provider: req/s at concurrency 1 and 32 and time to first byte, every body's
sha256 checked against the provider's deterministic bytes; CPU per request of every process.
Phase 2, provider pacing events 5 ms apart with its send time in each chunk's `obfuscation`
field (so the bodies stay plain `data:` blocks, as OpenAI's streams with that field are), streams
staggered: the latency each event gains on its way (arrival minus send time), and the CPU per
relayed event per leg of the pass-through and of calltap, from /proc, over the measured load.
calltap's CPU is read once it has compared every pair, and counts its whole process tree.
In each phase all topologies are up at once and measured in turns, block by block, so that the
drifting load of a shared machine falls on each of them alike.

Allocator: asyncio reads sockets into a fresh 256 KiB buffer. With glibc's default settings such
a buffer is mmap'ed and unmapped around every read (plus page faults), until the process happens
to free a larger block, which raises glibc's dynamic mmap threshold; calltap's 256 KiB file
buffers do that, a bare relay never does, and the difference (about 2x the bare relay's CPU per
event here) would then be credited to calltap's design. So every server runs with GLIBC_TUNABLES
fixing the thresholds (the state calltap reaches by accident); --default-malloc shows the other.
Recordings go to a temporary directory under the working directory (where `calltap serve` puts
`recordings/` by default, so on the disk a deployment would use), printed at the start and
removed only when the run ends: deleting tens of thousands of files between phases would make
the next phase's file creations dearer on some filesystems (ext4 without a journal skips inodes
freed in the last 30 s). --recordings /dev/shm separates the disk's cost from calltap's own.

Targets, first: the fixed cost per pair, calltap's whole process tree's CPU per request minus the
pass-through's (unpaced c=32, each block measured until its last pair was compared) <= 1.0 ms
(moonshot 0.6), with its two shares (calltap's own process, its comparison workers); then, on
real-shaped traffic (paced, 64 streams), calltap's tree CPU per event per leg <= 1.1x the
pass-through's and the per-event latency p99 it adds over the pass-through <= 2 ms per hop
(<= 1 ms with 8 streams or fewer); every pair compared within 60 s of its block's load. The
load client checks every body against the re-labelled bytes. Each is printed PASS or MISS; the
exit status is 0 whatever the figures, 1 when any body differed from the provider's, and
non-zero on a crash. Every server is
stopped on the way out, Ctrl-C included.

  .venv/bin/python bench/relay.py            # the full run, a few minutes on 2 cores
  .venv/bin/python bench/relay.py --quick    # the same measurements, fewer requests (< 1 min)
  .venv/bin/python bench/relay.py --requests 1600 --paced-rounds 4 --recordings /dev/shm
  .venv/bin/python bench/relay.py --quick --bucket   # calltap uploading to a moto bucket
  .venv/bin/python bench/relay.py --sustained --quick  # open-loop load at 80% and 150% of
                                                       # calltap's comparison capacity
                                                       # (bench/relay_sustained.py)
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from relay_load import LoadClient, Outcome, workload
from relay_procs import (
    Cpu,
    Server,
    free_port,
    launch_calltap,
    launch_fake,
    machine_ticks,
    own_cpu,
    server_env,
)
from relay_report import RECORDING_OFF, Measured, Plan, Report, Results, Throughput, Usage

TOPOLOGIES = ("direct", "pass-through", "calltap")
NOWHERE = "/calltap-bench/nothing-calls-this"
"""The recording-off calltap's `compared_paths`: no request is paired, recorded or compared."""
FULL = Plan(serial_requests=200, concurrent_requests=3200, concurrency=32, blocks=4,
            paced_streams=64, paced_rounds=4, text_events=200, pacing=0.005)
QUICK = replace(FULL, serial_requests=40, concurrent_requests=480, blocks=2, paced_rounds=2)
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=1048576:glibc.malloc.trim_threshold=8388608"
"""Given to every server: see --default-malloc."""
DRAIN_TIMEOUT = 120.0
DRAIN_POLL = 0.1

console = Console(highlight=False, width=None if sys.stdout.isatty() else 132)


# -- processes -----------------------------------------------------------------------------


class Fleet:
    """Every server the benchmark started; whatever happens, `stop_all` ends them all."""

    def __init__(self, workdir: Path, env: dict[str, str], recordings: Path,
                 bucket: str | None = None) -> None:
        self.workdir = workdir
        self.bucket = bucket
        """`s3://…` when calltap uploads its pairs there (`recordings` is then its spool)."""
        self.recordings = recordings
        """Where calltap's recordings trees go (one per calltap instance, removed after)."""
        self.env = env
        self.running: list[Server] = []

    def fake(self, name: str, *args: str) -> Server:
        server = launch_fake(name, list(args), self.workdir, self.env)
        self.running.append(server)
        return server

    def calltap(self, gateway: str, provider: str, recordings: Path,
                settings: dict[str, str] | None = None) -> Server:
        """`calltap serve`, with `settings` (CALLTAP_* variables) over the fleet's environment."""
        server = launch_calltap(self.workdir, {**self.env, **(settings or {})}, gateway,
                                provider, recordings, self.bucket)
        self.running.append(server)
        return server

    def stop(self, server: Server) -> None:
        self.running.remove(server)
        server.stop()

    def stop_all(self) -> None:
        while self.running:
            self.running.pop().stop()


@dataclass(slots=True)
class Topology:
    name: str
    url: str
    """Where the client sends its requests."""
    servers: dict[str, Server]
    """By role: provider, gateway, proxy (the pass-through or calltap)."""
    admin: str | None = None
    relabelled: bool = False
    """The answers went through the re-labelling gateway."""
    sent: int = 0
    """Requests sent so far: how many pairs calltap must have compared when drained."""
    compares: bool = True
    """calltap compares what it relays here (not so with recording off)."""

    def cpu(self) -> tuple[dict[str, Cpu], tuple[int, int], float]:
        """CPU per role, the machine's (busy, total) ticks, and the time, right now."""
        usage = {role: server.cpu() for role, server in self.servers.items()}
        usage["client"] = own_cpu()
        return usage, machine_ticks(), time.perf_counter()

    def usage_since(self, before: tuple[dict[str, Cpu], tuple[int, int], float]) -> Usage:
        cpu, ticks, now = self.cpu()
        busy, total = (end - start for start, end in zip(before[1], ticks, strict=True))
        return Usage({role: cpu[role] - before[0][role] for role in cpu}, now - before[2],
                     (busy, total))


@contextmanager
def topology(fleet: Fleet, name: str, provider: Server) -> Iterator[Topology]:
    """Start one topology's servers: the proxy first, told a gateway port picked in advance,
    then the gateway on that port, told the proxy's back. Every name but `direct` and
    `pass-through` is a calltap; `RECORDING_OFF` one that records nothing."""
    if name == "direct":
        yield Topology(name, provider.urls["url"], {"provider": provider})
        return
    gateway_url = f"http://127.0.0.1:{free_port()}"
    off = name == RECORDING_OFF
    recordings = fleet.recordings / f"recordings-{provider.name}{'-off' if off else ''}"
    if name == "pass-through":
        proxy = fleet.fake("passthrough", "passthrough", "--gateway", gateway_url,
                           "--provider", provider.urls["url"])
    else:
        settings = {"CALLTAP_COMPARED_PATHS": NOWHERE} if off else None
        proxy = fleet.calltap(gateway_url, provider.urls["url"], recordings, settings)
    started = [proxy]
    try:
        gateway = fleet.fake(f"gateway-{name}", "gateway", "--upstream", proxy.urls["back"],
                             "--port", gateway_url.rsplit(":", 1)[1], "--relabel")
        started.append(gateway)
        servers = {"provider": provider, "gateway": gateway, "proxy": proxy}
        yield Topology(name, proxy.urls["front"], servers, proxy.urls.get("admin"),
                       relabelled=True, compares=not off)
    finally:
        for server in reversed(started):
            fleet.stop(server)


# -- calltap's comparison backlog ------------------------------------------------------------


def comparison_progress(metrics: str) -> tuple[dict[str, float], float]:
    """From calltap's /metrics text: pairs compared by verdict (and those it skipped, shed by
    its comparison backlog, as `skipped`), and capture failures."""
    verdicts: dict[str, float] = {}
    failures = 0.0
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "calltap_pairs_total":
                verdicts[sample.labels["verdict"]] = sample.value
            elif sample.name == "calltap_pairs_skipped_total" and sample.value:
                verdicts["skipped"] = verdicts.get("skipped", 0.0) + sample.value
            elif sample.name == "calltap_capture_failures_total":
                failures = sample.value
    return verdicts, failures


class Backlog:
    """Reads calltap's /metrics (one keep-alive connection) to wait for its comparisons."""

    def __init__(self, session: aiohttp.ClientSession, results: Results) -> None:
        self.session = session
        self.results = results

    async def progress(self, admin: str) -> tuple[dict[str, float], float]:
        """Pairs compared so far by verdict, and capture failures."""
        async with self.session.get(admin + "/metrics") as response:
            text = await response.text()
        return comparison_progress(text)

    async def drained(self, place: Topology) -> float | None:
        """Wait until calltap has compared (or failed to record) every pair it was sent; the
        seconds that took. None for a topology without calltap."""
        if place.admin is None or not place.compares:
            return None
        started = time.perf_counter()
        while True:
            verdicts, failures = await self.progress(place.admin)
            done = sum(verdicts.values()) + failures
            waited = time.perf_counter() - started
            if done >= place.sent or waited > DRAIN_TIMEOUT:
                break
            await asyncio.sleep(DRAIN_POLL)
        if done < place.sent:
            self.results.undrained.append(f"{done:.0f} of {place.sent} pairs compared after"
                                          f" {DRAIN_TIMEOUT:.0f} s")
        self.results.verdicts, self.results.capture_failures = verdicts, failures
        return waited


# -- measuring -----------------------------------------------------------------------------


Places = dict[str, Topology]


async def load(place: Topology, client: LoadClient, requests: int,
               stagger: float = 0.0) -> Outcome:
    place.sent += requests
    return await client.run(requests, stagger)


async def interleave(places: Places, clients: dict[str, LoadClient], into: dict[str, Measured],
                     backlog: Backlog, *, blocks: int, per_block: int, warm_up: int,
                     stagger: float = 0.0) -> None:
    """Warm every topology up, then measure them in turns, block by block, the order rotating:
    a shared machine's load drifts, and every topology should see the same drift. Each block
    is measured from its first request until calltap has compared its last pair."""
    for name, place in places.items():
        await load(place, clients[name], warm_up, stagger)
        await backlog.drained(place)
    names = list(places)
    for block in range(blocks):
        shift = block % len(names)
        for name in names[shift:] + names[:shift]:
            place = places[name]
            before = place.cpu()
            outcome = await load(place, clients[name], per_block, stagger)
            tail = await backlog.drained(place)
            into[name].absorb(outcome, place.usage_since(before), tail)


async def unpaced(places: Places, plan: Plan, backlog: Backlog) -> None:
    """req/s and TTFB at c=1, then at c=concurrency."""
    results = backlog.results
    for concurrency, total, kind in ((1, plan.serial_requests, "serial"),
                                     (plan.concurrency, plan.concurrent_requests, "concurrent")):
        into = {name: getattr(results.throughput.setdefault(name, Throughput()), kind)
                for name in places}
        async with AsyncExitStack() as stack:
            clients = {name: await stack.enter_async_context(
                           LoadClient(place.url, concurrency, results.work, timestamps=False,
                                      relabelled=place.relabelled))
                       for name, place in places.items()}
            await interleave(places, clients, into, backlog, blocks=plan.blocks,
                             per_block=plan.per_block(total),
                             warm_up=max(4, 2 * concurrency))


async def paced(places: Places, plan: Plan, backlog: Backlog) -> None:
    """Per-event latency and CPU per event: rounds of `paced_streams` staggered streams."""
    results = backlog.results
    into = {name: results.paced.setdefault(name, Measured()) for name in places}
    streams = plan.paced_streams
    async with AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(
                       LoadClient(place.url, streams, results.work, timestamps=True,
                                  relabelled=place.relabelled))
                   for name, place in places.items()}
        await interleave(places, clients, into, backlog, blocks=plan.paced_rounds,
                         per_block=streams, warm_up=streams, stagger=plan.pacing)


async def measure(plan: Plan, workdir: Path, env: dict[str, str], recordings: Path,
                  bucket: str | None = None, recording_off: bool = False) -> Results:
    """Both phases, each with its own provider and every topology up at once; with
    `recording_off`, the unpaced phase also measures calltap recording nothing."""
    results = Results(workload(plan.text_events))
    fleet = Fleet(workdir, env, recordings, bucket)
    events = ["--text-events", str(plan.text_events)]
    unpaced_topologies = (*TOPOLOGIES, RECORDING_OFF) if recording_off else TOPOLOGIES
    phases = (
        ("unpaced", events, unpaced, unpaced_topologies),
        ("paced", [*events, "--delay", str(plan.pacing), "--timestamps"], paced, TOPOLOGIES),
    )
    try:
        async with aiohttp.ClientSession() as session:
            backlog = Backlog(session, results)
            for phase, provider_args, run, names in phases:
                console.print(f"[dim]{phase} phase…[/dim]")
                provider = fleet.fake(f"provider-{phase}", "provider", *provider_args)
                with ExitStack() as stack:
                    places = {name: stack.enter_context(topology(fleet, name, provider))
                              for name in names}
                    await run(places, plan, backlog)
                fleet.stop(provider)
    finally:
        fleet.stop_all()
    return results


# -- entry point -------------------------------------------------------------------------------


def loop_name() -> str:
    try:
        import uvloop  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return "asyncio (uvloop not installed)"
    return "uvloop"


def parse_args() -> tuple[Plan, argparse.Namespace]:
    """The plan (the load's sizes), and the options."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests: under a minute")
    parser.add_argument("--requests", type=int, metavar="N",
                        help="requests measured at the high concurrency (c=1 gets N/8)")
    parser.add_argument("--concurrency", type=int, metavar="C", help="the high concurrency (32)")
    parser.add_argument("--paced-streams", type=int, metavar="S",
                        help="concurrent paced streams (64; 8 or fewer:"
                             " the calm case, 1 ms p99 limit)")
    parser.add_argument("--paced-rounds", type=int, metavar="R",
                        help="measured rounds of S paced streams (4; 2 with --quick)")
    parser.add_argument("--recordings", type=Path, metavar="DIR", default=Path.cwd(),
                        help="put calltap's recordings in a temporary directory under DIR"
                             " (default: the working directory; /dev/shm tells the disk's"
                             " cost from calltap's)")
    parser.add_argument("--bucket", action="store_true",
                        help="calltap uploads its pairs to a bucket of a moto S3 server on"
                             " loopback (the recordings directory is then its spool)")
    parser.add_argument("--sustained", action="store_true",
                        help="the sustained and overload mode instead: an open-loop load at 80%%"
                             " and at 150%% of calltap's comparison capacity"
                             " (bench/relay_sustained.py)")
    parser.add_argument("--minutes", type=float, metavar="M",
                        help="with --sustained, the minutes of each run (5; 1 with --quick)")
    parser.add_argument("--recording-off", action="store_true",
                        help="also measure, unpaced, calltap with recording off (compared_paths"
                             " naming nothing): what calltap costs beyond a bare relay without"
                             " recording, pairing and comparing")
    parser.add_argument("--default-malloc", action="store_true",
                        help="run the servers without GLIBC_TUNABLES=" + MALLOC_TUNABLES)
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    if args.requests is not None:
        plan = replace(plan, serial_requests=max(1, args.requests // 8),
                       concurrent_requests=args.requests)
    for name in ("concurrency", "paced_streams", "paced_rounds"):
        if getattr(args, name) is not None:
            plan = replace(plan, **{name: max(1, getattr(args, name))})
    if args.minutes is None:
        args.minutes = 1.0 if args.quick else 5.0
    return plan, args


def _terminate(_signum: int, _frame: object) -> None:
    raise SystemExit(143)


def main() -> int:
    plan, args = parse_args()
    recordings_under: Path = args.recordings
    env = server_env(None if args.default_malloc else MALLOC_TUNABLES)
    signal.signal(signal.SIGTERM, _terminate)
    if args.sustained:
        from relay_sustained import run_sustained  # it builds on this module's topologies
        return run_sustained(plan.text_events, args.minutes, env, recordings_under)
    started = time.perf_counter()
    with (tempfile.TemporaryDirectory(prefix="calltap-relay-bench-") as workdir,
          tempfile.TemporaryDirectory(prefix=".calltap-relay-bench-",
                                      dir=recordings_under) as recordings,
          ExitStack() as store):
        console.print(f"[dim]calltap records under {recordings} (removed at the end)[/dim]")
        bucket = None
        if args.bucket:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            from tests.support.s3 import s3_server  # the suite's moto server, from the repo
            s3 = store.enter_context(s3_server(Path(workdir)))
            env.update(s3.environ)
            bucket = f"s3://{s3.bucket()}"
            console.print(f"[dim]and uploads to {bucket} on {s3.url}[/dim]")
        try:
            results = asyncio.run(measure(plan, Path(workdir), env, Path(recordings), bucket,
                                          args.recording_off))
        except KeyboardInterrupt:
            console.print("[bold red]interrupted[/]: every server stopped")
            return 130
    report = Report(results, plan, console)
    report.print(loop_name(), env.get("GLIBC_TUNABLES", "unset (glibc defaults)"),
                 str(recordings_under))
    console.print(f"[dim]run time {time.perf_counter() - started:.0f} s[/dim]")
    return 1 if report.mismatches() else 0


if __name__ == "__main__":
    sys.exit(main())
