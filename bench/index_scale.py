"""The index of pairs at fleet scale: 1,000,000 pairs' rows from 10 replicas over 7 UTC days in
a moto S3 bucket on loopback, 100,000 of those pairs fully stored beside them, and what the
readers take to answer from it.

The bucket, as a fleet leaves it a few hours into a day (UTC):
- 100,000 stored pairs, each a pair.json and the client's request (what the view's list reads;
  no response bodies or upload claims), with the proxy's
  time-sortable request ids (`20261205T132943083Z-00000001-25b297`), 16-hex capture ids, four
  routes, six models and a mix of verdicts and codes;
- index rows for 1,000,000 pairs (those 100,000, every tenth row, and 900,000 synthetic pairs
  made the same way but not stored), spread evenly over the six closed days before today and the
  last `--open-hours` (3) hours of today, each row from one of the 10 replicas;
- each closed day as `calltap index compact` leaves it: `--compacted-per-day` (1) segments of
  its rows sorted by start, zstd (written directly: compacting 86,400 per-minute segments of six
  days in moto first would take hours);
- today not compacted yet: each replica sealed a segment a minute and merged its own as it went
  (`calltap.index.tiers`: four of a level into one of the next), so that three hours leave each
  replica six segments or so instead of 180.
Segments are uploaded after the pairs they name, all create-only, 64 requests at once.

Then, each `--runs` (3) times, printed with the median and range:
- the Catalog (`calltap.index.catalog.Catalog`) in this process: refresh cold (empty segment
  cache), a count by code over every row, refresh warm (nothing new), refresh after a restart
  (segments in the cache);
- `calltap view s3://...` as a fresh process with an empty cache (XDG_CACHE_HOME a new
  directory): from the process's start to the first byte of GET /, and from the request to it
  (the request is sent as soon as the port listens);
- GET /?code=CODE the same way, cold (a fresh process), then warm (the same process, again, a
  refresh interval apart);
- for both, from the cold request until the page no longer says older segments are loading
  (every row loaded: counts whole), and the warm requests only after that;
- `calltap scan s3://... --since 7d --json` as a fresh process, wall time;
- the index's bytes a pair: compacted days, today's segments, and overall.

`--baseline SRC` runs the view and scan figures also with the calltap sources at SRC (a worktree
of an earlier commit: `git worktree add /tmp/base 5e23737`, then `--baseline /tmp/base/src`)
against the same bucket, in turns, and prints the ratios. A scan before the index copies and
reads every pair (and has no --since): it runs on buckets of `--baseline-scan` (2,000 and 10,000)
pairs of their own, and its time a pair is extrapolated linearly to `--pairs`.
`--hold` keeps moto and the bucket up after the figures (Ctrl-C ends it), so that other commands
can be run against the same bucket with the AWS variables it prints.

What the index costs the relay:
- `--serve-memory N`: `calltap serve` (the relay benchmark's servers, recordings on /dev/shm)
  relaying N pairs with a segment due every 2 s, its main process's memory (VmRSS and its
  anonymous and file-backed shares, VmHWM) from /proc; with `--baseline`, the earlier
  commit's serve in turns;
- `--relay [relay.py's options]`: bench/relay.py with a segment due every second
  (`--index-interval S` for another pace; that benchmark sets no CALLTAP_* variable itself);
  with `--baseline SRC`, the same run of SRC's calltap (take them in turns).

usage: python bench/index_scale.py [--pairs N] [--rows N] [--runs R] [--baseline SRC] [--hold]
       python bench/index_scale.py --attach s3://BUCKET/PREFIX [--runs R] [--baseline SRC]
       python bench/index_scale.py --serve-memory 2000 [--runs R] [--baseline SRC]
       python bench/index_scale.py --relay --quick --recordings /dev/shm [--baseline SRC]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import orjson

from calltap import recordings
from calltap.index import layout, tiers
from calltap.index.catalog import Catalog
from calltap.index.compaction import REPLICA as COMPACTED_BY
from calltap.index.parquet import connect, encode_lines, row_line
from calltap.index.rows import row_of
from calltap.storage import Storage

ROUTES = (("/v1/chat/completions", "openai.chat", "gpt-4o"),
          ("/v1/chat/completions", "openai.chat", "gpt-4o-mini"),
          ("/v1/messages", "anthropic.messages", "claude-sonnet-4-5"),
          ("/v1/responses", "openai.responses", "gpt-5"),
          ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini", "gemini-2.5-pro"),
          ("/v1/messages", "anthropic.messages", "claude-haiku-4-5"))
OUTCOMES = (("equal", ()), ("equal", ()), ("equal", ()), ("equal", ()),
            ("diverged", (("TOOL_CALLS_DROPPED", "fatal"), ("TOOL_CALL_SET_CHANGED", "fatal"))),
            ("equal", (("TOOL_CALL_IDS_REMAPPED", "cosmetic"),)),
            ("inconclusive", (("SSE_INCOMPLETE_EVENT", "negotiable"),)),
            ("diverged", (("FINISH_REASON_CHANGED", "fatal"),)),
            ("equal", ()), ("diverged", (("TOOL_DROPPED", "fatal"),)))
FILTERED_CODE = "TOOL_CALLS_DROPPED"
"""The code the filter asks for: about one pair in ten has it."""
REFRESH_PAUSE = 1.1
"""Between two warm requests: the view refreshes its list at most every second."""
UPLOADS_AT_ONCE = 64
LOADING = b'id="loading"'
"""On the list page while older segments still load (the list is whole only after it)."""
LOADING_POLL = 0.25


@dataclass(frozen=True, slots=True)
class Plan:
    pairs: int
    rows: int
    replicas: int
    days: int
    open_hours: float
    compacted_per_day: int
    now_ms: int

    @property
    def today(self) -> datetime:
        now = datetime.fromtimestamp(self.now_ms / 1000, UTC)
        return now.replace(hour=0, minute=0, second=0, microsecond=0)

    def spans(self) -> list[tuple[int, int]]:
        """(start, end) ms of the traffic: each closed day whole, then today's open hours."""
        midnight = int(self.today.timestamp() * 1000)
        day_ms = 86_400_000
        closed = [(midnight - day_ms * back, midnight - day_ms * (back - 1))
                  for back in range(self.days - 1, 0, -1)]
        opened = max(midnight, self.now_ms - int(self.open_hours * 3_600_000))
        return [*closed, (opened, self.now_ms - 60_000)]


@dataclass(slots=True)
class Bucket:
    """What was written: the segments' bytes, by kind, and their rows."""

    location: str
    compacted: list[tuple[str, int, int]] = field(default_factory=list)
    """(key, bytes, rows) of the closed days' segments."""
    open: list[tuple[str, int, int]] = field(default_factory=list)
    """(key, bytes, rows) of today's segments, as the replicas leave them."""


# -- the fleet's traffic ----------------------------------------------------------------------


def replica_names(count: int, seed: random.Random) -> list[str]:
    """Pod names, as a Deployment's replicas have them."""
    return [f"calltap-7d9f8b6c4-{''.join(seed.choices('bcdfghjklmnpqrstvwxz2456789', k=5))}"
            for _ in range(count)]


def moments(plan: Plan, seed: random.Random) -> Iterator[int]:
    """`plan.rows` start times (ms), evenly spread over the spans at one rate, in order."""
    spans = plan.spans()
    total = sum(end - start for start, end in spans)
    made = 0
    for index, (start, end) in enumerate(spans):
        count = (plan.rows - made if index == len(spans) - 1
                 else round(plan.rows * (end - start) / total))
        step = (end - start) / max(count, 1)
        for number in range(count):
            yield int(start + step * number + seed.random() * step)
        made += count


def request_id(moment_ms: int, sequence: int, seed: random.Random) -> str:
    """The proxy's minted id: UTC time to the ms, the process's sequence, random hex."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(moment_ms // 1000))
    return f"{stamp}{moment_ms % 1000:03d}Z-{sequence & 0xFFFFFFFF:08x}-{seed.getrandbits(24):06x}"


def iso(moment_ms: float) -> str:
    moment = datetime.fromtimestamp(moment_ms / 1000, UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def document(key: str, moment_ms: int, number: int, seed: random.Random) -> tuple[dict, bytes]:
    """A pair.json as the proxy and its worker write it, and the client's request."""
    path, dialect, model = ROUTES[number % len(ROUTES)]
    verdict, findings = OUTCOMES[seed.randrange(len(OUTCOMES))]
    first_byte = moment_ms + seed.uniform(150, 900)
    finished = first_byte + seed.uniform(400, 12_000)
    size = seed.randrange(1_500, 60_000)

    def leg(file: str, request_file: str) -> dict:
        return {"method": "POST", "path": path, "status": 200,
                "request_headers": {"authorization": "[redacted]"}, "response_headers": {},
                "started_at": iso(moment_ms), "first_byte_at": iso(first_byte),
                "finished_at": iso(finished), "bytes": size, "sha256": None,
                "ended": "complete", "file": file, "request_file": request_file}

    side = {"dialect": dialect, "framing": "sse", "events": size // 180, "bytes": size,
            "choices": 1, "tool_calls": number % 3, "findings": []}
    pair = {"request_id": key, "capture_id": f"{seed.getrandbits(64):016x}", "pairing": "header",
            "attempts": 1, "orphaned": False,
            "legs": {"downstream": leg("downstream.sse", "downstream.request"),
                     "upstream": leg("upstream.sse", "upstream.request")},
            "comparison": {"verdict": verdict, "upstream": side, "downstream": side,
                           "findings": [{"code": code, "severity": severity,
                                         "side": "downstream", "choice": 0, "count": 1,
                                         "position": {"event": 6, "byte": 1180}}
                                        for code, severity in findings]}}
    request = orjson.dumps({"model": model, "stream": True,
                            "messages": [{"role": "user", "content": "What is the weather?"}]})
    return pair, request


@dataclass(slots=True)
class Generated:
    """The rows, as JSON lines, of each segment to write, and the pairs to store."""

    closed: dict[str, list[bytes]] = field(default_factory=lambda: defaultdict(list))
    """Day -> rows."""
    open: dict[tuple[str, int], list[bytes]] = field(default_factory=lambda: defaultdict(list))
    """(replica, minute ms) -> rows of today."""
    stored: list[tuple[str, bytes, bytes]] = field(default_factory=list)
    """(day/key, pair.json, request) of the pairs stored in full."""


def generate(plan: Plan) -> Generated:
    seed = random.Random(20261205)
    replicas = replica_names(plan.replicas, seed)
    sequences = dict.fromkeys(replicas, 0)
    today = plan.today.strftime("%Y-%m-%d")
    every = max(1, plan.rows // plan.pairs)
    out = Generated()
    for number, moment_ms in enumerate(moments(plan, seed)):
        replica = replicas[seed.randrange(len(replicas))]
        sequences[replica] += 1
        key = request_id(moment_ms, sequences[replica], seed)
        day = time.strftime("%Y-%m-%d", time.gmtime(moment_ms // 1000))
        pair, request = document(key, moment_ms, number, seed)
        line = row_line(row_of(pair, request, day=day, stored_as=key, replica=replica))
        if day == today:
            out.open[(replica, moment_ms // 60_000 * 60_000)].append(line)
        else:
            out.closed[day].append(line)
        if number % every == 0 and len(out.stored) < plan.pairs:
            out.stored.append((f"{day}/{key}", recordings.encode_pair(pair), request))
    return out


# -- into the bucket ----------------------------------------------------------------------------


def segments(plan: Plan, made: Generated) -> tuple[list[tuple[str, bytes, int]],
                                                    list[tuple[str, bytes, int]]]:
    """(key, parquet, rows) of the closed days' compacted segments and of today's."""
    db = connect(threads=2)
    compacted, opened = [], []
    sealed_ms = plan.now_ms - 600_000
    for day, lines in sorted(made.closed.items()):
        share = -(-len(lines) // plan.compacted_per_day)
        for part in range(plan.compacted_per_day):
            chunk = lines[part * share:(part + 1) * share]
            key = layout.segment(day, COMPACTED_BY, sealed_ms, f"c{part:02d}{day[-2:]}").key
            compacted.append((key, encode_lines(b"".join(chunk), db), len(chunk)))
    for key, lines in sorted(replicas_leave(plan, made).items()):
        opened.append((key, encode_lines(b"".join(lines), db), len(lines)))
    db.close()
    return compacted, opened


def replicas_leave(plan: Plan, made: Generated) -> dict[str, list[bytes]]:
    """Today's segments as the replicas leave them, by key: each seals a segment a minute and
    merges its own as `calltap.index.tiers` says, after each seal (rows of a merge: its inputs')."""
    today = plan.today.strftime("%Y-%m-%d")
    rows: dict[str, list[bytes]] = {}
    own: dict[str, list[layout.Segment]] = defaultdict(list)
    for (replica, minute), lines in sorted(made.open.items(), key=lambda item: item[0][1]):
        sealed = layout.segment(today, replica, minute + 60_000 + 250, f"{minute // 60_000:08x}")
        rows[sealed.key] = lines
        own[replica].append(sealed)
        while groups := tiers.due(own[replica]):
            for group in groups:
                merge = tiers.merged(group)
                rows[merge.key] = [line for segment in group for line in rows.pop(segment.key)]
                own[replica] = [s for s in own[replica] if s not in group] + [merge]
    return rows


async def upload(location: str, objects: list[tuple[str, bytes]]) -> None:
    storage = Storage(location)
    gate = asyncio.Semaphore(UPLOADS_AT_ONCE)

    async def put(key: str, data: bytes) -> None:
        async with gate:
            await storage.put_new(key, data)
    await asyncio.gather(*(put(key, data) for key, data in objects))


def fill(plan: Plan, location: str) -> Bucket:
    started = time.perf_counter()
    made = generate(plan)
    say(f"generated {plan.rows:,} rows, {len(made.stored):,} stored pairs"
        f" in {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    compacted, opened = segments(plan, made)
    say(f"encoded {len(compacted)} compacted segments and {len(opened)} of today"
        f" in {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    requests = [(f"{key}/{recordings.request_name('downstream')}", request)
                for key, _, request in made.stored]
    asyncio.run(upload(location, requests))
    asyncio.run(upload(location, [(f"{key}/{recordings.PAIR_JSON}", pair)
                                  for key, pair, _ in made.stored]))
    asyncio.run(upload(location, [(key, data) for key, data, _ in compacted + opened]))
    say(f"uploaded {2 * len(made.stored) + len(compacted) + len(opened):,} objects"
        f" in {time.perf_counter() - started:.0f} s")
    return Bucket(location, [(key, len(data), rows) for key, data, rows in compacted],
                  [(key, len(data), rows) for key, data, rows in opened])


# -- measuring ----------------------------------------------------------------------------------


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def environment(cache: Path, source: str | None) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    if source:
        env["PYTHONPATH"] = source
    return env


def get(port: int, path: str) -> tuple[float, float, int, bool]:
    """(first byte, whole answer) in ms, the status, and whether the page says older segments
    are still loading, of one GET on a fresh connection."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                     .encode())
        chunks = [sock.recv(65536)]
        first = time.perf_counter()
        while chunks[-1]:
            chunks.append(sock.recv(65536))
    answer = b"".join(chunks)
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return ((first - started) * 1000, (time.perf_counter() - started) * 1000, status,
            LOADING in answer)


def listening(port: int, process: subprocess.Popen[bytes], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the view exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.005)
    raise RuntimeError("the view never listened")


def view_run(location: str, path: str, source: str | None, warm: int) -> dict[str, float]:
    """A fresh `calltap view` with an empty cache: GET `path` once cold, then `warm` times."""
    cache = Path(tempfile.mkdtemp(prefix="calltap-index-scale-cache-"))
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "calltap", "view", location, "--listen", f"127.0.0.1:{port}"],
        env=environment(cache, source), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        listening(port, process)
        ready = time.perf_counter()
        first, whole, status, loading = get(port, path)
        figures = {"start to listening": (ready - started) * 1000,
                   "start to first byte": (ready - started) * 1000 + first,
                   "request to first byte": first, "request to whole page": whole}
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}")
        while loading:
            time.sleep(LOADING_POLL)
            loading = get(port, path)[3]
        figures["request to every row loaded"] = (time.perf_counter() - ready) * 1000
        runs = []
        for _ in range(warm):
            time.sleep(REFRESH_PAUSE)
            runs.append(get(port, path)[1])
        if runs:
            figures["warm, whole page (median)"] = statistics.median(runs)
        return figures
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(cache, ignore_errors=True)


def scan_run(location: str, source: str | None, since: bool = True) -> dict[str, float]:
    """`calltap scan LOCATION --since 7d --json` (without --since: a command before it had
    one) as a fresh process with an empty cache: its wall time and the pairs it summed up."""
    cache = Path(tempfile.mkdtemp(prefix="calltap-index-scale-cache-"))
    argv = [sys.executable, "-m", "calltap", "scan", location, "--json"]
    try:
        started = time.perf_counter()
        done = subprocess.run(argv + (["--since", "7d"] if since else []),
                              env=environment(cache, source), capture_output=True, check=False)
        elapsed = (time.perf_counter() - started) * 1000
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if done.returncode not in (0, 1, 3):
        error = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"scan exited {done.returncode}: {error[-1] if error else ''}")
    summary = orjson.loads(done.stdout)
    return {"wall": elapsed, "pairs in the summary": float(summary.get("captures")
                                                           or summary.get("pairs") or 0)}


def small_buckets(plan: Plan, location: str, sizes: list[int]) -> list[tuple[int, str]]:
    """`sizes` pairs each under a prefix of their own, no index: for the scan of a baseline
    that reads every pair (its time a pair, extrapolated)."""
    made = []
    for size in sizes:
        small = generate(Plan(size, size, plan.replicas, plan.days, plan.open_hours, 1,
                              plan.now_ms))
        where = f"{location}-scan-{size}"
        asyncio.run(upload(where, [(f"{key}/{recordings.request_name('downstream')}", request)
                                   for key, _, request in small.stored]))
        asyncio.run(upload(where, [(f"{key}/{recordings.PAIR_JSON}", pair)
                                   for key, pair, _ in small.stored]))
        made.append((size, where))
    return made


def catalog_run(location: str) -> dict[str, float]:
    cache = Path(tempfile.mkdtemp(prefix="calltap-index-scale-cache-"))
    try:
        figures: dict[str, float] = {}
        catalog = Catalog(location, cache=cache / "index")
        started = time.perf_counter()
        loaded = catalog.refresh()
        figures["refresh, cold"] = (time.perf_counter() - started) * 1000
        figures["rows loaded"] = loaded.rows
        started = time.perf_counter()
        catalog.query("SELECT count(*) FROM pairs WHERE list_contains(codes, ?)",
                      [FILTERED_CODE])
        figures["count by code, every row"] = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        catalog.refresh()
        figures["refresh, warm (nothing new)"] = (time.perf_counter() - started) * 1000
        catalog.close()
        restarted = Catalog(location, cache=cache / "index")
        started = time.perf_counter()
        restarted.refresh()
        figures["refresh after a restart (cache on disk)"] = (
            time.perf_counter() - started) * 1000
        restarted.close()
        return figures
    finally:
        shutil.rmtree(cache, ignore_errors=True)


# -- serve's memory with the index written -----------------------------------------------------


def serve_memory(requests: int, interval: float, source: str | None) -> dict[str, float]:
    """`calltap serve` relaying `requests` streamed pairs (the relay benchmark's servers,
    recordings on /dev/shm) with an index segment due every `interval` s: its main process's
    VmRSS once started, after the load, and once the segments are written (then also its
    anonymous and file-backed shares: DuckDB's library is mapped from a file), and its VmHWM.
    With `source`, the calltap at SRC (an earlier commit's: no index)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from relay_load import LoadClient, workload
    from relay_procs import free_port as any_port
    from relay_procs import launch_calltap, launch_fake, server_env

    env = {**server_env("glibc.malloc.mmap_threshold=1048576:glibc.malloc.trim_threshold="
                        "8388608"), "CALLTAP_INDEX_INTERVAL": str(interval)}
    if source:
        env["PYTHONPATH"] = source
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="calltap-index-scale-serve-") as work, \
            tempfile.TemporaryDirectory(prefix="calltap-index-scale-", dir="/dev/shm") as shm:
        running = [launch_fake("provider", ["provider", "--text-events", "200"], Path(work),
                               env)]
        try:
            gateway = f"http://127.0.0.1:{any_port()}"
            running.append(launch_calltap(Path(work), env, gateway, running[0].urls["url"],
                                          Path(shm) / "recordings"))
            calltap = running[-1]
            running.append(launch_fake("gateway", ["gateway", "--upstream",
                                                   calltap.urls["back"], "--port",
                                                   gateway.rsplit(":", 1)[1]], Path(work), env))
            time.sleep(2)
            figures["VmRSS started (MB)"] = _status(calltap.pid, "VmRSS")
            asyncio.run(_load(LoadClient(calltap.urls["front"], 8, workload(200),
                                         timestamps=False), requests))
            figures["VmRSS after the load (MB)"] = _status(calltap.pid, "VmRSS")
            time.sleep(3 * interval + 2)
            for name in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                figures[f"{name} after segments (MB)"] = _status(calltap.pid, name)
            figures["segments written"] = float(len(list(
                (Path(shm) / "recordings" / layout.INDEX).glob("day=*/*.parquet"))))
        finally:
            for server in reversed(running):
                server.stop()
    return figures


async def _load(client: object, requests: int) -> None:
    async with client:  # type: ignore[attr-defined]
        for _ in range(requests // 100):
            await client.run(100)  # type: ignore[attr-defined]
            await asyncio.sleep(0.5)


def _status(pid: int, field_name: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def relay_indexed(argv: list[str], interval: float, source: str | None) -> int:
    """bench/relay.py with `argv`, its calltap writing an index segment every `interval` s (the
    relay benchmark passes no CALLTAP_* variable of its own); with `source`, the servers run
    the calltap at SRC."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import relay_procs

    plain = relay_procs.server_env

    def indexed(tunables: str | None) -> dict[str, str]:
        env = {**plain(tunables), "CALLTAP_INDEX_INTERVAL": str(interval)}
        return {**env, "PYTHONPATH": source} if source else env
    relay_procs.server_env = indexed
    import relay  # binds the server_env above

    sys.argv = ["relay.py", *argv]
    return relay.main()


# -- the figures --------------------------------------------------------------------------------

Figures = dict[str, dict[str, list[float]]]
"""Measurement -> figure -> one value a run."""


def measured(figures: Figures, name: str, run: object) -> None:
    """One run of a measurement into `figures` (a failure is said once and skipped)."""
    try:
        values = run() if callable(run) else run
    except (RuntimeError, OSError, orjson.JSONDecodeError) as error:
        if name not in figures:
            say(f"{name}: {error}")
        figures.setdefault(name, {})
        return
    for figure, value in values.items():
        figures.setdefault(name, {}).setdefault(figure, []).append(value)


def measure(location: str, runs: int, baseline: str | None,
            small: list[tuple[int, str]]) -> tuple[Figures, Figures]:
    """Every run of each measurement, with the baseline's (when given) in turns. The
    baseline's scan reads every pair: it runs on the `small` buckets, not on this one."""
    now: Figures = {}
    before: Figures = {}
    sides = [(None, now)] + ([(baseline, before)] if baseline else [])
    for run in range(runs):
        say(f"run {run + 1} of {runs}")
        measured(now, "Catalog (in process)", lambda: catalog_run(location))
        for source, figures in sides:
            measured(figures, "view GET /, cold process",
                     lambda s=source: view_run(location, "/", s, warm=3))
            measured(figures, f"view GET /?code={FILTERED_CODE}, cold process then warm",
                     lambda s=source: view_run(location, f"/?code={FILTERED_CODE}", s, warm=5))
        measured(now, "scan --since 7d --json, cold", lambda: scan_run(location, None))
        for size, where in small if baseline else ():
            measured(before, f"scan --json of {size:,} pairs (no index), cold",
                     lambda w=where: scan_run(w, baseline, since=False))
    return now, before


def show_extrapolated(before: Figures, pairs: int) -> None:
    """The baseline scan's time a pair on the small buckets, and at `pairs` (linear)."""
    for name, values in before.items():
        if not name.startswith("scan --json of") or not values.get("wall"):
            continue
        size = int(name.split()[3].replace(",", ""))
        wall = statistics.median(values["wall"])
        print(f"\n{name}: {_spread(values['wall'])} ms, {wall / size:.2f} ms a pair;"
              f" at {pairs:,} pairs (linear) {wall / size * pairs / 1000:.0f} s")


def show(now: Figures, before: Figures) -> None:
    for name, values in now.items():
        print(f"\n{name}")
        old = before.get(name, {})
        if not values and not old:
            print("  (failed: see above)")
        for figure in sorted(set(values) | set(old), key=list((*values, *old)).index):
            line = f"  {figure:42s} {_spread(values.get(figure))}"
            if figure in old:
                line += f"   before {_spread(old[figure])}"
                if values.get(figure) and old[figure] and statistics.median(old[figure]):
                    ratio = statistics.median(values[figure]) / max(
                        statistics.median(old[figure]), 1e-9)
                    line += f"   x{ratio:.3f}"
            print(line)


def _spread(values: list[float] | None) -> str:
    if not values:
        return f"{'failed':>26s}"
    middle = statistics.median(values)
    return f"{middle:9.1f} ({min(values):.1f}-{max(values):.1f})"


def show_sizes(bucket: Bucket) -> None:
    print("\nthe index's size")
    for name, items in (("compacted days", bucket.compacted),
                        ("today's segments", bucket.open),
                        ("every segment", bucket.compacted + bucket.open)):
        size = sum(item[1] for item in items)
        rows = sum(item[2] for item in items)
        print(f"  {name:30s} {len(items):6,} segments {size / 1e6:9.2f} MB {rows:9,} rows"
              f"  {size / max(rows, 1):6.1f} bytes a pair")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000, help="stored in full (100,000)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="index rows (1,000,000)")
    parser.add_argument("--replicas", type=int, default=10)
    parser.add_argument("--days", type=int, default=7, help="UTC days, today included (7)")
    parser.add_argument("--open-hours", type=float, default=3.0,
                        help="hours of today, not compacted yet (3)")
    parser.add_argument("--compacted-per-day", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", metavar="SRC",
                        help="also run the view and scan from the calltap sources at SRC")
    parser.add_argument("--baseline-scan", metavar="N,N", default="2000,10000",
                        type=lambda text: [int(part) for part in text.split(",")],
                        help="the baseline's scan on buckets of these many pairs (2000,10000)")
    parser.add_argument("--attach", metavar="s3://BUCKET/PREFIX",
                        help="measure a bucket another run filled and holds (its AWS variables"
                             " set), without filling one")
    parser.add_argument("--serve-memory", metavar="N", type=int,
                        help="only serve's memory relaying N pairs with the index written"
                             " (with --baseline: and the earlier commit's serve, in turns)")
    parser.add_argument("--hold", action="store_true",
                        help="keep moto and the bucket up after the figures, until Ctrl-C")
    parser.add_argument("--relay", action="store_true",
                        help="only bench/relay.py (the options this one does not know go to it)"
                             " with an index segment due every second; with --baseline, its"
                             " relay run instead")
    parser.add_argument("--index-interval", type=float, default=1.0, metavar="S",
                        help="with --relay: seconds between two segments (1)")
    args, rest = parser.parse_known_args()
    if args.relay:
        return relay_indexed(rest, args.index_interval, args.baseline)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    plan = Plan(args.pairs, args.rows, args.replicas, args.days, args.open_hours,
                args.compacted_per_day, int(time.time() * 1000))
    if args.serve_memory:
        now, before = {}, {}
        for run in range(args.runs):
            say(f"run {run + 1} of {args.runs}")
            for source, figures in [(None, now)] + ([(args.baseline, before)]
                                                    if args.baseline else []):
                measured(figures, f"serve relaying {args.serve_memory:,} pairs, an index"
                         " segment due every 2 s",
                         lambda s=source: serve_memory(args.serve_memory, 2.0, s))
        show(now, before)
        return 0
    if args.attach:
        now, before = measure(args.attach, args.runs, args.baseline, [])
        show(now, before)
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.s3 import s3_server  # the suite's moto server, from the repo

    with tempfile.TemporaryDirectory(prefix="calltap-index-scale-") as work, \
            s3_server(Path(work)) as s3:
        os.environ.update(s3.environ)
        location = f"s3://{s3.bucket()}/fleet"
        bucket = fill(plan, location)
        print(f"{location}: {args.rows:,} pairs' rows from {args.replicas} replicas over"
              f" {args.days} days ({len(bucket.open):,} segments of today's last"
              f" {args.open_hours:g} hours), {args.pairs:,} pairs stored in full")
        show_sizes(bucket)
        small = small_buckets(plan, location, args.baseline_scan) if args.baseline else []
        now, before = measure(location, args.runs, args.baseline, small)
        show(now, before)
        show_extrapolated(before, args.pairs)
        if args.hold:
            hold(s3.environ, location)
    return 0


def hold(environ: dict[str, str], location: str) -> None:
    """Until Ctrl-C or SIGTERM (a background job ignores SIGINT), then moto is stopped."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print("\nholding the bucket; Ctrl-C or SIGTERM ends it:\n  " + " ".join(
        f"{name}={value}" for name, value in environ.items()) + f"\n  {location}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return


if __name__ == "__main__":
    sys.exit(main())
