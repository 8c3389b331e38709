"""Regression cases: a pair exported with everything a replay needs and no secret, and a folder
of cases run the way a gateway's own test suite would run them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from replay_helpers import replay
from tests.e2e.conftest import PLANTED_SECRET, open_topology

from calltap import recordings
from calltap.cli import main
from calltap.fakes import DEFECTS
from calltap.fakes.provider import TOOLS_REQUEST

CASES = Path(__file__).parent / "cases"
CASE_DIRECTORIES = sorted(path for path in CASES.iterdir() if path.is_dir())


@pytest.mark.parametrize("case", CASE_DIRECTORIES, ids=lambda path: path.name)
async def test_each_kept_case_reproduces_through_the_gateway(case: Path):
    replayed = await replay("--case", case, "--pace", "none", "--json")
    assert replayed.exit == 0, replayed
    (result,) = replayed.results
    assert "TOOL_CALLS_DROPPED" in result["replayed"]["codes"]


async def test_a_folder_of_cases_runs_in_one_command():
    replayed = await replay("--case", CASES, "--pace", "none")
    assert replayed.exit == 0, replayed
    assert f"{len(CASE_DIRECTORIES)} reproduced, 0 different, 0 cannot" in replayed.stdout


@pytest.fixture
async def secret_pair(tmp_path: Path) -> Path:
    """A dropped call recorded from a client that sent PLANTED_SECRET as its key."""
    async with open_topology(tmp_path / "recordings") as topology:
        sent = await topology.send(TOOLS_REQUEST, DEFECTS["drop-second-call"])
    return sent.directory


async def test_an_exported_case_holds_what_a_replay_needs_and_no_secret(secret_pair, tmp_path):
    case = tmp_path / "case"
    assert main(["replay", str(secret_pair), "--export", str(case)]) == 0
    names = {path.name for path in case.iterdir()}
    assert names == {"pair.json", "README.md", "downstream.request", "downstream.sse",
                     "upstream.request", "upstream.sse"}
    assert stat.S_IMODE(case.stat().st_mode) == 0o700
    for path in case.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert PLANTED_SECRET.encode() not in path.read_bytes(), path.name
    for name in names - {"pair.json", "README.md"}:
        assert (case / name).read_bytes() == (secret_pair / name).read_bytes()
    readme = (case / recordings.CASE_README).read_text()
    assert f"calltap replay --case {case} --gateway" in readme
    assert "--header 'authorization: …'" in readme
    replayed = await replay("--case", case, "--pace", "none")
    assert replayed.exit == 0, replayed


def test_a_header_given_to_an_export_is_refused_and_nothing_is_written(secret_pair, tmp_path,
                                                                       capsys):
    case = tmp_path / "case"
    code = main(["replay", str(secret_pair), "--export", str(case),
                 "--header", f"Authorization: Bearer {PLANTED_SECRET}"])
    assert code == 2
    assert "never written to a case" in capsys.readouterr().err
    assert not case.exists()


async def test_a_case_from_a_keyed_query_says_to_give_the_key_and_refuses_it_at_export(
        tmp_path, capsys):
    async with open_topology(tmp_path / "recordings") as topology:
        sent = await topology.send(TOOLS_REQUEST, DEFECTS["drop-second-call"],
                                   query=f"api-version=1&key={PLANTED_SECRET}")
    refused = tmp_path / "refused"
    assert main(["replay", str(sent.directory), "--export", str(refused),
                 "--query", f"key={PLANTED_SECRET}"]) == 2
    assert "never written to a case" in capsys.readouterr().err
    assert not refused.exists()
    case = tmp_path / "case"
    assert main(["replay", str(sent.directory), "--export", str(case)]) == 0
    assert all(PLANTED_SECRET.encode() not in path.read_bytes() for path in case.iterdir())
    assert "--query 'key=…'" in (case / recordings.CASE_README).read_text()


def test_an_export_never_overwrites(secret_pair, tmp_path, capsys):
    case = tmp_path / "case"
    case.mkdir()
    assert main(["replay", str(secret_pair), "--export", str(case)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert list(case.iterdir()) == []


async def test_a_tree_exports_a_folder_of_cases_that_runs_as_one(demo_tree, tmp_path):
    cases = tmp_path / "cases"
    assert main(["replay", str(demo_tree), "--code", "DONE_MISSING", "--export",
                 str(cases)]) == 0
    assert len(list(cases.iterdir())) == 2
    replayed = await replay("--case", cases, "--pace", "none")
    assert replayed.exit == 0, replayed
    assert "2 reproduced, 0 different, 0 cannot" in replayed.stdout
