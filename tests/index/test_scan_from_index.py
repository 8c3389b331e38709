"""`calltap scan` on the index of pairs, as a user runs it (real subprocesses): the summary comes
from the rows, --since, --code, --route and --diverged narrow it, and only pairs never compared
(or every one, with --recheck) are read and compared again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.index.pairs import document, objects

from calltap import recordings
from calltap.index import layout, parquet
from calltap.index.gaps import row_for

OPENAI = Path(__file__).resolve().parents[1] / "fixtures" / "openai_chat"
NOW = datetime.now(UTC)


def scan(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "calltap", "scan", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env)


def put(root: Path, key: str, started: datetime, **fields: object) -> Path:
    """A compared pair started at `started`; its day is the start's."""
    day = started.date().isoformat()
    for name, data in objects(day, key, document(key, started, **fields), "gpt-4o").items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root / day / key


def index(root: Path, directories: list[Path]) -> None:
    """A segment per day naming these pairs, as serve writes one."""
    by_day: dict[str, list[dict]] = {}
    for directory in directories:
        row = row_for(root, directory.parent.name, directory.name, replica="r1")
        by_day.setdefault(directory.parent.name, []).append(row)
    for day, rows in by_day.items():
        path = root / layout.segment(day, "r1", 1, "t1").key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(parquet.encode_rows(rows))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "recordings"
    pairs = [
        put(root, "new-equal", NOW - timedelta(minutes=10)),
        put(root, "new-dropped", NOW - timedelta(minutes=20), verdict="diverged",
            codes=("TOOL_CALLS_DROPPED",)),
        put(root, "new-gemini", NOW - timedelta(minutes=30), verdict="diverged",
            codes=("TEXT_CHANGED",), path="/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
        put(root, "old-dropped", NOW - timedelta(days=3), verdict="diverged",
            codes=("TOOL_CALLS_DROPPED",)),
    ]
    index(root, pairs)
    return root


def summary(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode in (0, 1, 3), result.stderr
    return json.loads(result.stdout)


def captures(result: subprocess.CompletedProcess[str]) -> list[str]:
    return sorted(entry["capture"].split("/")[1] for entry in summary(result)["not_equal"])


def test_the_summary_comes_from_the_rows_without_reading_a_pair(tree: Path) -> None:
    for directory in tree.glob("*/*"):
        if recordings.is_day(directory.parent.name):
            shutil.rmtree(directory)
    everything = summary(scan(tree, "--json"))
    assert everything["captures"] == 4
    assert everything["verdicts"] == {"equal": 1, "diverged": 3}
    assert everything["codes"] == {"TEXT_CHANGED": 1, "TOOL_CALLS_DROPPED": 2}


def test_since_code_route_and_diverged_narrow_what_is_counted(tree: Path) -> None:
    assert summary(scan(tree, "--since", "1h", "--json"))["captures"] == 3
    assert captures(scan(tree, "--since", "1h", "--json")) == ["new-dropped", "new-gemini"]
    assert captures(scan(tree, "--code", "TOOL_CALLS_DROPPED", "--json")) == [
        "new-dropped", "old-dropped"]
    assert captures(scan(tree, "--since", "1d", "--code", "TOOL_CALLS_DROPPED", "--json")) == [
        "new-dropped"]
    assert captures(scan(tree, "--route", "/v1beta/models/{model}:streamGenerateContent",
                         "--json")) == ["new-gemini"]
    diverged = summary(scan(tree, "--diverged", "--since", "7d", "--json"))
    assert diverged["verdicts"] == {"diverged": 3}
    assert scan(tree, "--since", "1h", "--code", "TEXT_CHANGED").returncode == 1
    assert scan(tree, "--since", "5m").returncode == 0


def test_recheck_compares_again_what_the_rows_call_equal(tree: Path) -> None:
    wrong = put(tree, "said-equal", NOW - timedelta(minutes=1))
    shutil.copy(OPENAI / "seed.upstream.sse", wrong / "upstream.sse")
    shutil.copy(OPENAI / "seed.one-call.sse", wrong / "downstream.sse")
    index(tree, [wrong])
    assert "said-equal" not in captures(scan(tree, "--since", "5m", "--json"))
    rechecked = scan(tree, "--since", "5m", "--recheck", "--json")
    assert captures(rechecked) == ["said-equal"]
    assert rechecked.returncode == 1


def test_one_day_of_a_tree_is_that_day_s_pairs(tree: Path) -> None:
    day = (NOW - timedelta(days=3)).date().isoformat()
    assert captures(scan(tree / day, "--json")) == ["old-dropped"]


@pytest.mark.parametrize(("args", "message"), [
    (("--since", "yesterday"), "expected a duration such as 30m, 24h or 7d"),
    (("--code", "NOT_A_CODE"), "unknown finding code 'NOT_A_CODE'"),
])
def test_a_bad_filter_is_a_usage_error(tree: Path, args: tuple[str, ...], message: str) -> None:
    result = scan(tree, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_a_bucket_with_pairs_and_no_index_says_to_rebuild(tmp_path: Path) -> None:
    from tests.support.s3 import s3_server

    (tmp_path / "moto").mkdir()
    with s3_server(tmp_path / "moto") as s3:
        bucket = s3.bucket()
        started = NOW - timedelta(minutes=5)
        for name, data in objects(started.date().isoformat(), "k1", document("k1", started),
                                  "gpt-4o").items():
            s3.client().put_object(Bucket=bucket, Key=f"p/{name}", Body=data)
        env = {**os.environ, **s3.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
        result = scan(f"s3://{bucket}/p", "--json", env=env)
    assert result.returncode == 0
    assert json.loads(result.stdout)["captures"] == 0
    assert f"s3://{bucket}/p holds pairs but no index of pairs: run `calltap index rebuild" \
        in result.stderr
