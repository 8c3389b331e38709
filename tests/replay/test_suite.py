"""`calltap replay --suite`: the demo's divergences, exported one case per shape, run as a
regression suite against the demo's defect-injecting gateway (every case fails, with its codes)
and against a fixed gateway (every case passes: request-side and answer-side defects alike),
with the JUnit report read back by junitparser and the exit codes 0/1/3/2."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from junitparser import Error, Failure, JUnitXml, Properties
from replay_helpers import replay

from calltap import recordings
from calltap.fakes import FakeGateway
from calltap.fakes.gateway import DEFECT_HEADER

FIXED_GATEWAY = f"{DEFECT_HEADER}: none"
"""Sent over the recorded header, it turns the demo's gateway faithful: the build with the fix."""
REQUEST_SIDE = ("request-tool-dropped-", "tool-choice-changed-", "tool-schema-changed-")
ANSWER_SIDE = ("tool-calls-dropped-", "tool-call-arguments-changed-", "finish-reason-changed-")
TIMEOUT = 180


def calltap(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "calltap", *map(str, args)],
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)


@pytest.fixture(scope="session")
def demo_suite(demo_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One case per distinct shape of the demo's divergences."""
    cases = tmp_path_factory.mktemp("suite") / "cases"
    exported = calltap("scan", demo_tree, "--diverged", "--export-cases", cases)
    assert exported.returncode == 0, exported.stderr
    return cases


def junit_cases(report: Path) -> dict[str, object]:
    junit = JUnitXml.fromfile(str(report))
    return {case.name: case for suite in junit for case in suite}


def named(cases: Path, *prefixes: str) -> list[str]:
    return sorted(path.name for path in cases.iterdir() if path.name.startswith(prefixes))


def test_the_demo_gateway_fails_every_case_with_its_recorded_codes(demo_suite, tmp_path):
    report = tmp_path / "report.xml"
    run = calltap("replay", "--suite", demo_suite, "--demo-gateway", "--pace", "none",
                  "--junit", report)
    assert run.returncode == 1, run.stdout + run.stderr
    cases = junit_cases(report)
    assert set(cases) == {path.name for path in demo_suite.iterdir()}
    for name, case in cases.items():
        (failure,) = case.result
        assert isinstance(failure, Failure), name
        recorded = orjson.loads((demo_suite / name / recordings.PAIR_JSON).read_bytes())
        codes = list(dict.fromkeys(f["code"] for f in recorded["comparison"]["findings"]))
        expected = f"diverged again: recorded diverged ({', '.join(codes)}); replayed diverged ("
        assert failure.message.startswith(expected), failure.message
        assert failure.type in codes  # the worst replayed code
        properties = {p.name: p.value for p in case.child(Properties)}
        assert properties["calltap.case"] == str(demo_suite / name)
        assert properties["calltap.recorded.codes"] == ",".join(codes)
    assert f"0 passed, {len(cases)} failed, 0 error" in run.stdout
    assert named(demo_suite, *REQUEST_SIDE) and named(demo_suite, *ANSWER_SIDE)


def test_a_fixed_gateway_passes_every_case_request_and_answer_defects_alike(demo_suite,
                                                                            tmp_path):
    report = tmp_path / "report.xml"
    kept = tmp_path / "replayed"
    run = calltap("replay", "--suite", demo_suite, "--demo-gateway", "--pace", "none",
                  "--header", FIXED_GATEWAY, "--junit", report, "--recordings", kept, "--github")
    assert run.returncode == 0, run.stdout + run.stderr
    cases = junit_cases(report)
    assert all(case.is_passed for case in cases.values())
    for name in [*named(demo_suite, *REQUEST_SIDE), *named(demo_suite, *ANSWER_SIDE)]:
        properties = {p.name: p.value for p in cases[name].child(Properties)}
        assert properties["calltap.replayed.verdict"] == "equal"
        replayed = Path(properties["calltap.replayed_pair"])
        assert replayed.is_relative_to(kept) and (replayed / recordings.PAIR_JSON).is_file()
    assert "::" not in run.stdout  # no annotation: nothing failed


async def test_a_gateway_of_ones_own_runs_the_suite_too(demo_suite, tmp_path):
    """--gateway URL, as in CI: one request-side and one answer-side case, each fixed."""
    chosen = tmp_path / "cases"
    for name in (named(demo_suite, "request-tool-dropped-")[0],
                 named(demo_suite, "tool-calls-dropped-")[0]):
        shutil.copytree(demo_suite / name, chosen / name)
    async with FakeGateway(defect="none") as fixed:
        passed = await replay("--suite", chosen, "--pace", "none", "--json", "--header",
                              FIXED_GATEWAY, gateway=fixed)
    async with FakeGateway() as buggy:
        failed = await replay("--suite", chosen, "--pace", "none", "--json", gateway=buggy)
    assert passed.exit == 0, passed
    assert [case["outcome"] for case in passed.json["cases"]] == ["passed", "passed"]
    assert failed.exit == 1, failed
    outcomes = {case["name"]: case for case in failed.json["cases"]}
    assert {case["outcome"] for case in outcomes.values()} == {"failed"}
    for name, case in outcomes.items():
        assert case["replayed"]["codes"] == case["recorded"]["codes"], name


def unanswerable(case: Path, target: Path) -> Path:
    """A copy of `case` whose client asks another question than the provider was recorded
    answering: the cassette cannot answer the gateway."""
    shutil.copytree(case, target)
    request = orjson.loads((target / "downstream.request").read_bytes())
    request["messages"][-1]["content"] = "A question the provider never answered"
    (target / "downstream.request").write_bytes(orjson.dumps(request))
    return target


def test_a_case_the_cassette_cannot_answer_is_an_error_and_exits_3(demo_suite, tmp_path):
    cases = tmp_path / "cases"
    (first,) = named(demo_suite, "tool-calls-dropped-")[:1]
    unanswerable(demo_suite / first, cases / "asks-another-question")
    report = tmp_path / "report.xml"
    run = calltap("replay", "--suite", cases, "--demo-gateway", "--pace", "none",
                  "--header", FIXED_GATEWAY, "--junit", report, "--github")
    assert run.returncode == 3, run.stdout + run.stderr
    (error,) = junit_cases(report)["asks-another-question"].result
    assert isinstance(error, Error)
    assert error.message.startswith("the cassette cannot answer the gateway: POST"
                                    " /v1/chat/completions: the conversation's last turn differs")
    assert "::warning file=" in run.stdout and "::error" not in run.stdout


def test_a_failure_outranks_an_error_in_the_exit_code(demo_suite, tmp_path):
    cases = tmp_path / "cases"
    (first,) = named(demo_suite, "tool-calls-dropped-")[:1]
    unanswerable(demo_suite / first, cases / "asks-another-question")
    shutil.copytree(demo_suite / first, cases / first)
    run = calltap("replay", "--suite", cases, "--demo-gateway", "--pace", "none")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "0 passed, 1 failed, 1 error" in run.stdout


def test_github_annotations_rank_the_failures_and_say_how_many_more(demo_suite):
    run = calltap("replay", "--suite", demo_suite, "--demo-gateway", "--pace", "none",
                  "--github")
    assert run.returncode == 1
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    notices = [line for line in run.stdout.splitlines() if line.startswith("::notice ")]
    total = len(list(demo_suite.iterdir()))
    assert total > 10 and len(errors) == 10
    assert notices == [f"::notice title=calltap suite::{total - 10} more cases failed than"
                       " annotated here (GitHub shows 10 per step); every case is in the JUnit"
                       " report"]
    severities = [line.split("%3A ", 1)[1].split("(")[1].split(")")[0] for line in errors]
    order = ["fatal", "negotiable", "cosmetic", "warning"]
    assert severities == sorted(severities, key=order.index)


@pytest.mark.parametrize(("args", "message"), [
    (["--suite", "{missing}", "--demo-gateway"], "no such directory"),
    (["--suite", "{empty}", "--demo-gateway"], "no case in it"),
    (["--suite", "{suite}"], "--gateway URL is required"),
    (["{suite}", "--suite", "{suite}", "--demo-gateway"], "give no PAIR_DIR"),
    (["--suite", "{suite}", "--demo-gateway", "--code", "TOOL_CALLS_DROPPED"], "--code"),
    (["--suite", "{suite}", "--demo-gateway", "--junit", "{missing}/report.xml"],
     "no such directory"),
    (["{suite}", "--demo-gateway", "--junit", "report.xml"], "give --suite DIR"),
    (["{suite}", "--demo-gateway", "--github"], "give --suite DIR"),
    (["--suite", "{suite}", "--demo-gateway", "--github", "--json"], "give one"),
])
def test_usage_errors_exit_2_with_one_line(demo_suite, tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    values = {"suite": demo_suite, "missing": tmp_path / "missing", "empty": tmp_path / "empty"}
    run = calltap("replay", *(arg.format(**values) for arg in args))
    assert run.returncode == 2, run.stdout + run.stderr
    assert message in run.stderr and len(run.stderr.splitlines()) == 1, run.stderr
    assert not (tmp_path / "missing").exists()
