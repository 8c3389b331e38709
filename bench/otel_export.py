"""What exporting each pair's span costs calltap's process, against export off in the same run.

calltap builds a pair's span once the pair is compared (on the relay's loop: `pair_compared`),
and its shipper thread encodes the spans to protobuf and posts them to the receiver. Both are
CPU of calltap's process, so both are counted: `time.process_time` (every thread of the process)
over blocks of pairs, each block fed to the export addon and then drained to the receiver, beside
the same blocks with export off (no addon: the pairs are only built). The receiver is a bare
OTLP/HTTP endpoint on loopback in a process of its own (its CPU is not calltap's). Half of the
pairs diverged (two findings, so two evaluation events and an ERROR status), half are equal; each
is on a client's trace of its own. Blocks take turns, so a busy machine slows both alike.

Also, with a receiver that is down (a closed port): what a pair then costs, and that the
loop-side part (`pair_compared`, the only part on the relay's thread) stays what it was.

Then what a receiver in trouble costs the traffic: calltap on the demo's loopback topology (fake
provider, fake gateway, in this process), a streamed chat with two tool calls sent again and
again, each answered and compared, its round trip timed, with export off, to a live receiver, to
a closed port, and to a receiver that accepts connections and never answers (every export waits
its whole timeout); and export off a second time, whose distance from the first is the noise of
the machine. The variants take turns in rounds, each first once.

Prints the CPU per pair (ms) of each, the added CPU per pair (target: at most 0.1 ms) and the
loop-side share; then each variant's round trip, median and p95. Run with
`.venv/bin/python bench/otel_export.py [--pairs 4000] [--requests 150]`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import multiprocessing
import socket
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import aiohttp
import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from calltap.codes import Code
from calltap.demo import loopback
from calltap.fakes import FakeProvider
from calltap.fakes.provider import CHAT_PATH, TOOLS_REQUEST
from calltap.otel.export import OtelExport
from calltap.otel.settings import read_otel
from calltap.proxy.capture import Claim
from calltap.proxy.hooks import Alarm, PairCompared, Recording
from calltap.proxy.relay import Leg
from calltap.transcript import Finding

BLOCK = 500
TARGET_MS = 0.1


def _serve(port: int) -> None:
    async def accept(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(content_type="application/x-protobuf")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/traces", accept)
    web.run_app(app, host="127.0.0.1", port=port, print=None, handle_signals=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _leg(side: str, index: int) -> Leg:
    started = 1_780_000_000.0 + index
    headers = [("traceparent", f"00-{index + 1:032x}-{index + 1:016x}-01")]
    leg = Leg(side, "POST", "/v1/chat/completions", headers if side == "downstream" else [],
              started)
    leg.first_byte_at, leg.finished = started + 0.3, started + 2.0
    leg.status, leg.compared = 200, True
    return leg


def _side(usage: int) -> dict[str, Any]:
    return {"dialect": "openai.chat", "framing": "sse", "events": 204, "bytes": 54_000,
            "choices": 1, "tool_calls": 2, "finish_reasons": ["tool_calls"],
            "usage": {"input_tokens": 820, "output_tokens": usage}, "findings": []}


def pair(index: int) -> PairCompared:
    """A compared pair as the comparison addon hands it on: every other one diverged."""
    diverged = index % 2 == 1
    downstream, upstream = _leg("downstream", index), _leg("upstream", index)
    recording = Recording(f"req-{index}", Claim(Path(f"/recordings/2026-12-05/req-{index}")),
                          "pair", downstream=downstream, attempts=[upstream], pairing="header")
    alarms = [Alarm("divergence", Finding(code, "downstream", 0, 1, detail="missing: clock"),
                    "downstream")
              for code in (Code.TOOL_CALLS_DROPPED, Code.TOOL_CALL_SET_CHANGED)] if diverged else []
    asks = {"dialect": "openai.chat", "model": "gpt-4o-mini", "stream": True, "tools": 2}
    report = {"verdict": "diverged" if diverged else "equal", "upstream": _side(410),
              "downstream": _side(410), "findings": [],
              "requests": {"verdict": "equal", "downstream": asks, "upstream": asks}}
    return PairCompared(recording, {"comparison": report}, "compare", None,
                        verdict=report["verdict"], codes=[str(a.finding.code) for a in alarms],
                        alarms=alarms, chosen=upstream)


def _drained(addon: OtelExport, expected: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while addon.spans.exported + addon.spans.dropped < expected:
        if time.monotonic() > deadline:
            raise SystemExit(f"the receiver took no more than {addon.spans.exported} spans")
        time.sleep(0.02)


def block(addon: OtelExport | None, pairs: list[PairCompared]) -> tuple[float, float]:
    """(CPU of the whole process, CPU of the loop-side calls) for one block, in seconds."""
    started = time.process_time()
    loop_side = 0.0
    if addon is not None:
        before = addon.spans.exported + addon.spans.dropped
        for event in pairs:
            mark = time.thread_time()
            addon.pair_compared(event)
            loop_side += time.thread_time() - mark
        addon.spans.wake()
        _drained(addon, before + len(pairs))
    else:
        for _event in pairs:
            mark = time.thread_time()
            loop_side += time.thread_time() - mark
    return time.process_time() - started, loop_side


def exporter(endpoint: str) -> OtelExport:
    settings = read_otel({"endpoint": endpoint, "timeout": 2.0, "max_queue": 100_000}, {})
    assert settings is not None
    addon = OtelExport(settings, structlog.PrintLogger(io.StringIO()), CollectorRegistry())
    addon.spans.interval = 0.5
    addon.spans.start()
    return addon


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000, help="pairs per variant (default 4000)")
    parser.add_argument("--requests", type=int, default=150,
                        help="relayed requests per variant, in 3 rounds (default 150; 0: none)")
    args = parser.parse_args()
    port = _free_port()
    receiver = multiprocessing.get_context("spawn").Process(target=_serve, args=(port,),
                                                            daemon=True)
    receiver.start()
    try:
        _wait_listening(port)
        run(args.pairs, f"http://127.0.0.1:{port}")
        if args.requests >= 3:
            asyncio.run(relay(args.requests, f"http://127.0.0.1:{port}"))
    finally:
        receiver.terminate()
        receiver.join(5)


def run(count: int, endpoint: str) -> None:
    blocks = [[pair(index) for index in range(start, start + BLOCK)]
              for start in range(0, count, BLOCK)]
    live, dead = exporter(endpoint), exporter("http://127.0.0.1:9")
    block(live, blocks[0])  # warm: the connection, the encoder's first import
    block(dead, blocks[0])
    figures: dict[str, list[tuple[float, float]]] = {"off": [], "on": [], "dead": []}
    for pairs in blocks:
        for name, addon in (("off", None), ("on", live), ("dead", dead)):
            cpu, loop_side = block(addon, pairs)
            figures[name].append((cpu / len(pairs) * 1000, loop_side / len(pairs) * 1000))
    live.spans.close(5)
    dead.spans.close(5)
    off = median(cpu for cpu, _ in figures["off"])
    print(f"{count} pairs per variant, in blocks of {BLOCK}, half of them diverged")
    print(f"{'variant':<26}{'CPU/pair ms':>12}{'best':>8}{'loop-side ms':>14}")
    for name, label in (("off", "export off"), ("on", "export on (live receiver)"),
                        ("dead", "export on (dead receiver)")):
        cpus = [cpu for cpu, _ in figures[name]]
        loop = median(side for _, side in figures[name])
        print(f"{label:<26}{median(cpus):>12.4f}{min(cpus):>8.4f}{loop:>14.4f}")
    added = median(cpu for cpu, _ in figures["on"]) - off
    verdict = "PASS" if added <= TARGET_MS else "MISS"
    print(f"added CPU per pair with export on: {added:.4f} ms (target <= {TARGET_MS} ms) {verdict}")
    print(f"spans exported {live.spans.exported}, dropped {live.spans.dropped}; "
          f"dead receiver: dropped {dead.spans.dropped}, exported {dead.spans.exported}")


async def relay(count: int, live: str) -> None:
    """Round trips through calltap with export off and to receivers alive, closed and hanging."""
    with socket.socket() as hanging:
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(4096)  # connections complete in the kernel and are never answered
        endpoints = {"export off": None, "export off (again)": None, "live receiver": live,
                     "dead receiver (closed port)": "http://127.0.0.1:9",
                     "hanging receiver": f"http://127.0.0.1:{hanging.getsockname()[1]}"}
        times: dict[str, list[float]] = {name: [] for name in endpoints}
        cpu: dict[str, list[float]] = {name: [] for name in endpoints}
        names = list(endpoints)
        for turn in range(3):
            for name in names[turn:] + names[:turn]:  # each variant first once
                measured, spent = await _round_trips(endpoints[name], count // 3)
                times[name] += measured
                cpu[name].append(spent)
    print(f"round trip of a streamed chat through calltap, {count // 3 * 3} per variant"
          " (CPU: this process, calltap and the fakes together, per request)")
    print(f"{'variant':<30}{'median ms':>10}{'p95 ms':>9}{'CPU/request ms':>16}")
    for name, measured in times.items():
        ordered = sorted(measured)
        print(f"{name:<30}{median(ordered) * 1000:>10.2f}"
              f"{ordered[int(len(ordered) * 0.95)] * 1000:>9.2f}{median(cpu[name]) * 1000:>16.3f}")


async def _round_trips(endpoint: str | None, count: int) -> tuple[list[float], float]:
    settings = (read_otel({"endpoint": endpoint, "timeout": 10.0}, {})
                if endpoint is not None else None)
    measured: list[float] = []
    with tempfile.TemporaryDirectory() as recordings:
        async with (loopback(FakeProvider(), Path(recordings), io.StringIO(), compare_workers=1,
                             compare_when_idle=False, otel=settings) as (_gateway, calltap),
                    aiohttp.ClientSession() as client):
            url = f"{calltap.front_url}{CHAT_PATH}"
            cpu_started = 0.0
            for index in range(count + 5):
                if index == 5:  # the first few warm the connections
                    cpu_started = time.process_time()
                headers = {"traceparent": f"00-{index + 1:032x}-{index + 1:016x}-01"}
                started = time.perf_counter()
                async with client.post(url, json=TOOLS_REQUEST, headers=headers) as response:
                    await response.read()
                if index >= 5:
                    measured.append(time.perf_counter() - started)
                await calltap.wait_compared(response.headers["X-Request-ID"], timeout=60)
            spent = (time.process_time() - cpu_started) / count
            await calltap.stop(grace=0.5)
    return measured, spent


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit("the receiver did not start")


if __name__ == "__main__":
    main()
