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
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
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
    ready (`/-/ready`) when yielded; stopped (SIGTERM, then SIGKILL) after. A port taken between
    finding it free and binding it is retried on another."""
    binary = require("prometheus")
    config = server_config(workdir, target, interval)
    for attempt in range(3):
        server = _start(binary, config, workdir, attempt)
        try:
            async with aiohttp.ClientSession() as client:
                await _ready(server, client)
        except PortTaken:
            _stop(server.process)
            continue
        except BaseException:
            _stop(server.process)
            raise
        try:
            yield server
        finally:
            _stop(server.process)
        return
    raise RuntimeError("prometheus found no free port in 3 attempts")


class PortTaken(Exception):
    """Prometheus exited because its listen address was in use."""


def _start(binary: str, config: Path, workdir: Path, attempt: int) -> PrometheusServer:
    port = free_port()
    log_path = workdir / f"prometheus-{attempt}.log"
    argv = [binary, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={workdir / f'tsdb-{attempt}'}", "--log.level=info"]
    with log_path.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=workdir,
                                   start_new_session=True)
    return PrometheusServer(process, f"http://127.0.0.1:{port}", log_path)


async def _ready(server: PrometheusServer, client: aiohttp.ClientSession) -> None:
    async with asyncio.timeout(READY_TIMEOUT):
        while True:
            if server.process.poll() is not None:
                log = server.log_path.read_text()
                if "address already in use" in log:
                    raise PortTaken(log[-500:])
                raise RuntimeError(f"prometheus exited: {log[-3000:]}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with client.get(server.url + "/-/ready",
                                      timeout=aiohttp.ClientTimeout(total=2)) as response:
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


PROMQL_KEYWORDS = frozenset({"and", "or", "unless", "bool", "by", "without", "on", "ignoring",
                             "group_left", "group_right", "offset", "inf", "nan"})
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_TOKENS = re.compile(r"(?P<number>0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)"
                     r"|(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?P<call>\s*\()?")
_GRAFANA_VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers outside strings, label
    matchers (`{…}`), ranges and subqueries (`[…]`), label lists (`by (…)`, `on (…)`, …) and
    offsets that are neither a function, an aggregation nor a keyword. Grafana variables
    (`$job`, `${x}`, `$__rate_interval`) are dropped first."""
    if "__name__" in expr:
        raise ValueError(f"a selector by __name__ cannot be checked: {expr}")
    text = _GRAFANA_VARIABLES.sub("", _STRINGS.sub('""', expr))
    text = re.sub(r"\{[^{}]*\}", " ", text)
    text = re.sub(r"\[[^\[\]]*\]", " ", text)
    text = _LABEL_LISTS.sub(" ", text)
    text = re.sub(r"\boffset\s+-?\w+", " ", text)
    names = set()
    for token in _TOKENS.finditer(text):
        name = token.group("name")
        if name and not token.group("call") and name.lower() not in PROMQL_KEYWORDS:
            names.add(name)
    return names


def variable_selector(query: str) -> str:
    """The PromQL inside a Grafana Prometheus variable query: the series selector of
    `label_values(SELECTOR, LABEL)`, the expression of `query_result(EXPR)`; `label_values(LABEL)`
    and `label_names()` select no metric."""
    match = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query)
    if match:
        return match.group(1)
    match = re.fullmatch(r"\s*query_result\((.*)\)\s*", query)
    if match:
        return match.group(1)
    if re.fullmatch(r"\s*(label_values\(\s*\w+\s*\)|label_names\(\s*\))\s*", query):
        return ""
    raise ValueError(f"an unknown kind of variable query: {query}")


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside rows included."""
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))


def dashboard_queries(dashboard: dict[str, Any]) -> dict[str, str]:
    """Every PromQL expression of the dashboard, by where it is (panel title and refId, or
    variable name)."""
    queries = {f"{panel['title']} / {target['refId']}": target["expr"]
               for panel in panels(dashboard["panels"]) for target in panel.get("targets", [])}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            queries[f"variable {variable['name']}"] = variable_selector(text)
    return queries


def grafana_expand(expr: str, rate_interval: str = "1m") -> str:
    """A dashboard expression as Grafana sends it, with every replica of every job selected."""
    return (expr.replace("$__rate_interval", rate_interval).replace("$__range", "1h")
            .replace('=~"$job"', '=~".*"').replace('=~"$instance"', '=~".*"'))
