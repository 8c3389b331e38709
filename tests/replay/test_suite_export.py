"""`calltap scan --diverged --export-cases DIR`: one case per distinct finding shape, added to DIR
whole, named stably and safely; exporting what DIR already holds adds nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.s3 import s3_server

from calltap import recordings
from calltap.replay.cassette import CassetteError
from calltap.replay.export_cases import export_cases, read_shape

TIMEOUT = 120


def calltap(*args: str | Path, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "calltap", *map(str, args)],
                          capture_output=True, text=True, timeout=TIMEOUT, check=False,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def demo_directories(demo_tree: Path) -> list[Path]:
    return recordings.capture_directories(demo_tree)


@pytest.fixture(scope="module")
def demo_shapes(demo_directories: list[Path]) -> dict[object, list[Path]]:
    """The demo's diverged pairs by shape."""
    shapes: dict[object, list[Path]] = {}
    for directory in demo_directories:
        shape, _ = read_shape(directory)
        if shape is not None:
            shapes.setdefault(shape, []).append(directory)
    return shapes


def case_shapes(target: Path) -> list[object]:
    return [read_shape(directory)[0] for directory in recordings.capture_directories(target)]


def test_the_demo_has_pairs_that_share_a_shape(demo_shapes):
    """The dedup is tested on real repeats: some shape has more than one pair."""
    assert len(demo_shapes) >= 10
    assert any(len(directories) > 1 for directories in demo_shapes.values())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_case_per_shape_and_exporting_again_adds_nothing(demo_directories, demo_shapes,
                                                             data):
    first = data.draw(st.lists(st.sampled_from(demo_directories), unique=True))
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / "cases"
        export_cases(first, target)
        before = sorted(path.name for path in target.iterdir()) if target.exists() else []
        everything = export_cases(demo_directories, target)
        shapes = case_shapes(target)
        assert len(shapes) == len(set(shapes)) == len(demo_shapes)
        assert set(shapes) == set(demo_shapes)
        assert len(everything.written) == len(demo_shapes) - len(before)
        assert everything.present == len(before)
        again = export_cases(demo_directories, target)
        assert (again.written, again.present) == ([], len(demo_shapes))
        assert [path.name for path in Path(scratch).iterdir()] == ["cases"]  # nothing staged


def test_each_case_is_the_newest_pair_of_its_shape_with_a_stable_safe_name(demo_shapes,
                                                                          tmp_path):
    export_cases([d for directories in demo_shapes.values() for d in directories],
                 tmp_path / "one")
    export_cases([d for directories in demo_shapes.values() for d in reversed(directories)],
                 tmp_path / "two")
    names = sorted(path.name for path in (tmp_path / "one").iterdir())
    assert names == sorted(path.name for path in (tmp_path / "two").iterdir())
    for shape, directories in demo_shapes.items():
        case = tmp_path / "one" / shape.name
        assert recordings.is_key(shape.name) and shape.name.islower()
        assert shape.name.startswith(shape.worst.lower().replace("_", "-"))
        newest = max(directories, key=lambda d: read_shape(d)[1])
        assert recordings.read_pair(case)["request_id"] == newest.name


def test_a_pair_that_cannot_be_exported_leaves_nothing_half_written(demo_shapes, tmp_path):
    source = tmp_path / "recordings"
    directories = [directories[0] for directories in demo_shapes.values()]
    for directory in directories:
        shutil.copytree(directory, source / directory.name)
    (source / directories[-1].name / "upstream.sse").unlink()
    with pytest.raises(CassetteError):
        export_cases(recordings.capture_directories(source), tmp_path / "cases")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["recordings"]


def test_the_command_exports_and_refuses_what_it_cannot_do(demo_tree, demo_shapes, tmp_path):
    target = tmp_path / "cases"
    run = calltap("scan", demo_tree, "--diverged", "--export-cases", target)
    assert run.returncode == 0, run.stderr
    assert f"{len(demo_shapes)} cases written to {target}, 0 already there" in run.stdout
    again = calltap("scan", demo_tree, "--diverged", "--export-cases", target)
    assert f"0 cases written to {target}, {len(demo_shapes)} already there" in again.stdout

    undiverged = calltap("scan", demo_tree, "--export-cases", tmp_path / "other")
    assert undiverged.returncode == 2 and "needs --diverged" in undiverged.stderr
    (tmp_path / "a-file").write_text("")
    on_a_file = calltap("scan", demo_tree, "--diverged", "--export-cases", tmp_path / "a-file")
    assert on_a_file.returncode == 2 and "not a directory" in on_a_file.stderr
    assert not (tmp_path / "other").exists()


def test_cases_from_a_bucket(demo_tree, demo_shapes, tmp_path):
    """The same cases from the recordings uploaded to a bucket (a real S3 API, moto)."""
    with s3_server(tmp_path) as s3:
        bucket = s3.bucket()
        client = s3.client()
        for path in demo_tree.rglob("*"):
            if path.is_file() and path.parent != demo_tree:
                client.put_object(Bucket=bucket, Key=f"staging/{path.relative_to(demo_tree)}",
                                  Body=path.read_bytes())
        env = {**s3.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
        run = calltap("scan", f"s3://{bucket}/staging", "--diverged", "--export-cases",
                      tmp_path / "cases", env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert set(case_shapes(tmp_path / "cases")) == set(demo_shapes)
