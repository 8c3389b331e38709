"""What a probe run leaves behind: a new private directory with `report.html`, `results.json` and
`trace.json`.

The directory must not exist (a run never mixes with or overwrites an earlier one); it is made
0700 and each file 0600 whatever the umask, created exclusively and never through a symlink. If
anything cannot be written, what was written is removed: a report is whole or absent. Every
string was masked before it gets here; the HTML comes from the view's templates (autoescape on,
no script, the stylesheet inlined and allowed by hash).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from calltap.probe.probes import PROBES
from calltap.probe.runner import Outcome
from calltap.view.templating import render

REPORT = "report.html"
RESULTS = "results.json"
TRACE = "trace.json"
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


class OutputError(Exception):
    """The output directory cannot be used or written; the message says why."""


@dataclass(frozen=True, slots=True)
class Results:
    """Everything a run reports, already masked."""

    meta: dict[str, Any]
    """base_url, dialect, model, synthetic, started_at, finished_at, attribution note."""
    outcomes: list[Outcome]
    trace: list[dict[str, Any]]

    @property
    def passed(self) -> int:
        return sum(outcome.passed for outcome in self.outcomes)

    def as_json(self) -> dict[str, Any]:
        return {
            **self.meta,
            "passed": self.passed,
            "total": len(self.outcomes),
            "probes": [outcome_json(outcome) for outcome in self.outcomes],
        }


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    """One probe in results.json: name, passed, expected, received, reason, and `pair` when a
    calltap front recorded it."""
    entry: dict[str, Any] = {
        "name": outcome.name,
        "passed": outcome.passed,
        "expected": outcome.expected,
        "received": outcome.received,
        "reason": outcome.reason,
        "request_ids": outcome.request_ids,
        "seconds": outcome.seconds,
    }
    if outcome.pair is not None:
        entry["pair"] = outcome.pair
    return entry


def check_output(path: Path) -> None:
    """Refuse, before anything is sent, a directory that exists or cannot be made."""
    if path.exists() or path.is_symlink():
        raise OutputError(f"{path} already exists; give a new directory with --output")
    parent = path.parent
    if not parent.is_dir():
        raise OutputError(f"{parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{parent} is not writable")


def write_output(path: Path, results: Results) -> None:
    """Write the three files into a new 0700 directory; OutputError (and nothing left) if not."""
    files = {
        RESULTS: _json(results.as_json()),
        TRACE: _json({"exchanges": results.trace}),
        REPORT: report_html(results).encode("utf-8"),
    }
    try:
        os.mkdir(path, DIRECTORY_MODE)
    except OSError as error:
        raise OutputError(f"cannot create {path}: {error.strerror or error}") from error
    try:
        os.chmod(path, DIRECTORY_MODE)
        _write_files(path, files)
    except OSError as error:
        _remove(path, files)
        raise OutputError(f"cannot write into {path}: {error.strerror or error}") from error


def report_html(results: Results) -> str:
    return render(
        "probe.html",
        inline_style=True,
        base="",
        meta=results.meta,
        outcomes=[outcome_json(outcome) for outcome in results.outcomes],
        passed=results.passed,
        total=len(results.outcomes),
        summaries={name: probe.summary for name, probe in PROBES.items()},
        pretty=_pretty,
    )


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=float).decode()


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=float) + b"\n"


def _write_files(directory: Path, files: Mapping[str, bytes]) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for name, data in files.items():
        descriptor = os.open(directory / name, flags, FILE_MODE)
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(data)


def _remove(directory: Path, files: Mapping[str, bytes]) -> None:
    for name in files:
        (directory / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        directory.rmdir()
