"""What the deployment tests run: the Debian `prometheus` package's promtool and server (Prometheus
2.42), and the metric names calltap exports, read from calltap's own registry.

The server gets its own config file, storage directory and loopback port under the test's tmp
directory, so it never depends on or collides with a system service the package may have started
on :9090. Without the binaries a test skips with the reason, except under CI
(`CALLTAP_REQUIRE_PROMETHEUS` or `CI` set), where it fails: `.ci/run` installs the package.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from calltap.config import Config
from calltap.proxy.app import Calltap

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "calltap-rules.yaml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "calltap-rules.test.yaml"
DASHBOARD = REPO / "deploy" / "grafana" / "calltap.json"
READY_TIMEOUT = 60.0

SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "enum": ("",),
}
"""The series names prometheus_client's text format gives a metric family of each type."""


def require(tool: str) -> str:
    """The path of `tool` on PATH; a failure under CI, a skip elsewhere, when it is missing."""
    path = shutil.which(tool)
    if path is None:
        reason = f"{tool} missing: apt-get install prometheus (CI installs it in .ci/run)"
        if os.environ.get("CALLTAP_REQUIRE_PROMETHEUS") or os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def exported_names(spool: Path) -> set[str]:
    """Every series name calltap's /metrics can carry, from the registry of a proxy configured
    with every addon that adds metrics (a bucket included); nothing is started or written."""
    config = Config(back=("127.0.0.1", 0), provider="http://127.0.0.1:9", admin=("127.0.0.1", 0),
                    bucket="s3://calltap-metrics/names", recordings=spool)
    tap = Calltap(config, log_stream=io.StringIO())
    return {family.name + suffix for family in tap.metrics.registry.collect()
            for suffix in SUFFIXES[family.type]}


def recorded_names(rules: Path = RULES) -> set[str]:
    """The series the rules file records (`record:`), which a dashboard may query too."""
    document = yaml.safe_load(rules.read_text())
    return {rule["record"] for group in document["groups"] for rule in group["rules"]
            if "record" in rule}


def rule_expressions(rules: Path = RULES) -> dict[str, str]:
    """Each rule's expression by its name (`record` or `alert`)."""
    document = yaml.safe_load(rules.read_text())
    return {rule.get("record") or rule["alert"]: rule["expr"]
            for group in document["groups"] for rule in group["rules"]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PrometheusServer:
    """A running Prometheus and its API."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    async def api(self, client: aiohttp.ClientSession, path: str, **params: str) -> Any:
        async with client.get(f"{self.url}/api/v1/{path}", params=params) as response:
            body = await response.json()
            assert body["status"] == "success", body
            return body["data"]

    async def alerts(self, client: aiohttp.ClientSession) -> list[dict[str, Any]]:
        return (await self.api(client, "alerts"))["alerts"]

    async def query(self, client: aiohttp.ClientSession, expr: str) -> list[dict[str, Any]]:
        return (await self.api(client, "query", query=expr))["result"]

    async def evaluated(self, client: aiohttp.ClientSession, times: int = 1,
                        timeout: float = 60.0) -> None:
        """Return once the rule group has been evaluated `times` more times from now."""
        async with asyncio.timeout(timeout):
            last = await self._last_evaluation(client)
            while times:
                await asyncio.sleep(0.1)
                now = await self._last_evaluation(client)
                if now != last:
                    last, times = now, times - 1

    async def _last_evaluation(self, client: aiohttp.ClientSession) -> str:
        (group,) = (await self.api(client, "rules"))["groups"]
        return str(group["lastEvaluation"])

    async def wait_for(self, client: aiohttp.ClientSession, expr: str,
                       timeout: float = 60.0) -> list[dict[str, Any]]:
        """The result of `expr` once it is not empty."""
        async with asyncio.timeout(timeout):
            while not (result := await self.query(client, expr)):
                await asyncio.sleep(0.2)
        return result


def server_config(workdir: Path, target: str, interval: str) -> Path:
    """A config scraping `target` (host:port) every `interval`, evaluating the repo's rules."""
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "calltap", "static_configs": [{"targets": [target]}]}],
    }
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.asynccontextmanager
async def prometheus(workdir: Path, target: str,
                     interval: str = "1s") -> AsyncIterator[PrometheusServer]:
    """`prometheus` on a free loopback port with its own config and storage under `workdir`,
    ready (`/-/ready`) when yielded; stopped (SIGTERM, then SIGKILL) after."""
    binary = require("prometheus")
    config = server_config(workdir, target, interval)
    port = free_port()
    log_path = workdir / "prometheus.log"
    argv = [binary, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={workdir / 'tsdb'}", "--log.level=info"]
    with log_path.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=workdir,
                                   start_new_session=True)
    server = PrometheusServer(process, f"http://127.0.0.1:{port}", log_path)
    try:
        async with aiohttp.ClientSession() as client:
            await _ready(server, client)
        yield server
    finally:
        _stop(process)


async def _ready(server: PrometheusServer, client: aiohttp.ClientSession) -> None:
    async with asyncio.timeout(READY_TIMEOUT):
        while True:
            if server.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {server.log_path.read_text()[-3000:]}")
            with contextlib.suppress(aiohttp.ClientError):
                async with client.get(server.url + "/-/ready") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
