"""The Grafana dashboard and the Prometheus rules query only series calltap really exports.

The exported names come from calltap itself: the metric families of a proxy's registry (every
addon that adds metrics, a bucket included), each expanded into the series names
prometheus_client's text format gives its type (a counter's `_total` and `_created`, a
histogram's `_bucket`, `_count`, `_sum`). A live `calltap serve`'s /metrics is checked to show
nothing that set lacks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.deploy.prom_helpers import (
    DASHBOARD,
    dashboard_queries,
    exported_names,
    metric_names,
    panels,
    recorded_names,
    rule_expressions,
    variable_selector,
)
from tests.reliability.harness import launch

from calltap.config import COMPARED_PATHS
from calltap.fakes import CHAT_PATH, DEFECT_HEADER, TOOLS_REQUEST, FakeGateway, FakeProvider

PROMETHEUS_OWN = frozenset({"ALERTS", "ALERTS_FOR_STATE", "up"})
"""Series Prometheus itself writes, which a dashboard may show beside calltap's."""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    return exported_names(tmp_path_factory.mktemp("spool"))


def unknown_names(queries: dict[str, str], known: set[str]) -> dict[str, set[str]]:
    """Each query that selects a name outside `known`, with those names."""
    found = {where: metric_names(expr) - known for where, expr in queries.items()}
    return {where: names for where, names in found.items() if names}


def test_the_exported_names_are_calltaps(exported: set[str]) -> None:
    assert {"calltap_divergences_total", "calltap_divergences_created",
            "calltap_recording_paused", "calltap_store_backlog_pairs",
            "calltap_store_upload_seconds_bucket", "calltap_store_upload_seconds_count",
            "calltap_pairs_discarded_total"} <= exported
    assert "calltap_divergences" not in exported
    assert "calltap_store_upload_seconds_bucket_total" not in exported


async def test_a_running_calltap_exports_nothing_the_derived_names_lack(
        tmp_path: Path, exported: set[str]) -> None:
    """After a diverged pair (so the labelled counters have series), every calltap series on
    a live /metrics is among the names derived from the registry."""
    async with FakeProvider() as provider, FakeGateway() as gateway:
        calltap = await launch(tmp_path, tmp_path / "recordings", gateway=gateway.url,
                               provider=provider.url)
        try:
            gateway.upstream = calltap.urls["back"]
            async with aiohttp.ClientSession() as client:
                async with client.post(calltap.urls["front"] + CHAT_PATH,
                                       data=orjson.dumps(TOOLS_REQUEST),
                                       headers={DEFECT_HEADER: "drop-second-call"}) as reply:
                    await reply.read()
                await calltap.wait_compared(client, 1)
                async with client.get(calltap.urls["admin"] + "/metrics") as response:
                    text = await response.text()
        finally:
            calltap.end()
    live = {sample.name for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name.startswith("calltap_")}
    assert "calltap_divergences_total" in live
    assert live <= exported, live - exported
    divergences = {(sample.labels["code"], sample.labels["route"], sample.labels["side"])
                   for family in text_string_to_metric_families(text)
                   for sample in family.samples if sample.name == "calltap_divergences_total"}
    route = next(path for path in COMPARED_PATHS if CHAT_PATH.endswith(path))
    assert route != CHAT_PATH  # a compared path, never the request's own
    assert ("TOOL_CALLS_DROPPED", route, "downstream") in divergences


def test_every_dashboard_query_selects_series_calltap_exports(exported: set[str]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    known = exported | recorded_names() | PROMETHEUS_OWN
    queries = dashboard_queries(dashboard)
    assert len(queries) >= 20
    assert unknown_names(queries, known) == {}


def test_divergence_panels_tell_the_answer_from_the_request() -> None:
    """Every dashboard query of divergences keeps `side` (and `code`, `route`): a finding about
    the answer the client got and one about the request the provider received stay apart."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = {where: expr for where, expr in dashboard_queries(dashboard).items()
               if metric_names(expr) & {"calltap_divergences_total",
                                        "calltap:divergences:increase5m"}}
    assert len(queries) >= 2
    for where, expr in queries.items():
        grouping = re.fullmatch(r"sum by \(([\w, ]+)\) \(.*\)", expr)
        assert grouping is not None, where
        assert {"code", "route", "side"} <= set(grouping.group(1).split(", ")), where
    legends = {f"{panel['title']} / {target['refId']}": target.get("legendFormat", "")
               for panel in panels(dashboard["panels"]) for target in panel.get("targets", [])}
    for where in queries:
        assert legends[where] in ("", "{{code}} {{route}} {{side}}"), where


def test_every_rule_selects_series_calltap_exports(exported: set[str]) -> None:
    known = exported | recorded_names()
    expressions = rule_expressions()
    assert unknown_names(expressions, known) == {}
    assert all(metric_names(expr) for expr in expressions.values())


@pytest.mark.parametrize("wrong", ["calltap_latency_added_seconds_bucket",
                                   "calltap_divergences", "calltap_store_uploads_seconds_count"])
def test_a_name_calltap_does_not_export_is_reported(exported: set[str], wrong: str) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    first = next(panel for panel in panels(dashboard["panels"]) if panel.get("targets"))
    first["targets"][0]["expr"] = f"sum(rate({wrong}{{job=~\"$job\"}}[$__rate_interval]))"
    known = exported | recorded_names() | PROMETHEUS_OWN
    unknown = unknown_names(dashboard_queries(dashboard), known)
    assert unknown == {f"{first['title']} / A": {wrong}}


@pytest.mark.parametrize(("expr", "names"), [
    ('histogram_quantile(0.95, sum by (le) (rate(calltap_store_upload_seconds_bucket'
     '{job=~"$job"}[$__rate_interval])))', {"calltap_store_upload_seconds_bucket"}),
    ("sum(a_total) by (code) / on (instance) group_left (leg) b offset 5m", {"a_total", "b"}),
    ("time() - calltap_divergences_created < 300 and on (code) x:y:z", {
        "calltap_divergences_created", "x:y:z"}),
    ('rate(a[5m:1m]) - b{code="calltap_not_a_selector_total"} > bool 1e3', {"a", "b"}),
    ('count(up{job="calltap"} == 0) or vector(0)', {"up"}),
])
def test_metric_names_of_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_variable_queries_name_their_selector() -> None:
    assert variable_selector('label_values(calltap_requests_total{job=~"$job"}, instance)') == (
        'calltap_requests_total{job=~"$job"}')
    assert variable_selector("label_values(job)") == ""
    with pytest.raises(ValueError):
        variable_selector("metrics(calltap_.*)")


def test_every_query_uses_the_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    (source,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert source["query"] == "prometheus"
    reference = {"type": "prometheus", "uid": "${" + source["name"] + "}"}
    queried = [panel for panel in panels(dashboard["panels"]) if panel["type"] != "row"]
    assert all(panel["datasource"] == reference for panel in queried)
    assert all(target["datasource"] == reference
               for panel in queried for target in panel["targets"])
    ids = [panel["id"] for panel in panels(dashboard["panels"])]
    assert len(ids) == len(set(ids))
