"""calltap's span in a real Phoenix: on the client's trace, an error, its finding as an event, and
the page that shows it (docs/otel-phoenix.png, taken here). A receiver killed mid-run costs
spans, counted, and never a byte of the traffic."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio
from phoenix_stack import (
    MODEL,
    QUESTION,
    ROOT,
    TOOLS,
    chat,
    open_stack,
    spans_of,
    start_phoenix,
    stop_gateway,
)
from tests.support.gateways import GatewayProcess

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
CHROMIUM = Path(os.environ.get("CALLTAP_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update"]
SCREENSHOT = ROOT / "docs" / "otel-phoenix.png"


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


@dataclass
class Diverged:
    request_id: str
    chunks: list[Any]
    span: dict[str, Any]
    phoenix_url: str


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def phoenix(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GatewayProcess]:
    phoenix = await start_phoenix(tmp_path_factory.mktemp("phoenix"))
    yield phoenix
    stop_gateway(phoenix)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def diverged(phoenix: GatewayProcess, tmp_path_factory: pytest.TempPathFactory) -> Diverged:
    """The openai SDK's streamed chat on the client's trace, through a gateway that drops the
    second of two parallel tool calls; calltap stopped (its spans flushed) before reading."""
    recordings = tmp_path_factory.mktemp("recordings")
    async with open_stack(phoenix, recordings) as stack:
        request_id, chunks = await chat(stack, traceparent(CLIENT_TRACE, CLIENT_SPAN),
                                        defect="drop-second-call")
    (span,) = await spans_of(phoenix.url, CLIENT_TRACE)
    return Diverged(request_id, chunks, span, phoenix.url)


@pytest.mark.asyncio(loop_scope="module")
async def test_calltaps_span_sits_in_the_clients_trace_as_an_error(diverged: Diverged) -> None:
    span = diverged.span
    assert span["context"]["trace_id"] == CLIENT_TRACE
    assert span["parent_id"] == CLIENT_SPAN
    assert span["name"] == f"chat {MODEL}"
    assert span["status_code"] == "ERROR"
    attributes = span["attributes"]
    assert attributes["calltap.request_id"] == diverged.request_id
    assert attributes["calltap.verdict"] == "diverged"
    assert "TOOL_CALLS_DROPPED" in attributes["calltap.codes"]
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == MODEL
    assert attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]


@pytest.mark.asyncio(loop_scope="module")
async def test_the_dropped_call_is_an_evaluation_event_on_the_span(diverged: Diverged) -> None:
    events = [event for event in diverged.span["events"]
              if event["name"] == "gen_ai.evaluation.result"]
    labels = {event["attributes"]["gen_ai.evaluation.score.label"]: event["attributes"]
              for event in events}
    dropped = labels["TOOL_CALLS_DROPPED"]
    assert dropped["gen_ai.evaluation.name"] == "calltap.divergence"
    assert dropped["calltap.severity"] == "fatal"
    assert dropped["calltap.side"] == "downstream"
    assert dropped["calltap.count"] == 1
    assert "tool calls the provider made are missing" in dropped["gen_ai.evaluation.explanation"]


@pytest.mark.asyncio(loop_scope="module")
async def test_no_captured_content_reaches_phoenix(diverged: Diverged) -> None:
    exported = json.dumps(diverged.span)
    for captured in ("Taipei", "weather in", "clock", "city"):
        assert captured not in exported


def test_phoenix_shows_the_span_and_its_finding(diverged: Diverged) -> None:
    """The trace's page in Phoenix's own UI, its events tab open on the finding: the screenshot
    docs/opentelemetry.md shows."""
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} missing: apt-get install chromium (CI installs it in .ci/run)"
        if os.environ.get("CALLTAP_REQUIRE_BROWSER") or os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    project = _project_id(diverged.phoenix_url)
    url = f"{diverged.phoenix_url}/projects/{project}/traces/{CLIENT_TRACE}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 820})
            page.goto(url, wait_until="networkidle")
            page.get_by_role("tab", name="Events").click(timeout=30_000)
            page.get_by_text("gen_ai.evaluation.result").first.click()
            page.get_by_text("TOOL_CALLS_DROPPED").first.wait_for(timeout=10_000)
            page.wait_for_timeout(500)
            assert "calltap.divergence" in page.inner_text("body")
            SCREENSHOT.write_bytes(page.screenshot())
        finally:
            browser.close()


def _project_id(phoenix_url: str) -> str:
    query = orjson.dumps({"query": "{ projects { edges { node { id name } } } }"})
    request = urllib.request.Request(f"{phoenix_url}/graphql", data=query,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        edges = orjson.loads(response.read())["data"]["projects"]["edges"]
    return next(edge["node"]["id"] for edge in edges if edge["node"]["name"] == "default")


async def test_a_receiver_killed_mid_run_costs_spans_never_traffic(tmp_path: Path) -> None:
    """Phoenix killed between two rounds of requests: every client still gets the provider's
    bytes exactly (the faithful gateway passes them through), the spans of the second round are
    dropped and counted, and calltap says so in its log."""
    phoenix = await start_phoenix(tmp_path)
    try:
        async with open_stack(phoenix, tmp_path / "recordings", timeout=1.0) as stack:
            async with aiohttp.ClientSession(auto_decompress=False) as client:
                alive = [await _raw_chat(stack, client, index) for index in range(3)]
                assert len(await spans_of(phoenix.url, _trace(2))) == 1
                phoenix.process.kill()
                phoenix.process.wait()
                dead = [await _raw_chat(stack, client, index) for index in range(3, 8)]
                dropped = await _dropped(client, stack.calltap.admin_url or "", at_least=5)
            for body, directory in alive + dead:
                assert body == (directory / "upstream.sse").read_bytes()
                assert body == (directory / "downstream.sse").read_bytes()
            assert dropped >= 5
            await _said(stack)
    finally:
        stop_gateway(phoenix)


def _trace(index: int) -> str:
    return f"{index + 1:032x}"


async def _raw_chat(stack: Any, client: aiohttp.ClientSession,
                    index: int) -> tuple[bytes, Path]:
    """A streamed chat on trace `index`, read as the bytes that arrived; and its capture."""
    request = {"model": MODEL, "messages": QUESTION, "tools": TOOLS, "stream": True}
    headers = {"traceparent": traceparent(_trace(index), CLIENT_SPAN)}
    url = f"{stack.calltap.front_url}/v1/chat/completions"
    async with client.post(url, json=request, headers=headers) as response:
        assert response.status == 200
        body = await response.read()
        request_id = response.headers["X-Request-ID"]
    pair = await stack.calltap.wait_compared(request_id)
    assert pair["comparison"]["verdict"] == "equal"
    (directory,) = stack.calltap.recordings.glob(f"*/{request_id}")
    return body, directory


async def _dropped(client: aiohttp.ClientSession, admin_url: str, *, at_least: int) -> float:
    """calltap_otel_dropped_total for spans, once it reaches `at_least` (or after 30 s)."""
    total = 0.0
    for _ in range(60):
        async with client.get(f"{admin_url}/metrics") as response:
            text = (await response.read()).decode()
        total = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                    if line.startswith("calltap_otel_dropped_total{")
                    and 'signal="spans"' in line)
        if total >= at_least:
            break
        await asyncio.sleep(0.5)
    return total


async def _said(stack: Any) -> None:
    for _ in range(20):
        if stack.log.lines("otel.unavailable"):
            return
        await asyncio.sleep(0.25)
    pytest.fail("no otel.unavailable line")
