"""Re-check a recordings tree and print a summary.

Every directory under DIR that holds an upstream.<ext> and/or a downstream.<ext> body (the
recordings/<day>/<request-id>/ layout calltap writes) is compared again with the current rules: a
pair is compared, a single leg is checked on its own. The request path, status, Content-Encoding
and how each leg ended come from the pair.json beside them when there is one. A pair whose
requests were recorded (downstream.request and upstream.request) has them compared too, as
`calltap compare PAIR_DIR` does: a tool dropped, a tool choice changed, a message lost. Files
still named *.partial and earlier upstream attempts' answers are skipped; an empty leg counts as
a body with nothing in it.

The summary counts verdicts and finding codes and lists every capture that is not equal (or clean).

--diverged keeps only the diverged pairs; with --export-cases DIR it adds one regression case per
distinct finding shape (route, dialects, the set of finding codes and sides) to DIR, skipping
shapes DIR already holds, for `calltap replay --suite DIR --gateway URL` (exit 0 written, 2 usage
error or a case that cannot be written).

exit codes: 0 all equal/clean, 1 any diverged or defective, 2 usage error, 3 else any inconclusive

examples:
  calltap scan recordings/
  calltap scan recordings/2026-11-30 --json | jq '.codes'
  calltap scan s3://staging-recordings --diverged --since 24h --export-cases cases/
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from calltap import recordings
from calltap.bucket_copy import local_source
from calltap.commands.check import EXIT_CODES, print_json, usage_error
from calltap.compare import check_capture, compare_captures
from calltap.compare_pair import with_requests
from calltap.replay.export_cases import export_command
from calltap.report import VERDICT_STYLES
from calltap.storage import StoreError
from calltap.transcript import Capture

FINE = frozenset({"equal", "clean"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="a recordings tree (or one day of it), or s3://BUCKET[/PREFIX]")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of tables"
    )
    parser.add_argument("--diverged", action="store_true",
                        help="only the diverged pairs (counted, listed, exported)")
    parser.add_argument("--export-cases", metavar="DIR", type=Path,
                        help="with --diverged: add one regression case per distinct finding shape"
                             " to DIR (run them with `calltap replay --suite DIR`)")


def run(args: argparse.Namespace) -> int:
    try:
        root = local_source(args.directory)
    except (StoreError, ValueError) as error:
        return usage_error("scan", f"cannot read '{args.directory}': {error}")
    if not root.is_dir():
        reason = "no such directory" if not root.exists() else "not a directory"
        return usage_error("scan", f"cannot read '{root}': {reason}")
    if args.export_cases is not None:
        return export_command(recordings.capture_directories(root), args.export_cases,
                              diverged=args.diverged)
    try:
        results = [_rescan(directory, root) for directory in recordings.capture_directories(root)]
        results = [r for r in results if r["verdict"] == "diverged" or not args.diverged]
    except OSError as error:
        return usage_error("scan", f"cannot read '{root}': {error.strerror or error}")
    summary = _summary(results)
    if args.json:
        print_json(summary)
    else:
        _render(summary, Console())
    verdicts = summary["verdicts"]
    if verdicts.get("diverged") or verdicts.get("defective"):
        return EXIT_CODES["diverged"]
    if verdicts.get("inconclusive"):
        return EXIT_CODES["inconclusive"]
    return 0


def _rescan(directory: Path, root: Path) -> dict[str, Any]:
    legs = recordings.pair_legs(directory)
    captures: dict[str, Capture] = {}
    for side in recordings.SIDES:
        path = recordings.leg_body(directory, side)
        if path is not None:
            captures[side] = recordings.capture_of(path.read_bytes(), legs.get(side))
    name = str(directory.relative_to(root)) if directory != root else "."
    if len(captures) == 2:
        request = recordings.request_body(directory, legs.get("downstream"))
        comparison = compare_captures(captures["upstream"], captures["downstream"],
                                      downstream_request=request)
        comparison = with_requests(comparison, recordings.pair_requests(directory))
        return _entry(name, "pair", comparison.verdict, comparison.findings)
    ((stem, capture),) = captures.items()
    single = check_capture(capture)
    return _entry(name, stem, single.verdict, single.findings)


def _entry(name: str, kind: str, verdict: str, findings: list) -> dict[str, Any]:
    return {
        "capture": name,
        "kind": kind,
        "verdict": verdict,
        "codes": sorted({str(finding.code) for finding in findings}),
    }


def _summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "captures": len(results),
        "verdicts": dict(Counter(result["verdict"] for result in results)),
        "codes": dict(
            sorted(Counter(code for result in results for code in result["codes"]).items())
        ),
        "not_equal": [result for result in results if result["verdict"] not in FINE],
    }


def _render(summary: dict[str, Any], console: Console) -> None:
    verdicts = ", ".join(f"{count} {verdict}" for verdict, count in summary["verdicts"].items())
    console.print(f"{summary['captures']} captures: {verdicts or 'none found'}", highlight=False)
    if summary["codes"]:
        codes = Table("code", "captures", show_edge=False, pad_edge=False)
        for code, count in summary["codes"].items():
            codes.add_row(code, str(count))
        console.print(codes)
    if summary["not_equal"]:
        table = Table("capture", "kind", "verdict", "codes", show_edge=False, pad_edge=False)
        for result in summary["not_equal"]:
            verdict = result["verdict"]
            table.add_row(
                result["capture"],
                result["kind"],
                f"[{VERDICT_STYLES[verdict]}]{verdict}[/]",
                ", ".join(result["codes"]),
            )
        console.print(table)
