"""The requests in the view and the report: a pair whose client offered two tools and whose
provider was offered one (Chat Completions both sides, the answers equal), its request finding
in the API, the list and its code filter, the pair page's two Asks with the dropped tool
marked, and `calltap report`; captured tool names and text stay text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from view_helpers import (
    HOSTILE_NAME,
    HOSTILE_TEXT,
    asked_pair,
    chat_request,
    tool,
    two_calls,
    write_pair,
)

from calltap import recordings
from calltap.cli import main
from calltap.compare_requests import PairRequests, RecordedRequest
from calltap.transcript import Capture
from calltap.view.server import ViewSettings, standalone

DROPPED = "REQUEST_TOOL_DROPPED"
CHAT = "/v1/chat/completions"
PAGE = "/pairs/2026-11-30/asked"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "recordings"
    asked_pair(root)
    write_pair(root, "same", two_calls(), two_calls(), started="2026-11-30T03:00:00.000000Z")
    return root


async def view_client(aiohttp_client, tree: Path):  # type: ignore[no-untyped-def]
    return await aiohttp_client(standalone(ViewSettings(tree)))


def page_model(directory: Path) -> Any:
    from calltap.view.source import read_recorded

    recorded = read_recorded(directory, directory.parent.name, directory.name)
    assert recorded is not None
    return recorded.page


def test_the_page_model_sets_both_asks_side_by_side_and_marks_the_dropped_tool(
        tree: Path) -> None:
    page = page_model(tree / "2026-11-30" / "asked")
    assert (page.verdict, [f.code for f in page.findings]) == ("diverged", [DROPPED])
    asks = page.requests
    assert [(t.name, t.state) for t in asks.downstream.tools] == [("weather", "kept"),
                                                                  ("clock", "dropped")]
    assert [(t.name, t.state) for t in asks.upstream.tools] == [("weather", "kept")]
    clock = asks.downstream.tools[1]
    assert ([m.code for m in clock.marks], clock.strict, clock.summary) == (
        [DROPPED], "true", "{city*: string}")
    (finding,) = page.findings
    assert (finding.side, finding.tool, finding.turn) == ("request", "clock", None)
    assert finding.places == [("downstream tool", clock.anchor)]
    turns = asks.downstream.turns
    assert [(t.role, t.partner) for t in turns] == [("user", 0), ("assistant", 1), ("user", 2)]
    (call,) = turns[1].calls
    assert (call.name, call.id, json.loads(call.arguments.text)) == (
        "locate", "call_where", {"precise": True})
    (result,) = turns[2].results
    assert (result.answers, result.text.text) == ("call_where (locate)", "Taipei")
    assert asks.downstream.instructions.text == "Answer briefly."
    assert page.report["requests"]["findings"][0]["tool"] == "clock"
    assert "clock" not in json.dumps(page.structural)


def test_a_finding_on_a_turn_is_marked_on_both_sides_turns() -> None:
    from calltap.view.pages import build_page

    client = chat_request([tool("weather")], text="What is the weather?")
    provider = chat_request([tool("weather")], text="What is the weather now?")
    provider["messages"][3]["content"] = "Tainan"
    requests = PairRequests(*(RecordedRequest(orjson.dumps(body), CHAT)
                              for body in (client, provider)))
    page = build_page(Capture(two_calls(), path=CHAT), Capture(two_calls(), path=CHAT),
                      requests=requests)
    marked = {f.code: f.places for f in page.findings}
    assert marked["HISTORY_TOOL_RESULT_CHANGED"] == [
        ("downstream turn 2", "ask-downstream-turn-2"), ("upstream turn 2", "ask-upstream-turn-2")]
    assert [m.code for m in page.requests.upstream.turns[2].marks] == [
        "HISTORY_TOOL_RESULT_CHANGED", "MESSAGE_CHANGED"]
    temperature = page.requests.upstream.setting("sampling.temperature")
    assert (temperature.value, temperature.marks) == ("0", [])


async def test_the_api_has_the_request_finding_with_the_tool_s_name(aiohttp_client,
                                                                    tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    pair = await (await client.get("/api/pairs/asked")).json()
    assert pair["comparison"]["verdict"] == "diverged"
    dropped = [f for f in pair["comparison"]["findings"] if f["code"] == DROPPED]
    assert [(f["side"], f["tool"]) for f in dropped] == [("request", "clock")]
    requests = pair["requests"]
    assert requests["verdict"] == "diverged"
    assert (requests["downstream"]["tools"], requests["upstream"]["tools"]) == (2, 1)
    assert [(f["code"], f["tool"]) for f in requests["findings"]] == [(DROPPED, "clock")]
    same = await (await client.get("/api/pairs/same")).json()
    assert same["requests"] is None


async def test_the_api_compares_the_requests_of_a_pair_compared_before_requests_were(
        aiohttp_client, tree: Path) -> None:
    directory = tree / "2026-11-30" / "asked"
    document = recordings.read_pair(directory)
    del document["comparison"]["requests"]
    (directory / recordings.PAIR_JSON).write_bytes(recordings.encode_pair(document))
    client = await view_client(aiohttp_client, tree)
    pair = await (await client.get("/api/pairs/asked")).json()
    assert "requests" not in pair["comparison"]
    assert [(f["code"], f["tool"]) for f in pair["requests"]["findings"]] == [(DROPPED, "clock")]


async def test_the_list_shows_a_pair_with_only_request_findings_as_diverged_with_its_code(
        aiohttp_client, tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    listed = await (await client.get("/api/pairs")).json()
    assert {p["key"]: (p["verdict"], p["codes"]) for p in listed["pairs"]} == {
        "asked": ("diverged", [DROPPED]), "same": ("equal", [])}
    filtered = await (await client.get(f"/api/pairs?code={DROPPED}")).json()
    assert [p["key"] for p in filtered["pairs"]] == ["asked"]
    html = await (await client.get(f"/?code={DROPPED}")).text()
    assert f'<span class="code sev-fatal">{DROPPED}</span>' in html
    assert 'href="/pairs/2026-11-30/asked"' in html and "/pairs/2026-11-30/same" not in html


async def test_the_pair_page_shows_both_asks_and_the_dropped_tool_marked(aiohttp_client,
                                                                         tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    html = await (await client.get(PAGE)).text()
    assert "<h2>Requests" in html
    assert 'class="leg ask upstream"' in html and 'class="leg ask downstream"' in html
    dropped = html[html.index('<div class="tool dropped marked" id="ask-downstream-tool-1">'):]
    dropped = dropped[:dropped.index("<h4>")]
    assert '<span class="name">clock</span>' in dropped
    assert "not offered upstream" in dropped and DROPPED in dropped
    assert '<a href="#ask-downstream-tool-1">downstream tool</a>' in html
    assert "result for <code>call_where (locate)</code>" in html
    redacted = await (await client.get(f"{PAGE}?redact=1")).json()
    assert [f["code"] for f in redacted["requests"]["findings"]] == [DROPPED]
    assert "clock" not in json.dumps(redacted)


async def test_a_hostile_tool_name_and_text_stay_text(aiohttp_client, tmp_path: Path) -> None:
    root = tmp_path / "recordings"
    asked_pair(root, "evil", dropped=HOSTILE_NAME, text=HOSTILE_TEXT, instructions=HOSTILE_TEXT)
    client = await view_client(aiohttp_client, root)
    html = await (await client.get("/pairs/2026-11-30/evil")).text()
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert html.count("&lt;script&gt;window.__pwned=4&lt;/script&gt;") >= 3
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    pair = await (await client.get("/api/pairs/evil")).json()
    assert pair["requests"]["findings"][0]["tool"] == HOSTILE_NAME


def test_the_report_lists_the_request_finding_and_redact_drops_its_tool(
        tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["report", str(tree), "-o", str(out)]) == 1
    results = json.loads((out / "results.json").read_text())
    assert [(p["capture"], p["verdict"], p["codes"]) for p in results["pairs"]] == [
        ("2026-11-30/asked", "diverged", [DROPPED]), ("2026-11-30/same", "equal", [])]
    report = results["pairs"][0]["report"]
    assert [(f["code"], f["tool"]) for f in report["requests"]["findings"]] == [
        (DROPPED, "clock")]
    html = (out / "report.html").read_text()
    assert 'id="p1-ask-downstream-tool-1"' in html
    assert '<a href="#p1-ask-downstream-tool-1">downstream tool</a>' in html
    redacted = tmp_path / "redacted"
    assert main(["report", str(tree), "-o", str(redacted), "--redact"]) == 1
    written = (redacted / "report.html").read_text() + (redacted / "results.json").read_text()
    assert DROPPED in written
    for secret in ("clock", "weather", "Taipei", "not offered upstream", "gpt-4o"):
        assert secret not in written, secret


def test_a_hostile_tool_name_in_the_report_stays_text(tmp_path: Path) -> None:
    root = tmp_path / "recordings"
    asked_pair(root, "evil", dropped=HOSTILE_NAME, text=HOSTILE_TEXT, instructions=HOSTILE_TEXT)
    out = tmp_path / "report"
    main(["report", str(root), "-o", str(out)])
    html = (out / "report.html").read_text()
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "&lt;script&gt;window.__pwned=4&lt;/script&gt;" in html
