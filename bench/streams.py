"""Whether calltap holds many concurrent streams in bounded memory, and holds back for slow clients.

Everything runs on 127.0.0.1, each server in its own process (bench/relay_servers.py): the fake
provider, the faithful fake gateway, and `python -m calltap serve` between them
(client -> front -> gateway -> back -> provider), recording into a temporary directory under
/var/tmp that is removed at the end. calltap's memory is its resident set (VmRSS in
/proc/<pid>/status), sampled every 50 ms; its descendants (the comparison workers and the
forkserver they come from) are summed apart, since they hold a capture while comparing it, not
while relaying it.

Phase A, many streams: rounds of N concurrent streamed requests, all sent at once, for long
answers (2,000 events by default) paced 10 ms apart as a model would, so every stream stays open
for tens of seconds. Figures: calltap's RSS before the first round (after a warm-up),
its peak during each round, and the increment per concurrent stream; the most front legs seen in
flight at once (calltap's own gauge) shows the streams really overlapped. Every body's sha256 is
checked against the provider's deterministic bytes, and each round waits until calltap has
compared every pair (its /metrics on the admin port).

Phase B, slow readers: K clients ask for long answers from an unpaced provider (about 15 MiB
each) and read them a little at a time (1 KiB, then a 50 ms pause) for a while, then read the
rest at full speed and check the sha256. If calltap buffered what its clients have not taken
yet, its RSS would grow with the bytes still unread; with backpressure it stops reading its
upstream connections instead, and the bytes wait in the kernel's socket queues, where calltap
left them. calltap's RSS is sampled only while the clients read slowly; beside the bytes still
unread by the clients at its peak are those in the kernel's socket queues (every established
socket on the benchmark's ports, from /proc/net/tcp) and, of those, the ones in the receive
queues of calltap's own connections to the gateway and the provider: the direct sign that
calltap stopped reading. The rest was not sent yet by the provider (or sits in the gateway).
calltap's comparison workers are sampled until every pair was compared, as they read whole
captures. Loopback's socket buffers grow to several MiB per socket (up to
4 MiB sending, 32 MiB receiving here), hence long answers. The same clients straight to the
provider are a reference for what one hop leaves in the kernel (the fake provider builds every
answer in memory before writing it, so its own RSS grows with the answers by design).

Verdicts: phase A is bounded when the peak RSS increment per concurrent stream stays under
200 KiB in every round; phase B when calltap's peak RSS growth stays under 10% of the bytes its
clients had not read yet at that moment, and is inconclusive unless calltap left at least
256 KiB per client in its upstream sockets. The servers run with glibc's default malloc
settings, as a deployment would. Exit status 0 whatever the figures, 1 when a body differed
from the provider's, non-zero on a crash; every server is stopped on the way out, Ctrl-C
included.

  .venv/bin/python bench/streams.py            # a few minutes on 2 cores
  .venv/bin/python bench/streams.py --quick    # fewer, shorter streams: under a minute
  .venv/bin/python bench/streams.py --streams 100,300,500 --pace 0.002
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.table import Table
from yarl import URL

from calltap.fakes.provider import CHAT_PATH
from relay import Fleet, Topology, comparison_progress, topology
from relay_load import REQUEST_TIMEOUT, LoadClient, Outcome, Workload, workload
from relay_procs import Server, server_env

SAMPLE_INTERVAL = 0.05
WARM_UP_STREAMS = 8
SETTLE_SECONDS = 1.0
"""Quiet time before a baseline RSS is read."""
DRAIN_TIMEOUT = 180.0
SLOW_READ = 1024
SLOW_PAUSE = 0.05
CLIENT_READ_BUFFER = 16 * 1024
"""The slow clients' aiohttp read buffer: they stop reading their socket beyond 2x this."""
PER_STREAM_LIMIT = 200 * 1024
UNREAD_FRACTION = 0.10
LEFT_UNREAD_MIN = 256 * 1024
"""Phase B shows backpressure when calltap left this much per client in its upstream sockets'
receive queues (twice loopback's default receive buffer)."""
IN_FLIGHT_LINE = re.compile(r'^calltap_streams_in_flight\{leg="downstream"\} (\S+)$', re.MULTILINE)
RECORDINGS_UNDER = Path("/var/tmp")
KIB = 1024
MIB = 1024 * 1024

console = Console(highlight=False, width=None if sys.stdout.isatty() else 132)


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: tuple[int, ...]
    """Phase A: concurrent streams per round."""
    events: int
    pace: float
    slow_clients: int
    slow_events: int
    slow_seconds: float
    direct: bool


FULL = Plan(rounds=(100, 300), events=2000, pace=0.01, slow_clients=50, slow_events=60000,
            slow_seconds=15.0, direct=True)
QUICK = replace(FULL, rounds=(50, 100), events=1000, pace=0.005, slow_clients=10, slow_events=60000,
                slow_seconds=5.0)


# -- reading /proc -------------------------------------------------------------------------


def rss(pid: int) -> int:
    """The resident set of `pid` in bytes (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    match = re.search(r"^VmRSS:\s+(\d+) kB$", status, re.MULTILINE)
    return int(match[1]) * KIB if match else 0


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, from /proc/<pid>/task/<tid>/children."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                pids = [int(child) for child in children.read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                continue
            found += pids
            pending += pids
    return found


def socket_queues(ports: frozenset[int], upstreams: frozenset[int]) -> tuple[int, int]:
    """Bytes the kernel holds in transit between the processes: in the send and receive queues
    of every established loopback TCP socket with an end on one of `ports`, and of those, in
    the receive queues of the connections to `upstreams` (left unread by their client)."""
    total = inbound = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, queues = fields[1], fields[2], fields[3], fields[4]
        if state != "01":
            continue
        remote_port = int(remote.rsplit(":", 1)[1], 16)
        if int(local.rsplit(":", 1)[1], 16) in ports or remote_port in ports:
            sent, received = (int(queue, 16) for queue in queues.split(":"))
            total += sent + received
            if remote_port in upstreams:
                inbound += received
    return total, inbound


def ports_of(servers: dict[str, Server]) -> frozenset[int]:
    """Every port the servers announced (the clients' ports are the other end)."""
    urls = [url for server in servers.values() for url in server.urls.values()
            if isinstance(url, str) and url.startswith("http")]
    return frozenset(port for port in (URL(url).port for url in urls) if port is not None)


@dataclass(frozen=True, slots=True)
class Sample:
    rss: int
    children_rss: int
    extra: dict[str, float]


@dataclass(slots=True)
class Sampler:
    """Samples one process's RSS, its descendants' and `probe()`'s figures until stopped."""

    pid: int
    probe: Callable[[], dict[str, float]] = dict
    samples: list[Sample] = field(default_factory=list)

    def take(self) -> Sample:
        children = sum(rss(child) for child in descendants(self.pid))
        sample = Sample(rss(self.pid), children, self.probe())
        self.samples.append(sample)
        return sample

    @contextmanager
    def running(self) -> Iterator[Sampler]:
        async def loop() -> None:
            while True:
                self.take()
                await asyncio.sleep(SAMPLE_INTERVAL)

        task = asyncio.get_running_loop().create_task(loop())
        try:
            yield self
        finally:
            task.cancel()

    @property
    def peak(self) -> Sample:
        """The sample with the highest RSS; of equal ones the last (the least unread)."""
        return max(reversed(self.samples), key=lambda sample: sample.rss)

    @property
    def children_peak(self) -> int:
        return max(sample.children_rss for sample in self.samples)


# -- calltap's admin port ------------------------------------------------------------------


class Admin:
    """calltap's /metrics: pairs compared, capture failures, front (downstream) legs in flight."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url + "/metrics"
        self.in_flight = 0.0

    async def metrics(self) -> str:
        async with self.session.get(self.url) as response:
            return await response.text()

    async def watch_in_flight(self) -> None:
        """Keep `in_flight` at the most front legs seen at once, until cancelled."""
        while True:
            match = IN_FLIGHT_LINE.search(await self.metrics())
            if match:
                self.in_flight = max(self.in_flight, float(match[1]))
            await asyncio.sleep(SAMPLE_INTERVAL * 2)

    async def done(self) -> tuple[float, float]:
        """(pairs compared, capture failures) so far."""
        verdicts, failures = comparison_progress(await self.metrics())
        return sum(verdicts.values()), failures

    async def drained(self, sent: int) -> tuple[float, float]:
        """Wait until calltap has compared (or failed to record) `sent` pairs."""
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while True:
            compared, failures = await self.done()
            if compared + failures >= sent or time.monotonic() > deadline:
                return compared, failures
            await asyncio.sleep(0.1)


async def settled_rss(pid: int) -> int:
    await asyncio.sleep(SETTLE_SECONDS)
    return rss(pid)


# -- phase A: many streams -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Round:
    streams: int
    baseline: int
    before: int
    peak: Sample
    children_peak: int
    in_flight: float
    seconds: float

    @property
    def per_stream(self) -> float:
        return (self.peak.rss - self.baseline) / self.streams


@dataclass(slots=True)
class ManyStreams:
    work: Workload
    rounds: list[Round] = field(default_factory=list)
    outcome: Outcome = field(default_factory=Outcome)
    compared: float = 0.0
    failures: float = 0.0
    sent: int = 0

    @property
    def bounded(self) -> bool:
        return all(round_.per_stream < PER_STREAM_LIMIT for round_ in self.rounds)


async def many_streams(place: Topology, plan: Plan, session: aiohttp.ClientSession,
                       ) -> ManyStreams:
    assert place.admin is not None
    figures = ManyStreams(workload(plan.events))
    admin = Admin(session, place.admin)
    pid = place.servers["proxy"].pid

    async def load(streams: int) -> None:
        async with LoadClient(place.url, streams, figures.work, timestamps=False) as client:
            figures.outcome.absorb(await client.run(streams))
        figures.sent += streams
        figures.compared, figures.failures = await admin.drained(figures.sent)

    await load(WARM_UP_STREAMS)
    baseline = await settled_rss(pid)
    for streams in plan.rounds:
        before = await settled_rss(pid)
        admin.in_flight = 0.0
        sampler = Sampler(pid)
        watcher = asyncio.get_running_loop().create_task(admin.watch_in_flight())
        started = time.perf_counter()
        try:
            with sampler.running():
                await load(streams)
        finally:
            watcher.cancel()
        figures.rounds.append(Round(streams, baseline, before, sampler.peak,
                                    sampler.children_peak, admin.in_flight,
                                    time.perf_counter() - started))
    return figures


# -- phase B: slow readers -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SlowRun:
    target: str
    baseline: int
    peak: Sample
    mismatches: list[str]

    @property
    def growth(self) -> int:
        return self.peak.rss - self.baseline

    @property
    def unread(self) -> float:
        return self.peak.extra["unread"]

    @property
    def kernel(self) -> float:
        return self.peak.extra["kernel"]

    @property
    def left_unread(self) -> float:
        return self.peak.extra["left_unread"]

    @property
    def upstream(self) -> float:
        """Unread bytes neither in the kernel's queues nor in the watched process's growth:
        not yet sent by the provider (or in the gateway's buffers)."""
        return max(0.0, self.unread - self.kernel - self.growth)


async def slow_readers(target: str, url: str, watched: Server, ports: frozenset[int],
                       upstreams: frozenset[int], work: Workload, plan: Plan) -> SlowRun:
    """`slow_clients` streams read 1 KiB per 50 ms for `slow_seconds`, then to the end."""
    clients = plan.slow_clients
    read = [0] * clients
    mismatches: list[str] = []
    hurry = asyncio.Event()
    endpoint = url.rstrip("/") + CHAT_PATH

    def probe() -> dict[str, float]:
        kernel, left_unread = socket_queues(ports, upstreams)
        return {"unread": float(work.answer_bytes * clients - sum(read)),
                "kernel": float(kernel), "left_unread": float(left_unread)}

    async def client(session: aiohttp.ClientSession, number: int) -> None:
        body = work.bodies[number % len(work.bodies)]
        expected = work.digests[number % len(work.digests)]
        digest = hashlib.sha256()
        async with session.post(endpoint, data=body,
                                headers={"Content-Type": "application/json"}) as response:
            while not hurry.is_set():
                chunk = await response.content.read(SLOW_READ)
                if not chunk:
                    break
                digest.update(chunk)
                read[number] += len(chunk)
                await asyncio.sleep(SLOW_PAUSE)
            async for chunk in response.content.iter_any():
                digest.update(chunk)
                read[number] += len(chunk)
            status = response.status
        if status != 200 or digest.hexdigest() != expected:
            mismatches.append(f"{target}: stream {number}: status {status}, {read[number]}"
                              f" bytes, sha256 {digest.hexdigest()[:16]}… expected"
                              f" {expected[:16]}…")

    baseline = await settled_rss(watched.pid)
    sampler = Sampler(watched.pid, probe)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT + plan.slow_seconds),
        auto_decompress=False, read_bufsize=CLIENT_READ_BUFFER,
    ) as session:
        streams = asyncio.gather(*(client(session, number) for number in range(clients)))
        with sampler.running():
            try:
                await asyncio.wait_for(asyncio.shield(streams), plan.slow_seconds)
            except TimeoutError:
                hurry.set()
        await streams
    return SlowRun(target, baseline, sampler.peak, mismatches)


@dataclass(slots=True)
class SlowReaders:
    work: Workload
    clients: int
    runs: list[SlowRun] = field(default_factory=list)
    compared: float = 0.0
    failures: float = 0.0
    workers_peak: int = 0
    """calltap's descendants' RSS from the first slow request until every pair was compared."""

    @property
    def calltap(self) -> SlowRun:
        return self.runs[0]

    @property
    def pushed_back(self) -> bool:
        """Whether calltap stopped reading its upstreams: at least LEFT_UNREAD_MIN per client in
        the receive queues of its upstream connections. Otherwise its clients' socket buffers
        absorbed the answers and the run says little about calltap's backpressure."""
        return self.calltap.left_unread >= LEFT_UNREAD_MIN * self.clients

    @property
    def bounded(self) -> bool:
        return self.calltap.growth < UNREAD_FRACTION * self.calltap.unread


async def slow_phase(place: Topology, provider: Server, plan: Plan,
                     session: aiohttp.ClientSession) -> SlowReaders:
    assert place.admin is not None
    figures = SlowReaders(workload(plan.slow_events), plan.slow_clients)
    admin = Admin(session, place.admin)
    async with LoadClient(place.url, 2, figures.work, timestamps=False) as client:
        warm_up = await client.run(2)
    upstreams = ports_of({"gateway": place.servers["gateway"], "provider": provider})
    workers = Sampler(place.servers["proxy"].pid)
    with workers.running():
        figures.runs.append(await slow_readers("calltap", place.url, place.servers["proxy"],
                                               ports_of(place.servers), upstreams, figures.work,
                                               plan))
        figures.compared, figures.failures = await admin.drained(2 + plan.slow_clients)
    figures.workers_peak = workers.children_peak
    figures.runs[0].mismatches.extend(warm_up.mismatches)
    if plan.direct:
        figures.runs.append(await slow_readers("direct", provider.urls["url"], provider,
                                               ports_of({"provider": provider}), frozenset(),
                                               figures.work, plan))
    return figures


# -- report --------------------------------------------------------------------------------


def size(value: float) -> str:
    return f"{value / MIB:,.1f} MiB" if abs(value) >= MIB else f"{value / KIB:,.0f} KiB"


def verdict(bounded: bool, criterion: str) -> str:
    return f"[bold green]bounded[/]: {criterion}" if bounded else (
        f"[bold red]NOT bounded[/]: {criterion}")


def report_many(figures: ManyStreams, plan: Plan) -> None:
    table = Table(title=f"Phase A: concurrent streams through calltap ({plan.events} events,"
                        f" {size(figures.work.answer_bytes)} per answer,"
                        f" pace {plan.pace * 1000:g} ms)")
    for column in ("streams", "front legs in flight (max)", "seconds", "RSS baseline",
                   "RSS before round", "RSS peak", "increment", "per stream",
                   "workers' RSS peak"):
        table.add_column(column, justify="right")
    for round_ in figures.rounds:
        table.add_row(str(round_.streams), f"{round_.in_flight:.0f}", f"{round_.seconds:.1f}",
                      size(round_.baseline), size(round_.before), size(round_.peak.rss),
                      size(round_.peak.rss - round_.baseline), size(round_.per_stream),
                      size(round_.children_peak))
    console.print(table)
    outcome = figures.outcome
    console.print(f"bodies checked: {outcome.requests} (mismatches: {len(outcome.mismatches)});"
                  f" pairs compared by calltap: {figures.compared:.0f} of {figures.sent}"
                  f" (capture failures: {figures.failures:.0f})")
    worst = max(round_.per_stream for round_ in figures.rounds)
    console.print("Phase A " + verdict(
        figures.bounded, f"peak RSS increment per concurrent stream {size(worst)}"
                         f" (limit {size(PER_STREAM_LIMIT)})"))


def report_slow(figures: SlowReaders, plan: Plan) -> None:
    table = Table(title=f"Phase B: {plan.slow_clients} slow readers ({SLOW_READ} B per"
                        f" {SLOW_PAUSE * 1000:g} ms for {plan.slow_seconds:g} s),"
                        f" {size(figures.work.answer_bytes)} per answer, provider unpaced")
    for column in ("target", "RSS baseline", "RSS peak", "growth", "unread by clients at peak",
                   "in kernel socket queues", "of which calltap left unread",
                   "rest: not yet sent upstream", "growth / unread"):
        table.add_column(column, justify="right")
    for run in figures.runs:
        name = run.target if run.target == "calltap" else "direct to provider (reference)"
        table.add_row(name, size(run.baseline), size(run.peak.rss), size(run.growth),
                      size(run.unread), size(run.kernel),
                      size(run.left_unread) if run.target == "calltap" else "-",
                      size(run.upstream) if run.target == "calltap" else "-",
                      f"{run.growth / run.unread:.1%}" if run.unread else "-")
    console.print(table)
    console.print(f"pairs compared by calltap: {figures.compared:.0f} of"
                  f" {plan.slow_clients + 2} (capture failures: {figures.failures:.0f});"
                  f" its comparison workers' RSS peak until then: {size(figures.workers_peak)}")
    run = figures.calltap
    criterion = (f"calltap's peak RSS growth {size(run.growth)}"
                 f" ({size(run.growth / plan.slow_clients)} per slow stream) vs"
                 f" {size(run.unread)} unread by its clients (limit {UNREAD_FRACTION:.0%} of"
                 f" unread), {size(run.left_unread)} left unread in its upstream sockets")
    if not figures.pushed_back:
        console.print("Phase B [bold yellow]inconclusive[/]: calltap's upstream sockets held"
                      f" less than {size(LEFT_UNREAD_MIN)} per client, so its downstream"
                      f" buffers absorbed the answers ({criterion}); try a larger --slow-events")
    else:
        console.print("Phase B " + verdict(figures.bounded, criterion))


def mismatches(many: ManyStreams, slow: SlowReaders) -> list[str]:
    return many.outcome.mismatches + [line for run in slow.runs for line in run.mismatches]


# -- entry point ---------------------------------------------------------------------------


async def measure(plan: Plan, workdir: Path, recordings: Path,
                  ) -> tuple[ManyStreams, SlowReaders]:
    fleet = Fleet(workdir, server_env(None), recordings)
    try:
        async with aiohttp.ClientSession() as session:
            console.print(f"[dim]phase A: rounds of {', '.join(map(str, plan.rounds))}"
                          " concurrent streams…[/dim]")
            pacing = ["--delay", str(plan.pace)] if plan.pace else []
            provider = fleet.fake("provider-many", "provider", "--text-events",
                                  str(plan.events), *pacing)
            with topology(fleet, "calltap", provider) as place:
                many = await many_streams(place, plan, session)
            fleet.stop(provider)
            console.print(f"[dim]phase B: {plan.slow_clients} slow readers…[/dim]")
            provider = fleet.fake("provider-slow", "provider", "--text-events",
                                  str(plan.slow_events))
            with topology(fleet, "calltap", provider) as place:
                slow = await slow_phase(place, provider, plan, session)
    finally:
        fleet.stop_all()
    return many, slow


def parse_args() -> Plan:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer, shorter streams: < 1 min")
    parser.add_argument("--streams", metavar="N,N", help="phase A rounds (100,300)")
    parser.add_argument("--events", type=int, metavar="E", help="phase A events per answer")
    parser.add_argument("--pace", type=float, metavar="S",
                        help="phase A: seconds between the provider's events (0.01)")
    parser.add_argument("--slow-clients", type=int, metavar="K", help="phase B clients (50)")
    parser.add_argument("--slow-events", type=int, metavar="E",
                        help="phase B events per answer (60000, about 15 MiB)")
    parser.add_argument("--slow-seconds", type=float, metavar="S",
                        help="phase B: how long the clients read slowly (15)")
    parser.add_argument("--no-direct", action="store_true",
                        help="skip phase B's reference run straight to the provider")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    if args.streams:
        plan = replace(plan, rounds=tuple(int(n) for n in args.streams.split(",")))
    for name in ("events", "pace", "slow_clients", "slow_events", "slow_seconds"):
        if getattr(args, name) is not None:
            plan = replace(plan, **{name: getattr(args, name)})
    return replace(plan, direct=plan.direct and not args.no_direct)


def _terminate(_signum: int, _frame: object) -> None:
    raise SystemExit(143)


def main() -> int:
    plan = parse_args()
    signal.signal(signal.SIGTERM, _terminate)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="calltap-streams-bench-",
                                     dir=RECORDINGS_UNDER) as scratch:
        workdir, recordings = Path(scratch, "logs"), Path(scratch, "recordings")
        workdir.mkdir()
        recordings.mkdir()
        console.print(f"[dim]calltap records under {recordings} (removed at the end)[/dim]")
        try:
            many, slow = asyncio.run(measure(plan, workdir, recordings))
        except KeyboardInterrupt:
            console.print("[bold red]interrupted[/]: every server stopped")
            return 130
    report_many(many, plan)
    report_slow(slow, plan)
    console.print(f"[dim]run time {time.perf_counter() - started:.0f} s[/dim]")
    wrong = mismatches(many, slow)
    for line in wrong[:20]:
        console.print(f"[bold red]BODY MISMATCH[/] {line}")
    if wrong:
        console.print(f"[bold red]{len(wrong)} bodies differed from the provider's[/]")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
