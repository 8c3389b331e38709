"""rebuild and compact on a bucket: a real S3 API (moto's server on loopback), calltap as
subprocesses, the bucket read back with boto3 and the index with the catalog."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from tests.index import pairs
from tests.support.s3 import S3Server, s3_server

from calltap.index import layout
from calltap.index.catalog import Catalog

DAYS = {"2026-11-28": 30, "2026-11-29": 20}
PREFIX = "staging"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A bucket of pairs written before the index (and one pair still uploading): its URL."""
    for name, value in {**s3.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(name, value)
    name = s3.bucket()
    client = s3.client()
    for day, count in DAYS.items():
        for n in range(count):
            key = f"{day.replace('-', '')}T0000{n:05d}Z-b{n}"
            started = datetime.fromisoformat(f"{day}T08:00:{n % 60:02d}+00:00")
            doc = pairs.document(key, started, verdict="diverged" if n % 4 == 0 else "equal",
                                 codes=("TOOL_CALL_DROPPED",) if n % 4 == 0 else ())
            for object_key, data in pairs.objects(day, key, doc, f"model-{n % 3}").items():
                client.put_object(Bucket=name, Key=f"{PREFIX}/{object_key}", Body=data)
    client.put_object(Bucket=name, Key=f"{PREFIX}/2026-11-29/uploading/.claim", Body=b"c")
    return f"s3://{name}/{PREFIX}"


def calltap(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return pairs.calltap(*args, env=dict(os.environ), check=check)


def segment_keys(s3: S3Server, url: str) -> list[str]:
    bucket = url.removeprefix("s3://").split("/")[0]
    return sorted(key.removeprefix(PREFIX + "/")
                  for key in s3.objects(bucket, f"{PREFIX}/{layout.INDEX}/"))


def rows_of(url: str, sql: str = "SELECT day, stored_as, model FROM pairs ORDER BY ALL",
            cache: Path | None = None) -> tuple[list[tuple[object, ...]], dict[str, str]]:
    """What a reader with the cache `cache` (the user's by default) loads."""
    catalog = Catalog(url, cache=cache)
    catalog.refresh()
    try:
        return catalog.query(sql), dict(catalog.problems)
    finally:
        catalog.close()


def test_rebuild_indexes_a_bucket_once_and_recovers_a_truncated_segment(
        s3: S3Server, bucket: str, tmp_path: Path) -> None:
    first = calltap("index", "rebuild", bucket)
    assert "50 pairs seen, 0 already indexed" in first.stdout
    assert "wrote 50 rows in 2 segments" in first.stdout
    found, problems = rows_of(bucket)
    assert len(found) == 50 and problems == {}
    assert {model for _, _, model in found} == {"model-0", "model-1", "model-2"}
    again = calltap("index", "rebuild", bucket)
    assert "50 already indexed" in again.stdout and "wrote 0 rows" in again.stdout
    damaged = next(key for key in segment_keys(s3, bucket) if "2026-11-29" in key)
    name = bucket.removeprefix("s3://").split("/")[0]
    client = s3.client()
    whole = client.get_object(Bucket=name, Key=f"{PREFIX}/{damaged}")["Body"].read()
    client.put_object(Bucket=name, Key=f"{PREFIX}/{damaged}", Body=whole[: len(whole) // 3])
    fixed = calltap("index", "rebuild", bucket)
    assert "50 pairs seen, 30 already indexed" in fixed.stdout
    assert "wrote 20 rows in 1 segments" in fixed.stdout and damaged in fixed.stdout
    found, problems = rows_of(bucket, cache=tmp_path / "new-reader")
    assert len(found) == 50 and list(problems) == [damaged]


def test_compaction_merges_a_buckets_day_and_deletes_only_its_inputs(
        s3: S3Server, bucket: str) -> None:
    for _ in range(3):  # three rebuilds of a bucket that kept growing: three segments a day
        calltap("index", "rebuild", bucket)
        name = bucket.removeprefix("s3://").split("/")[0]
        n = len(segment_keys(s3, bucket))
        for day in DAYS:
            key = f"extra{n}"
            doc = pairs.document(key, datetime.fromisoformat(f"{day}T09:00:00+00:00"))
            for object_key, data in pairs.objects(day, key, doc, "gpt-4o").items():
                s3.client().put_object(Bucket=name, Key=f"{PREFIX}/{object_key}", Body=data)
    calltap("index", "rebuild", bucket)
    before, _ = rows_of(bucket, "SELECT * FROM pairs ORDER BY day, stored_as")
    inputs = segment_keys(s3, bucket)
    assert len(inputs) == 8
    racing = [subprocess.Popen([sys.executable, "-m", "calltap", "index", "compact", bucket],
                               cwd=pairs.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]
    said = ""
    for process in racing:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, out + err
        said += out
    # A day the other compaction already merged has one segment left, and is not merged again.
    assert "2026-11-28" in said and "2026-11-29" in said
    left = segment_keys(s3, bucket)
    assert not set(inputs) & set(left) and 2 <= len(left) <= 4
    assert {layout.parse(key).replica for key in left} == {"compact"}  # type: ignore[union-attr]
    after, problems = rows_of(bucket, "SELECT * FROM pairs ORDER BY day, stored_as")
    assert after == before and problems == {}
    assert len(after) == 56


def test_a_bucket_that_is_not_there_is_one_line_and_exit_2(s3: S3Server, bucket: str) -> None:
    done = calltap("index", "compact", "s3://calltap-no-such-bucket", check=False)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert "NoSuchBucket" in done.stderr
