"""`calltap probe` and `calltap replay` with the standard OTEL_* variables set: the run is a span,
and the pairs its requests make (compared by a calltap exporting to the same receiver) are spans
beneath it, on its trace."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import aiohttp
from tests.support.logs import LogLines
from tests.support.otlp import ReceivedSpan, Receiver, otlp_receiver

from calltap.demo import loopback
from calltap.fakes import DEFECT_HEADER, FakeProvider
from calltap.fakes.provider import CHAT_PATH, TOOLS_REQUEST
from calltap.otel.settings import read_otel

SPAN_KIND_INTERNAL = 1
STATUS_ERROR = 2


async def calltap_command(receiver: Receiver, cwd: Path, *args: str) -> int:
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("CALLTAP_", "OTEL_"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "calltap", *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    return await asyncio.wait_for(process.wait(), 120)


def run_and_pairs(receiver: Receiver, name: str) -> tuple[ReceivedSpan, list[ReceivedSpan]]:
    (run,) = [span for span in receiver.spans if span.name == name]
    pairs = [span for span in receiver.spans if span.parent_span_id == run.span_id]
    assert all(span.trace_id == run.trace_id for span in pairs)
    return run, pairs


async def test_a_probe_run_is_the_parent_of_the_pairs_its_probes_made(tmp_path: Path) -> None:
    async with otlp_receiver() as receiver:
        settings = read_otel({"endpoint": receiver.url}, {})
        async with loopback(FakeProvider(), tmp_path / "recordings", LogLines(),
                            compare_workers=1, otel=settings) as (_gateway, calltap):
            exit_code = await calltap_command(
                receiver, tmp_path, "probe", "--base-url", calltap.front_url or "",
                "--only", "forced-echo,stream-echo", "--admin", calltap.admin_url or "",
                "--output", str(tmp_path / "probe-run"))
        assert exit_code == 0
        run, pairs = run_and_pairs(receiver, "calltap probe")
        assert run.kind == SPAN_KIND_INTERNAL and run.parent_span_id == ""
        assert run.attributes["calltap.probe.probes"] == 2
        assert len(pairs) == 2
        assert {span.attributes["calltap.verdict"] for span in pairs} == {"equal"}


async def test_a_replay_run_is_the_parent_of_the_pairs_it_replayed(tmp_path: Path) -> None:
    async with (loopback(FakeProvider(), tmp_path / "recorded", LogLines(),
                         compare_workers=1) as (_gateway, calltap),
                aiohttp.ClientSession() as client,
                client.post(f"{calltap.front_url}{CHAT_PATH}", json=TOOLS_REQUEST,
                            headers={DEFECT_HEADER: "drop-second-call"}) as response):
        await response.read()
        request_id = response.headers["X-Request-ID"]
        await calltap.wait_compared(request_id)
    (pair_dir,) = (tmp_path / "recorded").glob(f"*/{request_id}")
    async with otlp_receiver() as receiver:
        exit_code = await calltap_command(receiver, tmp_path, "replay", str(pair_dir),
                                          "--demo-gateway", "--recordings",
                                          str(tmp_path / "replayed"))
        assert exit_code in (0, 1)
        run, pairs = run_and_pairs(receiver, "calltap replay")
        assert run.kind == SPAN_KIND_INTERNAL
        assert (run.status_code, run.attributes["calltap.replay.diverged"]) == (STATUS_ERROR, 1)
        (pair,) = pairs
        assert pair.status_code == STATUS_ERROR
        assert "TOOL_CALLS_DROPPED" in pair.attributes["calltap.codes"]
