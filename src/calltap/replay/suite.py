"""A folder of regression cases run as a test suite of a gateway build.

Every case (`calltap replay --export`'s format, or `calltap scan --export-cases`') holds a
divergence once seen. Run as a regression test, a case passes when its replayed pair is `equal`
(the divergence stays fixed), fails when it diverges again (a regression), and is an error when
the run cannot judge it: the case cannot be read, the gateway asked the cassette for something it
does not hold, calltap never compared the replayed pair, or the comparison is inconclusive.

This is not `replay --case`'s question ("is the recording reproduced?"): there a case that still
diverges is the expected outcome, here it is the failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from calltap import recordings
from calltap.codes import Severity
from calltap.replay.cassette import CassetteError, Recorded, load
from calltap.replay.outcome import Result
from calltap.replay.session import Settings, replay_all

Outcome = Literal["passed", "failed", "error"]
EXIT_CODES: dict[Outcome, int] = {"passed": 0, "failed": 1, "error": 3}
SEVERITY_RANK = {severity: rank for rank, severity in enumerate(Severity)}
"""Worst first: fatal, negotiable, cosmetic, warning."""
UNRANKED = len(SEVERITY_RANK)


class SuiteError(ValueError):
    """A suite directory that holds no case; the message is the one line shown."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case run as a regression test: its replay, or why it could not be replayed."""

    name: str
    """The case's directory relative to the suite's (its testcase name)."""
    directory: Path
    result: Result | None = None
    unreadable: str | None = None
    replayed_directory: Path | None = None
    """Where the replayed pair was kept (`--recordings`); None when it was not."""

    @property
    def outcome(self) -> Outcome:
        result = self.result
        if result is None or result.player.misses or result.pair is None:
            return "error"
        return {"equal": "passed", "diverged": "failed"}.get(result.verdict, "error")

    @property
    def recorded(self) -> tuple[str, tuple[str, ...]]:
        """The recorded verdict and codes (what the case was exported for)."""
        if self.result is None:
            return "unknown", ()
        return self.result.recorded.verdict, self.result.recorded.codes

    @property
    def replayed(self) -> tuple[str, tuple[str, ...]]:
        if self.result is None:
            return "not replayed", ()
        return self.result.verdict, self.result.codes

    @property
    def findings(self) -> list[dict[str, Any]]:
        """The replayed comparison's findings, worst first."""
        found = self.result.comparison.get("findings") if self.result else None
        findings = [f for f in found if isinstance(f, dict)] if isinstance(found, list) else []
        return sorted(findings, key=_finding_rank)

    @property
    def rank(self) -> tuple[int, int, str]:
        """Where the case stands among failures: worst severity first, then the most findings
        of that severity, then by name (so the order is stable)."""
        findings = self.findings
        worst = _finding_rank(findings[0]) if findings else UNRANKED
        return worst, -sum(_finding_rank(f) == worst for f in findings), self.name

    def message(self) -> str:
        """One line: what the case showed (the failure or error message)."""
        if self.unreadable is not None:
            return f"the case cannot be read: {self.unreadable}"
        assert self.result is not None
        recorded, replayed = _judged(*self.recorded), _judged(*self.replayed)
        if self.result.player.misses:
            misses = "; ".join(map(str, self.result.player.misses))
            return f"the cassette cannot answer the gateway: {misses} (recorded {recorded})"
        if self.result.pair is None:
            why = self.result.client_error or "calltap compared no replayed pair"
            return f"no replayed pair to judge: {why} (recorded {recorded})"
        outcome = self.outcome
        if outcome == "failed":
            return f"diverged again: recorded {recorded}; replayed {replayed}"
        if outcome == "passed":
            return f"stays fixed: recorded {recorded}; replayed {replayed}"
        return f"the replayed pair cannot be judged: replayed {replayed}; recorded {recorded}"

    def notes(self) -> list[str]:
        return self.result.notes() if self.result is not None else []

    def as_json(self) -> dict[str, Any]:
        (recorded, recorded_codes), (replayed, replayed_codes) = self.recorded, self.replayed
        return {
            "name": self.name,
            "directory": str(self.directory),
            "outcome": self.outcome,
            "message": self.message(),
            "recorded": {"verdict": recorded, "codes": list(recorded_codes)},
            "replayed": {"verdict": replayed, "codes": list(replayed_codes),
                         "directory": (str(self.replayed_directory)
                                       if self.replayed_directory else None)},
            "notes": self.notes(),
        }


def _finding_rank(finding: dict[str, Any]) -> int:
    try:
        return SEVERITY_RANK[Severity(finding.get("severity"))]
    except ValueError:
        return UNRANKED


def _judged(verdict: str, codes: Sequence[str]) -> str:
    return f"{verdict} ({', '.join(codes)})" if codes else verdict


def case_directories(root: Path) -> list[Path]:
    """The cases of a suite directory (itself, when it is one case); SuiteError when none."""
    if not root.is_dir():
        raise SuiteError(f"{root}: no such directory")
    found = recordings.capture_directories(root)
    if not found:
        raise SuiteError(f"{root}: no case in it (export some with `calltap replay PAIR_DIR"
                         " --export DIR` or `calltap scan SOURCE --diverged --export-cases DIR`)")
    return found


async def run_suite(root: Path, settings: Settings, log: TextIO, *,
                    keep: bool = False) -> list[CaseResult]:
    """Replay every case under `root` through the gateway, in the order of their paths."""
    loaded: dict[Path, Recorded] = {}
    unreadable: dict[Path, str] = {}
    directories = case_directories(root)
    for directory in directories:
        try:
            loaded[directory] = load(directory)
        except CassetteError as error:
            unreadable[directory] = str(error)
    replayed = dict(zip(loaded, await replay_all(loaded.values(), settings, log), strict=True))
    return [_case(root, directory, replayed.get(directory), unreadable.get(directory),
                  settings.recordings if keep else None)
            for directory in directories]


def _case(root: Path, directory: Path, result: Result | None, unreadable: str | None,
          kept: Path | None) -> CaseResult:
    name = directory.relative_to(root).as_posix() if directory != root else directory.name
    replayed_directory = None
    if kept is not None and result is not None and result.pair is not None:
        replayed_directory = recordings.find_capture(kept, str(result.pair.get("request_id")))
    return CaseResult(name, directory, result, unreadable, replayed_directory)


def exit_code(cases: Sequence[CaseResult]) -> int:
    """1 when any case failed, else 3 when any was an error, else 0."""
    outcomes = {case.outcome for case in cases}
    for outcome in ("failed", "error"):
        if outcome in outcomes:
            return EXIT_CODES[outcome]
    return EXIT_CODES["passed"]


def counts(cases: Sequence[CaseResult]) -> dict[Outcome, int]:
    tally: dict[Outcome, int] = {"passed": 0, "failed": 0, "error": 0}
    for case in cases:
        tally[case.outcome] += 1
    return tally
