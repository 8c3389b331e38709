"""Attribution through a real topology: `calltap probe` -> `calltap serve` front -> fake gateway ->
`calltap serve` back -> fake provider. A gateway defect is blamed on the gateway, with the pair's
codes; a provider that answers wrongly (it ignores `const`) is blamed on the provider, the pair
being equal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_probe_cli import calltap_probe

from calltap.fakes import FakeGateway, FakeProvider
from calltap.probe.attribution import PROVIDER_FAULT, attribute
from calltap.probe.probes import PROBES
from calltap.probe.runner import Outcome

READY = 30.0


@asynccontextmanager
async def served(
    workdir: Path, defect: str | None = None, **provider_options: Any
) -> AsyncIterator[dict[str, str]]:
    """`calltap serve` as a subprocess on both sides of a fake gateway; yields its listeners."""
    async with (
        FakeProvider(**provider_options) as provider,
        FakeGateway(defect=defect) as gateway,
    ):
        log = workdir / "calltap.log"
        argv = [sys.executable, "-m", "calltap", "serve", "--front", "127.0.0.1:0",
                "--gateway", gateway.url, "--back", "127.0.0.1:0", "--provider", provider.url,
                "--admin", "127.0.0.1:0", "--recordings", str(workdir / "recordings")]  # fmt: skip
        env = {name: value for name, value in os.environ.items() if not name.startswith("CALLTAP")}
        with log.open("wb") as out:
            process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env=env,
                start_new_session=True,
            )  # fmt: skip
        try:
            urls = await _started(process, log)
            gateway.upstream = urls["back"]
            yield urls
        finally:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def _started(process: subprocess.Popen[bytes], log: Path) -> dict[str, str]:
    async with asyncio.timeout(READY):
        while True:
            for line in log.read_text().splitlines():
                if '"serve.started"' in line:
                    return json.loads(line)
            assert process.poll() is None, log.read_text()[-2000:]
            await asyncio.sleep(0.05)


async def test_a_gateway_defect_is_attributed_to_the_gateway(tmp_path: Path) -> None:
    """Every probe that expects a call fails on the re-typed values; `choice-none`, whose answer
    is text, has nothing to re-type and passes."""
    out = tmp_path / "out"
    async with served(tmp_path, defect="change-two-values") as urls:
        status, printed = await calltap_probe(
            "--base-url", urls["front"], "--admin", urls["admin"], "--output", str(out)
        )
    assert status == 1, printed
    results = orjson.loads((out / "results.json").read_bytes())
    assert [probe["name"] for probe in results["probes"]] == list(PROBES)
    calling = [name for name, probe in PROBES.items() if not probe.forbids]
    for probe in results["probes"]:
        if probe["name"] not in calling:
            assert probe["passed"] and probe["pair"]["verdict"] == "equal", probe
            continue
        assert not probe["passed"]
        pair = probe["pair"]
        assert pair["verdict"] == "diverged", probe
        assert "TOOL_CALL_ARGUMENTS_CHANGED" in pair["codes"]
        assert pair["attribution"].startswith("gateway diverged (")
        assert "TOOL_CALL_ARGUMENTS_CHANGED" in pair["attribution"]
        assert pair["request_id"] in probe["request_ids"]
    assert printed.count("gateway diverged (") == len(calling)
    assert f"{len(PROBES)} of {len(PROBES)} probes looked up through calltap's admin API" in printed


@pytest.mark.parametrize(
    ("name", "defect"),
    [("choice-none", "drop-none-choice"), ("choice-named", "named-choice-required")],
)
async def test_a_changed_tool_choice_is_attributed_to_the_gateway(
    tmp_path: Path, name: str, defect: str
) -> None:
    """The answer is relayed as the provider gave it, so only the requests tell: the pair
    diverges on its request side alone, and the failure is blamed on the gateway."""
    out = tmp_path / "out"
    async with served(tmp_path, defect=defect) as urls:
        status, printed = await calltap_probe(
            "--base-url", urls["front"], "--admin", urls["admin"], "--output", str(out),
            "--only", name,
        )  # fmt: skip
    assert status == 1, printed
    (probe,) = orjson.loads((out / "results.json").read_bytes())["probes"]
    assert not probe["passed"]
    pair = probe["pair"]
    assert pair["verdict"] == "diverged"
    assert pair["codes"] == ["TOOL_CHOICE_CHANGED"]
    assert pair["attribution"] == "gateway diverged (TOOL_CHOICE_CHANGED)"
    assert f"FAIL {name}: " in printed
    assert "gateway diverged (TOOL_CHOICE_CHANGED)" in printed
    (recorded,) = (tmp_path / "recordings").glob(f"*/{pair['request_id']}/pair.json")
    findings = orjson.loads(recorded.read_bytes())["comparison"]["findings"]
    assert [(f["code"], f["side"]) for f in findings] == [("TOOL_CHOICE_CHANGED", "request")]


async def test_a_provider_answering_wrongly_is_attributed_to_the_provider(tmp_path: Path) -> None:
    out = tmp_path / "out"
    async with served(tmp_path, follow_const=False) as urls:
        status, printed = await calltap_probe(
            "--base-url", urls["front"], "--admin", urls["admin"], "--output", str(out),
            "--only", "forced-nested,parallel",
        )  # fmt: skip
    assert status == 1, printed
    results = orjson.loads((out / "results.json").read_bytes())
    for probe in results["probes"]:
        assert not probe["passed"]
        assert probe["pair"]["verdict"] == "equal"
        assert probe["pair"]["attribution"] == PROVIDER_FAULT
    assert printed.count(PROVIDER_FAULT) == 2


async def test_passing_probes_keep_their_equal_pair_without_blame(tmp_path: Path) -> None:
    out = tmp_path / "out"
    async with served(tmp_path) as urls:
        status, printed = await calltap_probe(
            "--base-url", urls["front"], "--admin", urls["admin"], "--output", str(out),
            "--only", "stream-nested",
        )  # fmt: skip
    assert status == 0, printed
    (probe,) = orjson.loads((out / "results.json").read_bytes())["probes"]
    assert probe["pair"]["verdict"] == "equal"
    assert "attribution" not in probe["pair"]


async def test_an_admin_fronting_another_url_lends_no_verdict(tmp_path: Path) -> None:
    outcome = Outcome("forced-echo", False, [], None, "x", ["probe-1"], failed_request_id="probe-1")
    async with served(tmp_path) as urls:
        note = await attribute(
            [outcome], urls["admin"], "http://127.0.0.1:9/v1", explicit=False
        )
    assert note.startswith("http://127.0.0.1:9/v1 is not a calltap front")
    assert outcome.pair is None
