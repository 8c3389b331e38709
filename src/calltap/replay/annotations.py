"""A regression suite's failures as GitHub Actions workflow annotations.

A workflow step that prints `::error title=T::M` gets an annotation on the run's summary page;
GitHub shows at most 10 error annotations (and 10 warnings) per step and drops the rest, so the
failures are ranked first: the worst severity among the replayed findings (fatal before
negotiable before cosmetic), then the most findings of that severity, then the case's name. The
first 10 are annotated and a notice says how many more failed (every one is in the JUnit report).
Cases the run could not judge are `::warning`s, by name, under the same limit. Each
annotation names the case's README (`file=`), which says how to run it alone.

Values are escaped as GitHub's workflow command syntax requires: `%`, `\\r` and `\\n` in the
message; those and `:` and `,` in a property. Pure: results in, lines out.
"""

from __future__ import annotations

from collections.abc import Sequence

from calltap import recordings
from calltap.replay.suite import CaseResult

LIMIT = 10
"""Annotations of one kind GitHub shows for a step."""


def annotations(cases: Sequence[CaseResult], limit: int = LIMIT) -> list[str]:
    """The workflow command lines for the failures (ranked) and the errors of a suite run."""
    failures = sorted((case for case in cases if case.outcome == "failed"),
                      key=lambda case: case.rank)
    errors = [case for case in cases if case.outcome == "error"]
    lines = [_command("error", _failure_title(case), case.message(), case)
             for case in failures[:limit]]
    lines += [_command("warning", f"calltap case {case.name} could not be judged",
                       case.message(), case) for case in errors[:limit]]
    for kind, cases_of_kind in (("failed", failures), ("could not be judged", errors)):
        if len(cases_of_kind) > limit:
            more = len(cases_of_kind) - limit
            lines.append(_command("notice", "calltap suite",
                                  f"{more} more case{'s' if more != 1 else ''} {kind} than"
                                  f" annotated here (GitHub shows {limit} per step); every case"
                                  " is in the JUnit report"))
    return lines


def _failure_title(case: CaseResult) -> str:
    findings = case.findings
    worst = f": {findings[0].get('code')} ({findings[0].get('severity')})" if findings else ""
    return f"calltap case {case.name} diverged again{worst}"


def _command(kind: str, title: str, message: str, case: CaseResult | None = None) -> str:
    properties = [f"title={escape_property(title)}"]
    if case is not None:
        readme = case.directory / recordings.CASE_README
        properties.insert(0, f"file={escape_property(readme.as_posix())}")
    return f"::{kind} {','.join(properties)}::{escape_data(message)}"


def escape_data(text: str) -> str:
    """A command's message as GitHub reads it back."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value (`title=`, `file=`) as GitHub reads it back."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
