"""A day of staging's divergences as a regression suite: one case per distinct finding shape.

Staging sees the same bug many times; a suite needs it once. A diverged pair's shape is
(the client's route, the upstream and downstream dialects, the sorted set of its findings'
(code, side)): the route and dialects say which translation path broke, the (code, side) set
what broke and where (the answer the client got, or the request the provider got). Codes of
every severity count, so a pair that also lost its usage is a shape of its own. Of the pairs of
one shape the newest (by when the client's request started, then by request id) becomes the
case, in `calltap replay --export`'s format, named `<worst code>-<route>-<digest>` (lower case,
dashes; the digest is the shape's, so the name is stable from run to run and says what broke).

Exporting adds to DIR: a shape some case in DIR already has (whatever that case is named) is
skipped, so exporting the same recordings twice adds nothing and a suite grows day by day
without a case being overwritten. Cases are written in a temporary directory and renamed into
place whole: nothing half-written is ever left in DIR.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from calltap import recordings
from calltap.replay.case import export
from calltap.replay.cassette import CassetteError, load, with_recorded_requests
from calltap.replay.suite import SEVERITY_RANK, UNRANKED

DIGEST_LENGTH = 10
ROUTE_LENGTH = 40
NOT_NAME = re.compile(r"[^a-z0-9]+")
EXIT_USAGE = 2


@dataclass(frozen=True, slots=True, order=True)
class Shape:
    """What makes two diverged pairs the same regression."""

    route: str
    dialects: tuple[str, str]
    """(upstream, downstream)."""
    findings: tuple[tuple[str, str], ...]
    """Sorted, distinct (code, side)."""
    worst: str = field(compare=False, default="")
    """The code of the worst finding, for the case's name."""

    @property
    def digest(self) -> str:
        identity = orjson.dumps([self.route, self.dialects, self.findings])
        return hashlib.sha256(identity).hexdigest()[:DIGEST_LENGTH]

    @property
    def name(self) -> str:
        """The case directory's name: stable, safe, and saying what broke where."""
        route = NOT_NAME.sub("-", self.route.lower()).strip("-")[:ROUTE_LENGTH].strip("-")
        code = NOT_NAME.sub("-", self.worst.lower()).strip("-") or "diverged"
        return "-".join(part for part in (code, route, self.digest) if part)


@dataclass
class Exported:
    """What an export did."""

    written: list[str] = field(default_factory=list)
    """Case directory names added to DIR."""
    present: int = 0
    """Shapes skipped because a case in DIR already has them."""
    diverged: int = 0
    """Diverged pairs read."""
    unreadable: list[str] = field(default_factory=list)


def shape_of(document: dict[str, Any], comparison: dict[str, Any]) -> Shape | None:
    """The shape of a diverged pair (pair.json and its comparison); None when not diverged."""
    if comparison.get("verdict") != "diverged":
        return None
    legs = document.get("legs")
    downstream = legs.get("downstream") if isinstance(legs, dict) else None
    route = downstream.get("path") if isinstance(downstream, dict) else None
    findings = [f for f in comparison.get("findings") or () if isinstance(f, dict)]
    pairs = sorted({(str(f.get("code")), str(f.get("side"))) for f in findings})
    worst = min(findings, key=_severity_rank, default={}).get("code")
    return Shape(route if isinstance(route, str) else "", (_dialect(comparison, "upstream"),
                 _dialect(comparison, "downstream")), tuple(pairs), str(worst or ""))


def _severity_rank(finding: dict[str, Any]) -> int:
    return SEVERITY_RANK.get(finding.get("severity"), UNRANKED)  # type: ignore[arg-type]


def _dialect(comparison: dict[str, Any], side: str) -> str:
    leg = comparison.get(side)
    dialect = leg.get("dialect") if isinstance(leg, dict) else None
    return dialect if isinstance(dialect, str) else "unknown"


def read_shape(directory: Path) -> tuple[Shape | None, str]:
    """A pair directory's shape and the key that orders pairs of one shape (newest last)."""
    document = recordings.read_pair(directory)
    comparison = with_recorded_requests(directory, document.get("comparison"))
    legs = document.get("legs")
    downstream = legs.get("downstream") if isinstance(legs, dict) else None
    started = downstream.get("started_at") if isinstance(downstream, dict) else None
    order = f"{started if isinstance(started, str) else ''}|{document.get('request_id', '')}"
    return shape_of(document, comparison), order


def choose(directories: Iterable[Path], exported: Exported) -> dict[Shape, Path]:
    """The newest diverged pair of each shape among `directories`."""
    newest: dict[Shape, tuple[str, Path]] = {}
    for directory in directories:
        try:
            shape, order = read_shape(directory)
        except (recordings.PairUnreadable, OSError) as error:
            exported.unreadable.append(f"{directory}: {error}")
            continue
        if shape is None:
            continue
        exported.diverged += 1
        if shape not in newest or order > newest[shape][0]:
            newest[shape] = (order, directory)
    return {shape: directory for shape, (_, directory) in newest.items()}


def present_shapes(target: Path) -> set[Shape]:
    """The shapes of the cases already in `target` (none when it does not exist)."""
    if not target.is_dir():
        return set()
    found: set[Shape] = set()
    for directory in recordings.capture_directories(target):
        try:
            shape, _ = read_shape(directory)
        except (recordings.PairUnreadable, OSError):
            continue
        if shape is not None:
            found.add(shape)
    return found


def export_cases(directories: Iterable[Path], target: Path) -> Exported:
    """One case per distinct shape of the diverged pairs among `directories`, added to
    `target` (created when missing); shapes `target` already holds are skipped. OSError or
    CassetteError when a case cannot be written: what was renamed into `target` before is
    whole, nothing else is left behind."""
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target}: not a directory")
    exported = Exported()
    chosen = choose(directories, exported)
    present = present_shapes(target)
    exported.present = len(chosen.keys() & present)
    new = {shape: directory for shape, directory in chosen.items() if shape not in present}
    if not new:
        return exported
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.export-", dir=target.parent))
    try:
        for shape in sorted(new):
            export(load(new[shape]), staging / shape.name)
        _place(staging, target, sorted(shape.name for shape in new), exported)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return exported


def _place(staging: Path, target: Path, names: list[str], exported: Exported) -> None:
    """Rename the staged cases into `target`: the whole staging directory when `target` is new,
    else each case in turn (each rename whole; a name already taken is an error)."""
    if not target.exists():
        staging.rename(target)
        target.chmod(0o700)
        exported.written = names
        return
    for name in names:
        if (target / name).exists():
            raise FileExistsError(f"{target / name}: already exists with another shape")
        (staging / name).rename(target / name)
        exported.written.append(name)


def export_command(directories: Iterable[Path], target: Path, *, diverged: bool) -> int:
    """`calltap scan SOURCE --diverged --export-cases DIR`: export, say what was written and
    skipped, and return the exit code (0 done, 2 usage error or a case that cannot be written)."""
    if not diverged:
        print("calltap scan: --export-cases DIR needs --diverged (a suite holds divergences)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        exported = export_cases(directories, target)
    except (OSError, CassetteError) as error:
        print(f"calltap scan: --export-cases {target}: {error}", file=sys.stderr)
        return EXIT_USAGE
    for reason in exported.unreadable:
        print(f"skipped: {reason}")
    for name in exported.written:
        print(f"case: {target / name}")
    written = len(exported.written)
    print(f"{_count(exported.diverged, 'diverged pair')},"
          f" {_count(written + exported.present, 'distinct shape')}:"
          f" {_count(written, 'case')} written to {target}, {exported.present} already there;"
          f" run: calltap replay --suite {target} --gateway URL")
    return 0


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' if number != 1 else ''}"
