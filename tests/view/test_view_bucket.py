"""Every reader on a bucket as on a directory: the demo's pairs and its index segments uploaded to
a real S3 API server (moto on loopback), then `calltap scan`, `report`, `replay --export` and
`view` given the `s3://` URL, the view in the system Chromium; a pair uploaded later (with the
segment that names it) shows up without a restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import view
from tests.support.s3 import S3Server, s3_server

from calltap import recordings
from calltap.index import layout, parquet
from calltap.index.gaps import row_for

CALLTAP = [sys.executable, "-m", "calltap"]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("moto")) as server:
        yield server


def upload(s3: S3Server, bucket: str, prefix: str, directory: Path, key: str) -> None:
    """One pair's files under `prefix/<day>/<key>/`, pair.json last, as calltap uploads."""
    client = s3.client()
    names = sorted(p.name for p in directory.iterdir() if p.name != recordings.PAIR_JSON)
    for name in [*names, recordings.PAIR_JSON]:
        client.put_object(Bucket=bucket, Key=f"{prefix}/{directory.parent.name}/{key}/{name}",
                          Body=(directory / name).read_bytes())


def upload_index(s3: S3Server, bucket: str, prefix: str, root: Path) -> None:
    """The tree's index segments, as `calltap serve` writes them beside the pairs."""
    client = s3.client()
    for path in sorted((root / layout.INDEX).glob("day=*/*" + layout.SUFFIX)):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(root)}",
                          Body=path.read_bytes())


def upload_row(s3: S3Server, bucket: str, prefix: str, directory: Path, key: str) -> None:
    """A segment naming the pair uploaded under `key`, as its replica writes one."""
    row = {**row_for(directory.parent.parent, directory.parent.name, directory.name),
           "stored_as": key, "request_id": key}
    name = layout.segment(directory.parent.name, "late", int(time.time() * 1000), "t1").key
    s3.client().put_object(Bucket=bucket, Key=f"{prefix}/{name}",
                           Body=parquet.encode_rows([row]))


@pytest.fixture
def bucket(s3: S3Server, demo_tree: Path) -> tuple[str, list[Path]]:
    name = s3.bucket()
    pairs = recordings.capture_directories(demo_tree)
    for directory in pairs:
        upload(s3, name, "staging", directory, directory.name)
    upload_index(s3, name, "staging", demo_tree)
    return f"s3://{name}/staging", pairs


@pytest.fixture
def env(s3: S3Server, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **s3.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}


def calltap(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CALLTAP, *args], capture_output=True, text=True, env=env,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_scan_counts_a_bucket_as_its_tree(bucket: tuple[str, list[Path]], demo_tree: Path,
                                          env: dict[str, str]) -> None:
    url, _ = bucket
    on_disk = calltap(env, "scan", str(demo_tree), "--json")
    in_bucket = calltap(env, "scan", url, "--json")
    assert in_bucket.returncode == on_disk.returncode
    disk, remote = json.loads(on_disk.stdout), json.loads(in_bucket.stdout)
    assert {k: v for k, v in remote.items() if k != "root"} == \
        {k: v for k, v in disk.items() if k != "root"}


def test_report_and_replay_export_read_the_bucket(bucket: tuple[str, list[Path]],
                                                  env: dict[str, str], tmp_path: Path) -> None:
    url, pairs = bucket
    report = calltap(env, "report", url, "-o", str(tmp_path / "report"))
    assert report.returncode == 1, report.stderr
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert len(results["pairs"] if isinstance(results, dict) else results) == len(pairs)
    dropped = next(d for d in pairs
                   if "TOOL_CALLS_DROPPED" in (d / recordings.PAIR_JSON).read_text())
    pair_url = f"{url}/{dropped.parent.name}/{dropped.name}"
    exported = calltap(env, "replay", pair_url, "--export", str(tmp_path / "case"))
    assert exported.returncode == 0, exported.stderr
    case_pair = json.loads((tmp_path / "case" / recordings.PAIR_JSON).read_text())
    assert case_pair["request_id"] == dropped.name


def test_a_missing_bucket_or_pair_is_a_usage_error(env: dict[str, str], tmp_path: Path,
                                                   bucket: tuple[str, list[Path]]) -> None:
    missing = calltap(env, "scan", "s3://calltap-no-such-bucket")
    assert missing.returncode == 2
    assert missing.stderr.strip() == ("calltap scan: cannot read 's3://calltap-no-such-bucket':"
                                      " NoSuchBucket")
    viewed = calltap(env, "view", "s3://calltap-no-such-bucket", "--listen", "127.0.0.1:0")
    assert viewed.returncode == 2
    assert viewed.stderr.strip() == ("calltap view: cannot read 's3://calltap-no-such-bucket':"
                                     " NoSuchBucket")
    no_pair = calltap(env, "replay", f"{bucket[0]}/2020-01-01/nothing", "--export",
                      str(tmp_path / "case"))
    assert no_pair.returncode == 2 and "no pair.json at" in no_pair.stderr
    assert not (tmp_path / "case").exists()


def test_a_command_on_a_bucket_ends_with_its_own_exit_code_every_time(
        env: dict[str, str]) -> None:
    """obstore's threads may still be handing a request back to Python as the command ends; on
    Python 3.11 that aborted about one run in ten (SIGABRT, exit -6) before `calltap.cli.entry`
    ended such a process without tearing the interpreter down."""
    runs = 40
    with ThreadPoolExecutor(4) as pool:
        codes = list(pool.map(lambda _: calltap(env, "scan", "s3://calltap-no-such-bucket"
                                                ).returncode, range(runs)))
    assert codes == [2] * runs


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    yield context.new_page()
    context.close()


def list_rows(base: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(base + "api/pairs?limit=500", timeout=10) as reply:
        answer = json.loads(reply.read())
    return answer["pairs"] if isinstance(answer, dict) else answer


def test_view_lists_the_bucket_and_follows_it(page: Any, s3: S3Server,
                                              bucket: tuple[str, list[Path]],
                                              env: dict[str, str], tmp_path: Path) -> None:
    url, pairs = bucket
    with view(url, tmp_path, env=env) as base:  # type: ignore[arg-type]
        page.goto(base)
        rows = page.locator("tr.pair")
        assert rows.count() == len(pairs)
        shown = set(rows.all_inner_texts())
        assert all(any(d.name in row for row in shown) for d in pairs)
        late = pairs[0]
        name, bucket_name = "late-upload-1", url.removeprefix("s3://").split("/")[0]
        upload(s3, bucket_name, "staging", late, name)
        upload_row(s3, bucket_name, "staging", late, name)
        deadline = time.monotonic() + 30
        while not any(name in json.dumps(row) for row in list_rows(base)):
            assert time.monotonic() < deadline, "the late pair never showed"
            time.sleep(0.5)
        page.goto(base)
        assert page.locator("tr.pair").count() == len(pairs) + 1
