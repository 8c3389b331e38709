"""The view over HTTP (no browser): headers, path checks, access, the API, uploads, live rows,
and its mount on `calltap serve`'s admin listener."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from view_helpers import two_calls, write_pair

from calltap.cli import main
from calltap.config import Config
from calltap.fakes import FakeProvider
from calltap.proxy.app import Calltap
from calltap.view.guard import CSP, Access
from calltap.view.server import ViewSettings, standalone

DROPPED = "/pairs/2026-11-30/dropped"
TOKEN = "s3cret-token"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "recordings"
    write_pair(root, "dropped", two_calls(), two_calls(keep=1))
    write_pair(root, "same", two_calls(), two_calls(), started="2026-11-30T03:00:00.000000Z")
    return root


LOOPBACK_ONLY = Access()


async def view_client(aiohttp_client, tree: Path,  # type: ignore[no-untyped-def]
                      access: Access = LOOPBACK_ONLY, **settings) -> TestClient:
    app = standalone(ViewSettings(tree, access=access, **settings))
    return await aiohttp_client(app)


async def test_every_answer_carries_the_security_headers(aiohttp_client, tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    for path in ("/", DROPPED, "/pairs/2026-11-30/none", "/api/pairs", "/static/view.css"):
        response = await client.get(path)
        assert response.headers["Content-Security-Policy"] == CSP, path
        assert response.headers["X-Content-Type-Options"] == "nosniff", path
    assert "script-src 'self'" in CSP and "'unsafe-inline'" not in CSP


async def test_raw_files_are_downloads_and_only_the_layout_s_names_are_served(
        aiohttp_client, tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    response = await client.get(f"{DROPPED}/files/upstream.sse")
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/octet-stream"
    assert response.headers["Content-Disposition"] == (
        'attachment; filename="dropped.upstream.sse"')
    assert await response.read() == two_calls()
    (tree / "2026-11-30" / "dropped" / "notes.txt").write_text("not a recording")
    (tree / "2026-11-30" / "dropped" / "downstream.json").symlink_to("/etc/passwd")
    for path in (f"{DROPPED}/files/pair.json", f"{DROPPED}/files/notes.txt",
                 f"{DROPPED}/files/downstream.json", "/pairs/2026-11-30/..%2F..%2Fetc/files/x",
                 "/pairs/..%2F..%2F/dropped", "/pairs/20261130/dropped",
                 "/pairs/2026-11-30/a%20b"):
        assert (await client.get(path)).status == 404, path


async def test_the_structural_report_is_redacted_json(aiohttp_client, tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    report = await (await client.get(f"{DROPPED}?redact=1")).json()
    assert report["verdict"] == "diverged"
    assert [f["code"] for f in report["findings"]] == ["TOOL_CALLS_DROPPED",
                                                       "TOOL_CALL_SET_CHANGED"]
    assert "clock" not in json.dumps(report) and "detail" not in json.dumps(report)


async def test_a_host_that_is_not_loopback_is_refused(aiohttp_client, tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    response = await client.get("/", headers={"Host": "attacker.example:8703"})
    assert response.status == 403
    assert (await client.get("/", headers={"Host": "localhost:8703"})).status == 200


async def test_remote_access_needs_the_token(aiohttp_client, tree: Path) -> None:
    client = await view_client(aiohttp_client, tree, Access(remote=True, token=TOKEN))
    assert (await client.get("/")).status == 401
    assert (await client.get("/api/pairs")).status == 401
    wrong = {"Authorization": "Bearer nope"}
    assert (await client.get("/", headers=wrong)).status == 401
    right = {"Authorization": f"Bearer {TOKEN}", "Host": "view.example"}
    assert (await client.get("/", headers=right)).status == 200
    assert (await client.get("/api/pairs", headers=right)).status == 200
    untokened = await view_client(aiohttp_client, tree, Access(remote=True, token=None))
    assert (await untokened.get("/", headers=right)).status == 401


async def test_the_api_lists_filters_and_finds_pairs(aiohttp_client, tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    listed = await (await client.get("/api/pairs?code=TOOL_CALLS_DROPPED&limit=5")).json()
    assert (listed["total"], [p["key"] for p in listed["pairs"]]) == (1, ["dropped"])
    everything = await (await client.get("/api/pairs")).json()
    assert [p["verdict"] for p in everything["pairs"]] == ["diverged", "equal"]
    pair = await (await client.get("/api/pairs/dropped")).json()
    assert (pair["day"], pair["key"], pair["request_id"]) == ("2026-11-30", "dropped", "dropped")
    assert pair["comparison"]["verdict"] == "diverged"
    assert pair["legs"]["downstream"]["request_headers"]["authorization"] == "[redacted]"
    assert (await client.get("/api/pairs/nothing-here")).status == 404
    assert (await client.get("/api/pairs/bad%20id")).status == 400
    assert (await client.get("/api/pairs?verdict=lost")).status == 400
    assert (await client.get("/api/pairs?limit=0")).status == 400


async def test_a_pair_written_after_start_is_found_by_the_api(aiohttp_client, tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    assert (await client.get("/api/pairs")).status == 200
    write_pair(tree, "late", two_calls(), two_calls(), day="2026-12-01")
    assert (await (await client.get("/api/pairs/late")).json())["day"] == "2026-12-01"


async def test_compare_renders_two_uploads_and_bounds_their_size(aiohttp_client,
                                                                 tree: Path) -> None:
    client = await view_client(aiohttp_client, tree, upload_limit=4096)
    form = aiohttp.FormData()
    form.add_field("upstream", io.BytesIO(two_calls()), filename="u.sse")
    form.add_field("downstream", io.BytesIO(two_calls(keep=1)), filename="d.sse")
    response = await client.post("/compare", data=form)
    html = await response.text()
    assert response.status == 200
    assert "TOOL_CALLS_DROPPED" in html and "missing downstream" in html
    big = aiohttp.FormData()
    big.add_field("upstream", io.BytesIO(b"x" * 5000), filename="u.sse")
    big.add_field("downstream", io.BytesIO(b"y"), filename="d.sse")
    response = await client.post("/compare", data=big)
    assert response.status == 400
    assert "upstream: larger than 4096 bytes" in await response.text()
    alone = aiohttp.FormData()
    alone.add_field("upstream", io.BytesIO(two_calls()), filename="u.sse")
    assert (await client.post("/compare", data=alone)).status == 400


async def test_new_pairs_arrive_on_the_event_stream(aiohttp_client, tree: Path) -> None:
    client = await view_client(aiohttp_client, tree)
    listing = await (await client.get("/")).text()
    after = re.search(r'data-events="/events\?after=([0-9]+)"', listing)
    assert after is not None and int(after[1]) > 0
    async with client.get(f"/events?after={after[1]}&verdict=diverged") as stream:
        write_pair(tree, "same-again", two_calls(), two_calls(), day="2026-12-01")
        write_pair(tree, "dropped-again", two_calls(), two_calls(keep=1), day="2026-12-01")
        line = await asyncio.wait_for(_next_data(stream), timeout=10)
    update = json.loads(line)
    assert update["total"] == 2
    assert "dropped-again" in update["html"] and "same-again" not in update["html"]


async def _next_data(stream: aiohttp.ClientResponse) -> str:
    async for raw in stream.content:
        if raw.startswith(b"data: "):
            return raw[6:].decode()
    raise AssertionError("the stream ended")


async def test_serve_mounts_the_view_and_the_api_on_the_admin_listener(
        tree: Path, provider: FakeProvider, client: aiohttp.ClientSession,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = Config(back=("127.0.0.1", 0), provider=provider.url, admin=("127.0.0.1", 0),
                    recordings=tree)
    async with Calltap(config, log_stream=io.StringIO()) as calltap:
        admin = calltap.admin_url
        async with client.get(f"{admin}/ui/") as page:
            assert page.status == 200
            assert page.headers["Content-Security-Policy"] == CSP
            assert 'href="/ui/pairs/2026-11-30/dropped"' in await page.text()
        async with client.get(f"{admin}/api/pairs/dropped") as pair:
            assert (await pair.json())["comparison"]["verdict"] == "diverged"
        async with client.get(f"{admin}/healthz") as health:
            assert health.status == 200


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--listen", "0.0.0.0:8703"], "0.0.0.0 is not loopback: add --allow-remote"),
        (["--listen", "0.0.0.0:8703", "--allow-remote"],
         "--allow-remote needs a token in CALLTAP_VIEW_TOKEN"),
        (["--listen", "localhost"], "--listen: expected HOST:PORT"),
        (["--listen", "127.0.0.1:99999"], "--listen: expected HOST:PORT"),
    ],
)
def test_view_refuses_what_it_cannot_serve_safely(
        tree: Path, arguments: list[str], message: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("CALLTAP_VIEW_TOKEN", raising=False)
    assert main(["view", str(tree), *arguments]) == 2
    assert message in capsys.readouterr().err


def test_view_of_a_missing_directory_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path / "none")]) == 2
    assert "no such directory" in capsys.readouterr().err
