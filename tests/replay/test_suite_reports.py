"""A suite's reports as units: the JUnit XML read back by junitparser whatever the cases hold, and
GitHub's annotations ranked, capped at 10 and escaped as its workflow command syntax requires."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from junitparser import Error, Failure, JUnitXml

from calltap.codes import Severity
from calltap.replay.annotations import annotations, escape_data, escape_property
from calltap.replay.cassette import load
from calltap.replay.junit import junit_xml
from calltap.replay.matching import Miss, Player
from calltap.replay.outcome import Result
from calltap.replay.suite import CaseResult

RECORDED = load(Path(__file__).parent / "cases" / "drop-second-call")
ORDER = [str(severity) for severity in Severity]

FINDINGS = st.lists(st.fixed_dictionaries({
    "code": st.sampled_from(["TOOL_CALLS_DROPPED", "USAGE_CHANGED", "TOOL_CALL_IDS_REMAPPED"]),
    "severity": st.sampled_from(ORDER),
    "side": st.sampled_from(["downstream", "request"]),
    "detail": st.text(max_size=12),
}), max_size=4)
CASE = st.one_of(
    st.tuples(st.just("passed"), st.just([])),
    st.tuples(st.just("failed"), FINDINGS.filter(bool)),
    st.tuples(st.just("error"), st.just([])),
)


def case_result(name: str, outcome: str, findings: list[dict[str, Any]]) -> CaseResult:
    """A case run to `outcome` (an error: the cassette missed), with these replayed findings."""
    player = Player(RECORDED.cassette)
    if outcome == "error":
        player.misses.append(Miss("POST", "/v1/chat/completions", "the conversation's last"
                                  " turn differs from attempt 1's"))
    verdict = "equal" if outcome == "passed" else "diverged"
    pair = {"request_id": f"r-{name}", "comparison": {"verdict": verdict, "findings": findings}}
    return CaseResult(name, Path("cases") / name, Result(RECORDED, pair, player))


def suite(drawn: list[tuple[str, list[dict[str, Any]]]], names: list[str] | None = None
          ) -> list[CaseResult]:
    names = names or [f"case-{number:03}" for number in range(len(drawn))]
    return [case_result(name, outcome, findings)
            for name, (outcome, findings) in zip(names, drawn, strict=True)]


@given(st.text())
def test_escaped_values_read_back_and_hold_no_separator(text):
    data, prop = escape_data(text), escape_property(text)
    assert not {"\r", "\n"} & set(data) and not {"\r", "\n", ":", ","} & set(prop)
    unescape = {"%25": "%", "%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ","}
    for escaped in (data, prop):
        assert re.sub("%(25|0D|0A|3A|2C)", lambda m: unescape[m.group(0)], escaped) == text


@given(st.lists(CASE, max_size=30))
def test_at_most_10_failures_are_annotated_the_worst_ones_and_the_rest_counted(drawn):
    cases = suite(drawn)
    lines = annotations(cases)
    failures = sorted((case for case in cases if case.outcome == "failed"),
                      key=lambda case: case.rank)
    errors = [case for case in cases if case.outcome == "error"]
    annotated = [line for line in lines if line.startswith("::error ")]
    assert len(annotated) == min(len(failures), 10)
    assert len([line for line in lines if line.startswith("::warning ")]) == min(len(errors), 10)
    for line, case in zip(annotated, failures, strict=False):
        assert f"title=calltap case {case.name} diverged again%3A" in line
    worst_left_out = [case.rank[0] for case in failures[10:]]
    assert all(case.rank[0] <= min(worst_left_out, default=99) for case in failures[:10])
    notices = [line for line in lines if line.startswith("::notice ")]
    assert len(notices) == (len(failures) > 10) + (len(errors) > 10)
    if len(failures) > 10:
        assert f"::{len(failures) - 10} more case" in notices[0]


def test_a_fatal_failure_is_annotated_before_a_cosmetic_one_whatever_their_names():
    cases = suite([("failed", [{"code": "TOOL_CALL_IDS_REMAPPED", "severity": "cosmetic"}]),
                   ("failed", [{"code": "TOOL_CALLS_DROPPED", "severity": "fatal"}])],
                  ["a-cosmetic", "z-fatal"])
    assert [line.split("title=calltap case ")[1].split(" ")[0]
            for line in annotations(cases)] == ["z-fatal", "a-cosmetic"]


NAMES = st.text(min_size=1, max_size=20)


@given(st.lists(CASE, min_size=1, max_size=12), st.lists(NAMES, min_size=12, max_size=12,
                                                          unique=True))
def test_junit_reads_back_whatever_the_cases_are_named_and_hold(tmp_path_factory, drawn, names):
    cases = suite(drawn, names[:len(drawn)])
    report = tmp_path_factory.mktemp("junit") / "report.xml"
    report.write_bytes(junit_xml(cases, "cases", seconds=1.5))
    (testsuite,) = JUnitXml.fromfile(str(report))
    assert (testsuite.tests, testsuite.failures, testsuite.errors) == (
        len(cases), sum(c.outcome == "failed" for c in cases),
        sum(c.outcome == "error" for c in cases))
    read = list(testsuite)
    assert len(read) == len(cases)
    for testcase, case in zip(read, cases, strict=True):
        kinds = [type(result) for result in testcase.result]
        assert kinds == {"passed": [], "failed": [Failure], "error": [Error]}[case.outcome]
        if case.outcome == "failed":
            (failure,) = testcase.result
            assert failure.type == case.findings[0]["code"]
            assert failure.message.startswith("diverged again: recorded diverged"
                                              " (TOOL_CALLS_DROPPED, TOOL_CALL_SET_CHANGED);"
                                              " replayed diverged (")
