"""The Prometheus rules, checked by the real promtool and evaluated by a real Prometheus server
scraping a real `calltap serve` (the Debian `prometheus` package, 2.42)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from tests.deploy.prom_helpers import (
    DASHBOARD,
    RULE_TESTS,
    RULES,
    PrometheusServer,
    dashboard_queries,
    grafana_expand,
    prometheus,
    require,
    rule_expressions,
)
from tests.reliability.harness import Served, launch

from calltap.codes import SEVERITY, Severity
from calltap.fakes import CHAT_PATH, DEFECT_HEADER, TOOLS_REQUEST, FakeGateway, FakeProvider

ALERT_TIMEOUT = 30.0
"""Scrape and evaluation every second: the alert is due within a few seconds of the pair."""


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require("promtool"), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def alert_names() -> set[str]:
    return {name for name in rule_expressions() if not name.startswith("calltap:")}


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rule_expressions())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    started = time.monotonic()
    result = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    print(f"promtool test rules: {time.monotonic() - started:.2f} s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_unit_tests_show_every_alert_firing_and_silent() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    cases = [case for test in tests for case in test.get("alert_rule_test", [])]
    firing = {case["alertname"] for case in cases if case["exp_alerts"]}
    silent = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert firing == alert_names()
    assert silent == alert_names()


def test_unit_tests_catch_a_missed_first_divergence(tmp_path: Path) -> None:
    """Without the `_created` branch, the first divergence of a code (a series born at 1) never
    fires: the unit tests must say so."""
    rules = RULES.read_text()
    blind = re.sub(r"calltap_\w+_total and \(time\(\) - calltap_\w+_created < 300\)\n\s+or ",
                   "", rules)
    assert blind != rules
    (tmp_path / RULES.name).write_text(blind)
    (tmp_path / RULE_TESTS.name).write_text(RULE_TESTS.read_text())
    result = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert result.returncode == 1
    assert "first divergence of a code fires at once" in result.stdout + result.stderr


ALERTS_BY_SEVERITY = {
    "critical": {"CalltapDivergence": '!="request"', "CalltapRequestDivergence": '="request"'},
    "warning": {"CalltapUsageDivergence": None, "CalltapRequestNegotiable": '="request"'},
}
"""The divergence alerts, each with its `side` matcher (None: none). CalltapDivergence's
`!="request"` also matches series of calltap versions that had no `side` label."""


def codes_of(expression: str, operator: str) -> set[str]:
    """The codes a divergence rule's `code` matcher lists (`=~` or `!~`)."""
    (matched,) = re.findall(rf'code{operator}"([^"]+)"', expression)
    return set(matched.split("|"))


def test_warnings_name_the_negotiable_codes_and_critical_alerts_exclude_them() -> None:
    """The rules tell negotiable codes (a warning) from fatal ones (critical) by name: the lists
    must be calltap's own. The warnings name calltap's negotiable codes, the usage ones on the
    answer side and the others on the request side; each critical alert excludes all of them, so
    every fatal code pages and no negotiable one does, whichever side it is on."""
    negotiable = {str(code) for code, severity in SEVERITY.items()
                  if severity is Severity.NEGOTIABLE}
    usage = {code for code in negotiable if code.startswith("USAGE_")}
    assert usage and usage != negotiable
    expressions = rule_expressions()
    for alerts in ALERTS_BY_SEVERITY.values():
        for name, side in alerts.items():
            sides = re.findall(r'side(!?="[^"]*")', expressions[name])
            assert sides == ([] if side is None else [side]), name
    assert codes_of(expressions["CalltapUsageDivergence"], "=~") == usage
    assert codes_of(expressions["CalltapRequestNegotiable"], "=~") == negotiable - usage
    for name in ALERTS_BY_SEVERITY["critical"]:
        assert codes_of(expressions[name], "!~") == negotiable, name
        assert "code=~" not in expressions[name], name
    divergence_alerts = {name for name, expr in expressions.items()
                         if "calltap:divergences:" in expr and name in alert_names()}
    assert divergence_alerts == set(ALERTS_BY_SEVERITY["critical"]) | set(
        ALERTS_BY_SEVERITY["warning"])
    severities = {rule["alert"]: rule["labels"]["severity"]
                  for group in yaml.safe_load(RULES.read_text())["groups"]
                  for rule in group["rules"] if "alert" in rule}
    for severity, alerts in ALERTS_BY_SEVERITY.items():
        assert {severities[name] for name in alerts} == {severity}


def test_unit_tests_catch_a_request_finding_paging_as_an_answer(tmp_path: Path) -> None:
    """Without its `side` matcher, CalltapDivergence fires for a request finding too: the unit
    tests must say so."""
    rules = RULES.read_text()
    blind = rules.replace('{side!="request",', "{", 1)
    assert blind != rules
    (tmp_path / RULES.name).write_text(blind)
    (tmp_path / RULE_TESTS.name).write_text(RULE_TESTS.read_text())
    result = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert result.returncode == 1
    assert "a fatal request finding fires the request alert" in result.stdout + result.stderr


@dataclass
class Watched:
    """`calltap serve` between the fake gateway and provider, scraped by a real Prometheus."""

    calltap: Served
    server: PrometheusServer
    client: aiohttp.ClientSession

    @property
    def target(self) -> str:
        return self.calltap.urls["admin"].removeprefix("http://")

    async def send(self, defect: str | None) -> bytes:
        return await send(self.client, self.calltap.urls["front"], defect)


@contextlib.asynccontextmanager
async def watched(workdir: Path, **settings: Any) -> AsyncIterator[Watched]:
    require("prometheus")
    async with FakeProvider() as provider, FakeGateway() as gateway:
        calltap = await launch(workdir, workdir / "recordings", gateway=gateway.url,
                               provider=provider.url, settings=settings)
        try:
            gateway.upstream = calltap.urls["back"]
            target = calltap.urls["admin"].removeprefix("http://")
            async with prometheus(workdir, target) as server, aiohttp.ClientSession() as client:
                yield Watched(calltap, server, client)
        finally:
            calltap.end()


async def test_a_dropped_call_raises_the_divergence_alert_in_prometheus(
        tmp_path: Path) -> None:
    """A real Prometheus scrapes `calltap serve` every second and evaluates the repo's rules: a
    faithful pair raises nothing; one request whose second parallel call the gateway drops raises
    CalltapDivergence for TOOL_CALLS_DROPPED (and TOOL_CALL_SET_CHANGED) within seconds, and
    every query of the Grafana dashboard evaluates on that server, its divergence panels showing
    both codes."""
    started = time.monotonic()
    async with watched(tmp_path) as run:
        server, client, target = run.server, run.client, run.target
        await run.send(defect=None)
        await server.wait_for(client, 'calltap_pairs_total{verdict="equal"} == 1')
        await server.evaluated(client, times=2)
        assert await server.alerts(client) == []
        sent = time.monotonic()
        await run.send(defect="drop-second-call")
        seen = await watch_alert(server, client, sent, "CalltapDivergence",
                                 {"code": "TOOL_CALLS_DROPPED"}, until="firing")
        alerts = await server.alerts(client)
        panels = await dashboard_results(server, client)
    print(f"e2e: {time.monotonic() - started:.1f} s; defect request to pending "
          f"{seen['pending']:.2f} s, to firing {seen['firing']:.2f} s")
    firing = {(a["labels"]["alertname"], a["labels"]["code"]): a for a in alerts}
    assert set(firing) == {("CalltapDivergence", "TOOL_CALLS_DROPPED"),
                           ("CalltapDivergence", "TOOL_CALL_SET_CHANGED")}
    dropped = firing[("CalltapDivergence", "TOOL_CALLS_DROPPED")]
    assert dropped["state"] == "firing"
    assert dropped["labels"]["severity"] == "critical"
    assert dropped["labels"]["instance"] == target
    assert dropped["annotations"]["summary"] == (
        f"TOOL_CALLS_DROPPED in 1 pair(s) on {target}: "
        "the gateway changed what the provider answered")
    assert dropped["annotations"]["runbook"] == "docs/alerts.md#calltapdivergence"
    by_code = panels["Divergences in the last 5 minutes, by code, route and side / A"]
    assert {(series["metric"]["code"], series["metric"]["route"], series["metric"]["side"])
            for series in by_code} == {
        ("TOOL_CALLS_DROPPED", "/chat/completions", "downstream"),
        ("TOOL_CALL_SET_CHANGED", "/chat/completions", "downstream")}
    alert_table = panels["calltap alerts now / A"]
    assert {series["metric"]["code"] for series in alert_table} == {
        "TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED"}


async def dashboard_results(server: PrometheusServer,
                            client: aiohttp.ClientSession) -> dict[str, list[dict[str, Any]]]:
    """Every query of the Grafana dashboard, run by the server as Grafana would send it: each
    must parse and evaluate (the server answers `success`, else `api` fails)."""
    dashboard = json.loads(DASHBOARD.read_text())
    return {where: await server.query(client, grafana_expand(expr))
            for where, expr in dashboard_queries(dashboard).items()}


async def send(client: aiohttp.ClientSession, front: str, defect: str | None) -> bytes:
    headers = {"Content-Type": "application/json"}
    if defect is not None:
        headers[DEFECT_HEADER] = defect
    async with client.post(front + CHAT_PATH, data=orjson.dumps(TOOLS_REQUEST),
                           headers=headers) as reply:
        assert reply.status == 200
        return await reply.read()


async def watch_alert(server: PrometheusServer, client: aiohttp.ClientSession, sent: float,
                      name: str, labels: dict[str, str], until: str) -> dict[str, float]:
    """Seconds from `sent` until alert `name` with `labels` was first seen in each state
    (`pending`; `firing`, which an alert with `for: 0m` reaches without a pending phase) up to
    state `until`, polling every 50 ms."""
    seen: dict[str, float] = {}
    deadline = sent + ALERT_TIMEOUT
    while until not in seen:
        assert time.monotonic() < deadline, f"{name} not {until} after {ALERT_TIMEOUT} s: {seen}"
        for alert in await server.alerts(client):
            if alert["labels"]["alertname"] == name and labels.items() <= alert["labels"].items():
                seen.setdefault("pending", time.monotonic() - sent)
                seen.setdefault(alert["state"], time.monotonic() - sent)
        await asyncio.sleep(0.05)
    return seen


async def test_a_full_quota_holds_recording_paused_pending(tmp_path: Path) -> None:
    """A quota smaller than one pair: the second request finds it full and recording pauses;
    CalltapRecordingPaused turns pending in the real Prometheus within seconds (and would fire
    after its `for: 5m`), while no divergence alert appears."""
    async with watched(tmp_path, disk_quota_bytes=4096) as run:
        server, client = run.server, run.client
        await run.send(defect=None)
        await server.wait_for(client, 'calltap_pairs_total{verdict="equal"} == 1')
        assert await server.query(client, "calltap_recording_paused == 1") == []
        sent = time.monotonic()
        await run.send(defect=None)
        seen = await watch_alert(server, client, sent, "CalltapRecordingPaused", {},
                                 until="pending")
        (alert,) = await server.alerts(client)
    print(f"recording paused: request to pending {seen['pending']:.2f} s")
    assert alert["state"] == "pending"
    assert alert["labels"] == {"alertname": "CalltapRecordingPaused", "severity": "warning",
                               "job": "calltap", "instance": run.target}
    assert alert["annotations"]["summary"] == (
        f"calltap on {run.target} relays without recording")
