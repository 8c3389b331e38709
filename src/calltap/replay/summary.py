"""How a replay is shown: the recorded verdict and codes beside the replayed ones, one row per
pair, and a count of reproduced / different / cannot; a regression suite's cases the same way,
with each case's outcome and a count of passed / failed / error."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from calltap.replay.outcome import Result
from calltap.replay.suite import CaseResult, counts

STYLES = {"reproduced": "green", "different": "yellow", "cannot": "red"}


def show(results: list[Result], console: Console) -> None:
    table = _table("calltap replay: recorded beside replayed", "recorded pair", "result")
    for result in results:
        table.add_row(
            result.recorded.request_id,
            _verdict(result.recorded.verdict, result.recorded.codes),
            _verdict(result.verdict, result.codes),
            f"[{STYLES[result.status]}]{result.status}[/]",
        )
    console.print(table)
    for result in results:
        for note in result.notes():
            console.print(f"{result.recorded.request_id}: {note}", markup=False)
    counts = Counter(result.status for result in results)
    console.print(", ".join(f"{counts[status]} {status}" for status in STYLES))


def _table(title: str, first: str, last: str) -> Table:
    """What was replayed, its recorded and replayed verdicts with their codes, and the result."""
    table = Table(title=title)
    table.add_column(first, overflow="fold")
    table.add_column("recorded")
    table.add_column("replayed")
    table.add_column(last, no_wrap=True)
    return table


def _verdict(verdict: str, codes: tuple[str, ...]) -> str:
    return "\n".join((verdict, *codes))


SUITE_STYLES = {"passed": "green", "failed": "red", "error": "yellow"}


def show_suite(cases: Sequence[CaseResult], console: Console) -> None:
    """A regression suite's run: each case's recorded and replayed verdicts, and its outcome."""
    table = _table("calltap replay --suite: each case as a regression test", "case", "outcome")
    for case in cases:
        table.add_row(case.name, _verdict(*case.recorded), _verdict(*case.replayed),
                      f"[{SUITE_STYLES[case.outcome]}]{case.outcome}[/]")
    console.print(table)
    for case in cases:
        if case.outcome == "error":
            console.print(f"{case.name}: {case.message()}", markup=False)
        for note in case.notes():
            console.print(f"{case.name}: {note}", markup=False)
    tally = counts(cases)
    console.print(", ".join(f"{tally[outcome]} {outcome}" for outcome in SUITE_STYLES))
