"""`calltap probe` as a user runs it, in a subprocess: the demos, the output directory (new, 0700,
files 0600 under umask 0, refused when it exists), the key masked in every saved file and on
the terminal, the report escaped, and bad configuration as exit 2 before anything is sent."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from probe_helpers import KEY, gateway
from test_probe_bounds import completion, serving

from calltap.probe.probes import PROBES

ENV_KEY = "CALLTAP_PROBE_API_KEY"
CHROMIUM = Path(os.environ.get("CALLTAP_CHROMIUM", "/usr/bin/chromium"))
"""The system Chromium the browser checks run (CI installs it)."""


async def calltap_probe(
    *args: str, key: str | None = None, umask: int | None = None
) -> tuple[int, str]:
    """Run `calltap probe ARGS` to its end; the exit status and what it printed."""
    env = {name: value for name, value in os.environ.items() if name != ENV_KEY}
    env["COLUMNS"] = "200"
    if key is not None:
        env[ENV_KEY] = key
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "calltap",
        "probe",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        preexec_fn=None if umask is None else lambda: os.umask(umask),
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_demo_passes_every_probe_and_says_it_is_synthetic(tmp_path: Path) -> None:
    status, printed = await calltap_probe("--demo", "--output", str(tmp_path / "out"))
    assert status == 0, printed
    assert "SYNTHETIC" in printed
    assert f"Checks: {len(PROBES)}/{len(PROBES)} passed" in printed
    assert [line.split()[1] for line in printed.splitlines() if line.startswith("PASS")] == list(
        PROBES
    )
    results = orjson.loads((tmp_path / "out" / "results.json").read_bytes())
    assert results["synthetic"].startswith("calltap's fake provider behind a faithful")
    assert (results["passed"], results["total"]) == (len(PROBES), len(PROBES))
    assert "Synthetic run" in (tmp_path / "out" / "report.html").read_text()


async def test_demo_broken_fails_with_exit_1_naming_each_changed_value(tmp_path: Path) -> None:
    status, printed = await calltap_probe("--demo-broken", "--output", str(tmp_path / "out"))
    assert status == 1, printed
    assert f"Checks: 0/{len(PROBES)} passed" in printed
    failed = [line for line in printed.splitlines() if line.startswith("FAIL")]
    assert [line.split()[1].rstrip(":") for line in failed] == list(PROBES)
    nested = next(line for line in failed if line.startswith("FAIL forced-nested"))
    assert "at /flags/enabled expected true (boolean), received 1 (integer)" in nested
    none = next(line for line in failed if line.startswith("FAIL choice-none"))
    assert "1 tool call(s) (probe_note) instead of an answer" in none
    named = next(line for line in failed if line.startswith("FAIL choice-named"))
    assert "a call of 'probe_asked', not the function the tool choice named" in named
    results = orjson.loads((tmp_path / "out" / "results.json").read_bytes())
    for defect in ("change-two-values", "named-choice-required", "drop-none-choice"):
        assert defect in results["synthetic"]
    probe = next(entry for entry in results["probes"] if entry["name"] == "forced-echo")
    assert set(probe) >= {"name", "passed", "expected", "received", "reason"}
    assert probe["received"][0]["arguments"] == {"text": "calltap probe: echo 7f3", "count": "3"}


async def test_output_is_0700_with_0600_files_under_umask_0(tmp_path: Path) -> None:
    out = tmp_path / "out"
    status, printed = await calltap_probe(
        "--demo", "--only", "forced-echo", "--output", str(out), umask=0
    )
    assert status == 0, printed
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    files = sorted(path.name for path in out.iterdir())
    assert files == ["report.html", "results.json", "trace.json"]
    for path in out.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


async def test_an_existing_output_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    async with gateway() as url:
        status, printed = await calltap_probe("--base-url", url, "--output", str(out))
    assert status == 2
    assert "already exists" in printed
    assert [path.name for path in out.iterdir()] == ["keep.txt"]


async def test_the_key_is_masked_in_every_file_and_on_the_terminal(tmp_path: Path) -> None:
    """A hostile gateway echoes the Authorization header into a header and the error body, and
    adds an AWS key id of its own."""

    async def echo(request: web.Request) -> web.StreamResponse:
        authorization = request.headers["Authorization"]
        body = {"error": {"message": f"bad key {authorization} AKIAABCDEFGHIJKLMNOP"}}
        headers = {"X-Echo": authorization}
        return web.json_response(body, status=401, headers=headers)

    out = tmp_path / "out"
    async with serving(echo) as (url, seen):
        status, printed = await calltap_probe("--base-url", url, "--output", str(out), key=KEY)
    assert status == 1
    assert len(seen) == len(PROBES)
    assert KEY not in printed
    assert "HTTP 401: bad key Bearer [masked] [masked]" in printed
    texts = {path.name: path.read_bytes() for path in out.iterdir()}
    assert set(texts) == {"report.html", "results.json", "trace.json"}
    for name, data in texts.items():
        assert KEY.encode() not in data, name
        assert b"AKIAABCDEFGHIJKLMNOP" not in data, name
        assert b"[masked]" in data, name
    trace = orjson.loads(texts["trace.json"])
    first = trace["exchanges"][0]
    assert first["request"]["headers"]["Authorization"] == "[redacted]"
    assert first["response"]["headers"]["X-Echo"] == "Bearer [masked]"


HOSTILE_TEXT = "<script>alert(1)</script><img src=x onerror=\"document.title='pwned'\">"


async def test_the_report_escapes_what_the_gateway_wrote(tmp_path: Path) -> None:
    arguments = orjson.dumps({"text": HOSTILE_TEXT, "count": 3}).decode()

    async def hostile(request: web.Request) -> web.StreamResponse:
        return web.Response(body=completion(arguments), content_type="application/json")

    out = tmp_path / "out"
    async with serving(hostile) as (url, _):
        status, printed = await calltap_probe(
            "--base-url", url, "--only", "forced-echo", "--output", str(out)
        )
    assert status == 1, printed
    html = (out / "report.html").read_text()
    assert "<script" not in html
    assert "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "default-src 'none'" in html
    if CHROMIUM.exists():
        dom = await rendered(out / "report.html")
        assert "<title>calltap probe: 0/1 passed</title>" in dom
        assert "Checks: 0/1 passed" in dom
        assert "<img" not in dom
        assert "&lt;img src=x onerror=" in dom


async def rendered(page: Path) -> str:
    """The DOM a real browser (headless Chromium) builds from a file, scripts and all."""
    process = await asyncio.create_subprocess_exec(
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
        page.as_uri(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    dom, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    return dom.decode()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "--base-url is required"),
        (("--base-url", "ftp://example.com"), "is not an http(s) URL"),
        (("--base-url", "http://user:pw@example.com"), "must not carry credentials"),
        (("--base-url", "http://127.0.0.1:9", "--only", "nope"), "unknown probe nope"),
        (("--base-url", "http://127.0.0.1:9", "--api-key-env", "NO_SUCH_VAR_4F1C"), "not set"),
        (("--demo", "--base-url", "http://127.0.0.1:9"), "drop --base-url"),
        (("--base-url", "http://127.0.0.1:9", "--timeout", "0"), "positive"),
        (("--demo-broken", "--dialect", "openai.responses"), "Chat Completions answers only"),
    ],
)
async def test_bad_configuration_is_exit_2_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    out = tmp_path / "out"
    status, printed = await calltap_probe(*args, "--output", str(out))
    assert status == 2, printed
    assert says in printed
    assert not out.exists()
