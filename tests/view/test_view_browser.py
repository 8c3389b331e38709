"""The view in a real browser (the system Chromium): the demo's pairs, filtering, a dropped
call's page, a dropped tool's requests side by side, hostile captures that must stay text, the
CSP, live rows under `calltap serve`, and the token when remote."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from browser_helpers import screenshot, serve, view
from view_helpers import (
    HOSTILE_ARGUMENTS,
    HOSTILE_NAME,
    HOSTILE_TEXT,
    asked_pair,
    two_calls,
    write_pair,
)

from calltap import recordings
from calltap.demo import SCENARIOS
from calltap.fakes import DEFECT_HEADER
from calltap.view.guard import CSP

DROPPED = "TOOL_CALLS_DROPPED"


def demo_pairs(tree: Path) -> list[dict[str, Any]]:
    return [recordings.read_pair(d) for d in recordings.capture_directories(tree)]


def codes(pair: dict[str, Any]) -> set[str]:
    return {finding["code"] for finding in pair["comparison"]["findings"]}


@pytest.fixture
def page(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    yield context.new_page()
    context.close()


def test_the_list_shows_every_demo_pair_with_its_verdict_and_codes(
        page: Any, demo_tree: Path, tmp_path: Path) -> None:
    pairs = demo_pairs(demo_tree)
    with view(demo_tree, tmp_path) as base:
        response = page.goto(base)
        assert response.headers["content-security-policy"] == CSP
        rows = page.locator("tr.pair")
        assert rows.count() == len(pairs) == len(SCENARIOS)
        shown = {rows.nth(n).locator("td").nth(1).inner_text():
                 (rows.nth(n).locator(".verdict").inner_text(),
                  set(rows.nth(n).locator(".code").all_inner_texts()))
                 for n in range(rows.count())}
        assert shown == {p["request_id"]: (p["comparison"]["verdict"], codes(p)) for p in pairs}
        screenshot(page, "view-list.png")


def test_filtering_by_a_code_narrows_the_list(page: Any, demo_tree: Path,
                                              tmp_path: Path) -> None:
    expected = sorted(p["request_id"] for p in demo_pairs(demo_tree) if DROPPED in codes(p))
    with view(demo_tree, tmp_path) as base:
        page.goto(base)
        page.select_option("select[name=code]", DROPPED)
        page.click("form.filters button")
        page.wait_for_url(f"**/?verdict=&code={DROPPED}&q=")
        ids = page.locator("tr.pair td:nth-child(2)").all_inner_texts()
        assert sorted(ids) == expected
        assert 0 < len(ids) < len(SCENARIOS)


def test_a_dropped_call_s_page_shows_two_calls_up_one_down_and_links_its_event(
        page: Any, demo_tree: Path, tmp_path: Path) -> None:
    pair = next(p for p in demo_pairs(demo_tree) if codes(p) == {DROPPED, "TOOL_CALL_SET_CHANGED"}
                and p["comparison"]["upstream"]["dialect"] == "openai.chat")
    day = pair["legs"]["downstream"]["started_at"][:10]
    with view(demo_tree, tmp_path) as base:
        page.goto(f"{base}pairs/{day}/{pair['request_id']}")
        assert page.locator(".verdict.big").inner_text() == "diverged"
        assert page.locator(".legs .leg.upstream .call").count() == 2
        assert page.locator(".legs .leg.downstream .call").count() == 1
        missing = page.locator(".call.missing")
        assert missing.count() == 1
        assert "missing downstream" in missing.inner_text().lower()
        finding = page.locator("tr.finding", has_text=DROPPED)
        link = finding.locator("a", has_text="downstream event")
        target = link.get_attribute("href")
        link.click()
        assert page.evaluate("location.hash") == target
        row = page.locator(f"tr{target}")
        assert row.is_visible()
        assert "pointed" in row.get_attribute("class")
        upstream = finding.locator("a", has_text="upstream event").get_attribute("href")
        assert missing.locator("a").get_attribute("href") == upstream
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, "view-pair.png")


def test_hostile_captures_render_as_text_and_run_nothing(page: Any, tmp_path: Path) -> None:
    tree = tmp_path / "recordings"
    names = ((HOSTILE_NAME, HOSTILE_ARGUMENTS), ("clock", "{}"))
    write_pair(tree, "evil", two_calls(text=HOSTILE_TEXT, names=names),
               two_calls(text=HOSTILE_TEXT, names=names, keep=1),
               headers={"x-note": '"><script>window.__pwned = 6</script>'},
               model='<img src=x onerror="window.__pwned = 7">')
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text))
    with view(tree, tmp_path) as base:
        for path in ("", "pairs/2026-11-30/evil"):
            response = page.goto(base + path)
            assert response.headers["content-security-policy"] == CSP
            assert page.evaluate("window.__pwned") is None
            assert page.locator("main script, main img, main iframe").count() == 0
            assert page.locator('a[href^="javascript:"]').count() == 0
        text = page.locator("main").inner_text()
        assert HOSTILE_TEXT in text
        assert HOSTILE_NAME in text
        assert "<img src=x onerror=\\\"window.__pwned = 5\\\">" in text
    assert page.evaluate("window.__pwned") is None


def test_a_dropped_tool_s_requests_show_side_by_side_with_the_tool_marked(
        page: Any, tmp_path: Path) -> None:
    tree = tmp_path / "recordings"
    asked_pair(tree)
    asked_pair(tree, "evil", dropped=HOSTILE_NAME, text=HOSTILE_TEXT, instructions=HOSTILE_TEXT)
    with view(tree, tmp_path) as base:
        page.goto(f"{base}?code=REQUEST_TOOL_DROPPED")
        rows = page.locator("tr.pair")
        assert rows.count() == 2
        for n in range(2):
            assert rows.nth(n).locator(".verdict").inner_text() == "diverged"
            assert rows.nth(n).locator(".code").all_inner_texts() == ["REQUEST_TOOL_DROPPED"]
        response = page.goto(f"{base}pairs/2026-11-30/asked")
        assert response.headers["content-security-policy"] == CSP
        upstream = page.locator(".leg.ask.upstream")
        downstream = page.locator(".leg.ask.downstream")
        assert upstream.locator(".tool .name").all_inner_texts() == ["weather"]
        assert downstream.locator(".tool .name").all_inner_texts() == ["weather", "clock"]
        dropped = downstream.locator(".tool.dropped")
        assert dropped.locator(".name").inner_text() == "clock"
        assert "not offered upstream" in dropped.inner_text().lower()
        assert dropped.locator(".code").inner_text() == "REQUEST_TOOL_DROPPED"
        assert downstream.locator(".turn").count() == upstream.locator(".turn").count() == 3
        finding = page.locator("tr.finding", has_text="REQUEST_TOOL_DROPPED")
        assert "clock" in finding.inner_text()
        finding.locator("a", has_text="downstream tool").click()
        assert page.evaluate("location.hash") == "#ask-downstream-tool-1"
        assert dropped.is_visible()
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, "view-requests.png")
        page.goto(f"{base}pairs/2026-11-30/evil")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("main script, main img, main iframe").count() == 0
        assert page.locator(".leg.ask.downstream .tool.dropped .name").inner_text() == HOSTILE_NAME
        assert HOSTILE_TEXT in page.locator(".leg.ask.upstream").inner_text()


def test_the_list_under_serve_updates_when_a_new_pair_lands(page: Any, tmp_path: Path) -> None:
    tree = tmp_path / "recordings"
    with serve(tree) as urls:
        page.goto(f"{urls['admin']}/ui/")
        page.wait_for_selector("table[data-live=on]")
        assert page.locator("tr.pair").count() == 0
        scenario = SCENARIOS[1]
        request = urllib.request.Request(
            f"{urls['front']}/v1/chat/completions", data=orjson.dumps(scenario.request),
            headers={"Content-Type": "application/json", DEFECT_HEADER: "drop-second-call"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()
            request_id = answer.headers["X-Request-ID"]
        row = page.locator("tr.pair", has_text=request_id)
        row.wait_for(timeout=15000)
        assert row.locator(".verdict").inner_text() == "diverged"
        assert DROPPED in row.inner_text()
        assert page.locator("#live-count").inner_text() == "1"


def test_a_remote_view_needs_the_token(browser: Any, demo_tree: Path, tmp_path: Path) -> None:
    token = "view-token-for-the-test"
    with view(demo_tree, tmp_path, "--allow-remote",
              env={"CALLTAP_VIEW_TOKEN": token}) as base:
        anonymous = browser.new_context()
        assert anonymous.new_page().goto(base).status == 401
        anonymous.close()
        holder = browser.new_context(
            extra_http_headers={"Authorization": f"Bearer {token}"})
        page = holder.new_page()
        assert page.goto(base).status == 200
        assert page.locator("tr.pair").count() == len(SCENARIOS)
        holder.close()
