"""How a replay is shown: the recorded verdict and codes beside the replayed ones, one row per
pair, and a count of reproduced / different / cannot."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from calltap.replay.outcome import Result

STYLES = {"reproduced": "green", "different": "yellow", "cannot": "red"}


def show(results: list[Result], console: Console) -> None:
    table = Table(title="calltap replay: recorded beside replayed")
    table.add_column("recorded pair", overflow="fold")
    table.add_column("recorded")
    table.add_column("replayed")
    table.add_column("result", no_wrap=True)
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


def _verdict(verdict: str, codes: tuple[str, ...]) -> str:
    return "\n".join((verdict, *codes))
