"""`calltap report`'s two files, rendered in memory: report.html (the view's templates, inline
style, no script) and results.json (the comparisons).

Every pair is a row of the summary; a pair that is not equal (or clean) also gets the view's
pair page as a section of its own. `redact=True` keeps codes, severities, positions and counts
only: pairs are numbered instead of named, and no text, function name, argument, id, header or
path is written.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from calltap.view import templating
from calltap.view.pages import PairPage
from calltap.view.source import RecordedPair

FINE = frozenset({"equal", "clean"})


@dataclass(slots=True)
class Entry:
    """One pair (or single capture) of the report."""

    name: str
    page: PairPage
    recorded: RecordedPair | None = None

    @property
    def verdict(self) -> str:
        return self.page.verdict

    @property
    def codes(self) -> list[str]:
        return sorted({finding.code for finding in self.page.findings})


def render(entries: list[Entry], source: Path, *, redact: bool) -> dict[str, bytes]:
    """File name to bytes: `report.html` and `results.json`."""
    names = [f"pair-{number}" if redact else entry.name
             for number, entry in enumerate(entries, 1)]
    verdicts = dict(Counter(entry.verdict for entry in entries))
    results = {
        "verdicts": verdicts,
        "pairs": [_result(name, entry, redact) for name, entry in zip(names, entries,
                                                                      strict=True)],
    }
    html = templating.render(
        "report.html", base="", inline_style=True, redact=redact,
        source=None if redact else str(source),
        generated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        rows=[(number, name, entry) for number, (name, entry)
              in enumerate(zip(names, entries, strict=True), 1)], verdicts=verdicts, fine=FINE,
    )
    return {
        "report.html": html.encode("utf-8"),
        "results.json": orjson.dumps(results, option=orjson.OPT_INDENT_2) + b"\n",
    }


def exit_code(entries: list[Entry]) -> int:
    """0 all equal/clean, 1 any diverged/defective, 3 any inconclusive (and none diverged)."""
    verdicts = {entry.verdict for entry in entries}
    if verdicts & {"diverged", "defective"}:
        return 1
    return 3 if "inconclusive" in verdicts else 0


def _result(name: str, entry: Entry, redact: bool) -> dict[str, Any]:
    return {
        "capture": name,
        "verdict": entry.verdict,
        "codes": entry.codes,
        "report": entry.page.structural if redact else entry.page.report,
    }
