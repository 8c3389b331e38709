"""Summarize a recordings location from its index of pairs, and compare what was never compared.

The summary counts verdicts and finding codes and lists every capture that is not equal (or
clean), from the index of pairs (`_index/`): a bucket of a million pairs is summarized without
reading a pair.json. Pairs the proxy did not compare (its comparison backlog shed them, or
nothing compared them: a capture that is only leg bodies) are fetched and compared now with the
current rules, and with --recheck every selected pair is: a pair is compared, a single leg is
checked on its own, and a pair whose requests were recorded has them compared too, as `calltap
compare PAIR_DIR` does. A local tree's pairs that have no index row yet are read from their
pair.json (`calltap index rebuild` writes their rows). A directory of captures that is not a
recordings tree (no day directories in it) is walked, and every capture in it compared.

--since, --code, --route and --diverged narrow what is counted, listed and exported. With
--diverged --export-cases DIR, one regression case per distinct finding shape (route, dialects,
the set of finding codes and sides) is added to DIR, skipping shapes DIR already holds, for
`calltap replay --suite DIR --gateway URL` (exit 0 written, 2 usage error or a case that cannot
be written); only the newest pair of each shape is fetched.

exit codes: 0 all equal/clean, 1 any diverged or defective, 2 usage error, 3 else any inconclusive

examples:
  calltap scan recordings/
  calltap scan recordings/2026-11-30 --json | jq '.codes'
  calltap scan s3://staging-recordings --since 7d --code TOOL_CALLS_DROPPED
  calltap scan s3://staging-recordings --diverged --since 24h --export-cases cases/
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from calltap import recordings
from calltap.bucket_copy import BucketCopy, default_copy_location, fetch_pair, split_pair_url
from calltap.codes import Code
from calltap.commands.check import EXIT_CODES, usage_error
from calltap.compare import check_capture, compare_captures
from calltap.compare_pair import with_requests
from calltap.index import layout
from calltap.index.catalog import Catalog
from calltap.index.rows import RECORDED, SKIPPED
from calltap.index.selection import FINE, Listed, Tally, Wanted, parse_duration, selected, tally
from calltap.report import VERDICT_STYLES
from calltap.storage import BucketURL, StoreError, is_bucket
from calltap.transcript import Capture

UNCOMPARED = (RECORDED, SKIPPED)
LISTED = 200
"""Captures the table lists (the newest); --json lists them all."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR",
                        help="a recordings tree (or one day of it, or one capture), or"
                             " s3://BUCKET[/PREFIX][/DAY/ID]")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of tables"
    )
    parser.add_argument("--since", metavar="DURATION", type=_duration,
                        help="only pairs started within DURATION (30m, 24h, 7d, 2w)")
    parser.add_argument("--code", metavar="CODE", action="append", default=[], type=_code,
                        help="only pairs with this finding code (repeat for any of several)")
    parser.add_argument("--route", metavar="PATH", action="append", default=[],
                        help="only pairs of this route, as the index names it (for example"
                             " /v1/chat/completions; a model in the path reads {model})")
    parser.add_argument("--recheck", action="store_true",
                        help="compare every selected pair again with the current rules (fetching"
                             " a bucket's), not only those never compared")
    parser.add_argument("--diverged", action="store_true",
                        help="only the diverged pairs (counted, listed, exported)")
    parser.add_argument("--export-cases", metavar="DIR", type=Path,
                        help="with --diverged: add one regression case per distinct finding shape"
                             " to DIR (run them with `calltap replay --suite DIR`)")


def run(args: argparse.Namespace) -> int:
    try:
        source = _Source.of(args.directory)
    except (StoreError, ValueError) as error:
        return usage_error("scan", f"cannot read '{args.directory}': {error}")
    except NotADirectoryError as error:
        return usage_error("scan", f"cannot read '{args.directory}': {error}")
    if source.capture is not None or source.loose:
        root = source.capture or Path(source.location)
        directories = [root] if source.capture else recordings.capture_directories(root)
        if args.export_cases is not None:
            return _export(directories, args.export_cases, diverged=args.diverged)
        results = [_rescan(directory, root) for directory in directories]
        summary = _summary([result for result in results
                            if result["verdict"] == "diverged" or not args.diverged])
    else:
        wanted = Wanted(since=args.since, codes=tuple(args.code), routes=tuple(args.route),
                        day=source.day)
        try:
            if args.export_cases is not None:
                rows = source.rows(replace(wanted, verdicts=("diverged",)))
                return _export(source.fetch(_newest_of_each_shape(rows)),
                                      args.export_cases, diverged=args.diverged)
            summary = source.summary(wanted, recheck=args.recheck, diverged=args.diverged)
        except (StoreError, duckdb.Error) as error:
            return usage_error("scan", f"cannot read '{args.directory}': {error}")
        except OSError as error:
            return usage_error("scan", f"cannot read '{args.directory}':"
                                       f" {error.strerror or error}")
    if args.json:
        _print_json(summary)
    else:
        _render(summary, Console())
    verdicts = summary["verdicts"]
    if verdicts.get("diverged") or verdicts.get("defective"):
        return EXIT_CODES["diverged"]
    if verdicts.get("inconclusive"):
        return EXIT_CODES["inconclusive"]
    return 0


class _Source:
    """What DIR names: a tree (or one day of it) or a bucket, read through its index; or one
    capture, compared as it is."""

    def __init__(self, location: str, *, day: str | None = None,
                 capture: Path | None = None, loose: bool = False) -> None:
        self.location = location
        self.day = day
        self.capture = capture
        self.loose = loose
        """A directory of captures that is not a recordings tree (no day directories): every
        capture under it is compared, as found."""
        self.bucket = is_bucket(location)

    @classmethod
    def of(cls, text: str) -> _Source:
        if is_bucket(text):
            if split_pair_url(text) is not None:
                return cls(text, capture=fetch_pair(text))
            # No listing to check the bucket first: reading its index is the check.
            return cls(str(BucketURL.parse(text)))
        path = Path(text)
        if not path.is_dir():
            raise NotADirectoryError("no such directory" if not path.exists() else
                                     "not a directory")
        if any(recordings.leg_body(path, side) for side in recordings.SIDES):
            return cls(text, capture=path)
        days = any(recordings.is_day(entry.name) for entry in path.iterdir())
        if recordings.is_day(path.name) and not days:
            return cls(str(path.parent), day=path.name)
        return cls(text, loose=not days and not (path / layout.INDEX).is_dir())

    def rows(self, wanted: Wanted) -> list[dict[str, Any]]:
        catalog = self.catalog(wanted)
        try:
            return selected(catalog, wanted)
        finally:
            catalog.close()

    def catalog(self, wanted: Wanted) -> Catalog:
        """The index, loaded from the first day `wanted` can be in; what it skipped is said."""
        catalog = Catalog(self.location, legs_only=True,
                          first_day=wanted.first_day(datetime.now(UTC)))
        try:
            catalog.refresh()
            for key, why in catalog.problems.items():
                print(f"calltap scan: skipped index segment {key}: {why}", file=sys.stderr)
            if catalog.storage is not None and not catalog.loaded and any(
                    recordings.is_day(name) for name in asyncio.run(catalog.storage.folders())):
                print(f"calltap scan: {self.location} holds pairs but no index of pairs: run"
                      f" `calltap index rebuild {self.location}`", file=sys.stderr)
        except BaseException:
            catalog.close()
            raise
        return catalog

    def summary(self, wanted: Wanted, *, recheck: bool, diverged: bool) -> dict[str, Any]:
        """Counted by the index's engine, but for the pairs compared now: those never compared
        (or all, to recheck), fetched and compared with the current rules."""
        catalog = self.catalog(wanted)
        try:
            if recheck:
                compare_now, counted = selected(catalog, wanted), Tally({}, {}, [])
            else:
                compare_now = selected(catalog, replace(wanted, verdicts=UNCOMPARED))
                shown = replace(wanted, verdicts=("diverged",)) if diverged else wanted
                counted = tally(catalog, shown, leave_out=UNCOMPARED)
        finally:
            catalog.close()
        started = {_name(row): row["started_at"] for row in compare_now}
        root = default_copy_location(self.location) if self.bucket else Path(self.location)
        compared = [_rescan(directory, root) for directory in self.fetch(compare_now)]
        compared = [entry for entry in compared if entry["verdict"] == "diverged" or not diverged]
        verdicts = Counter(counted.verdicts) + Counter(entry["verdict"] for entry in compared)
        codes = Counter(counted.codes) + Counter(code for entry in compared
                                                 for code in entry["codes"])
        listed = counted.not_equal + [Listed.of(started.get(entry["capture"]), entry)
                                      for entry in compared if entry["verdict"] not in FINE]
        listed.sort(key=lambda item: item.order)
        return {"captures": sum(verdicts.values()), "verdicts": dict(verdicts),
                "codes": dict(sorted(codes.items())), "not_equal": listed}

    def fetch(self, rows: list[dict[str, Any]]) -> list[Path]:
        """The local directories of `rows`' pairs (a bucket's fetched first)."""
        pairs = [f"{row['day']}/{row['stored_as']}" for row in rows]
        if not self.bucket:
            return [Path(self.location) / pair for pair in pairs]
        copy = BucketCopy(self.location, default_copy_location(self.location))
        return asyncio.run(copy.copy_pairs(pairs))


def _export(directories: list[Path], cases: Path, *, diverged: bool) -> int:
    """`--export-cases`; imported only then (it brings the replay machinery, which a summary
    does not need and would pay for at every start)."""
    from calltap.replay.export_cases import export_command
    return export_command(directories, cases, diverged=diverged)


def _name(row: dict[str, Any]) -> str:
    return f"{row['day']}/{row['stored_as']}"


def _newest_of_each_shape(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (route, model, dialects, codes and sides): only those pairs are fetched to
    export. As fine as the export's own shapes or finer (the model splits a route whose path
    names it), so no shape is lost; the export merges what is finer."""
    newest: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        shape = (row["route"], row["model"], row["dialect_upstream"], row["dialect_downstream"],
                 tuple(sorted(zip(row["codes"] or (), row["sides"] or (), strict=False))))
        newest.setdefault(shape, row)
    return list(newest.values())


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
    if not captures:
        return _entry(name, "pair", RECORDED, [])
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
        "not_equal": [Listed((True, number, result["capture"]), orjson.dumps(result).decode())
                      for number, result in enumerate(results) if result["verdict"] not in FINE],
    }


def _print_json(summary: dict[str, Any]) -> None:
    """The summary as one JSON object; its list of pairs is spliced in as the JSON it holds."""
    listed = ("[" + ",".join(item.json for item in summary["not_equal"]) + "]").encode()
    sys.stdout.flush()
    sys.stdout.buffer.write(orjson.dumps({**summary, "not_equal": orjson.Fragment(listed)},
                                         option=orjson.OPT_APPEND_NEWLINE))
    sys.stdout.buffer.flush()


def _render(summary: dict[str, Any], console: Console) -> None:
    verdicts = ", ".join(f"{count} {verdict}" for verdict, count in summary["verdicts"].items())
    console.print(f"{summary['captures']} captures: {verdicts or 'none found'}", highlight=False)
    if summary["codes"]:
        codes = Table("code", "captures", show_edge=False, pad_edge=False)
        for code, count in summary["codes"].items():
            codes.add_row(code, str(count))
        console.print(codes)
    listed = [item.entry() for item in summary["not_equal"][-LISTED:]]
    if listed:
        table = Table("capture", "kind", "verdict", "codes", show_edge=False, pad_edge=False)
        for result in listed:
            verdict = result["verdict"]
            table.add_row(escape(result["capture"]), result["kind"],
                          f"[{VERDICT_STYLES.get(verdict, 'default')}]{verdict}[/]",
                          ", ".join(result["codes"]))
        console.print(table)
        more = len(summary["not_equal"]) - len(listed)
        if more:
            console.print(f"… and {more} older (--json lists every one)", highlight=False)


def _duration(text: str) -> Any:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _code(text: str) -> str:
    if text not in {str(code) for code in Code}:
        raise argparse.ArgumentTypeError(f"unknown finding code {text!r}")
    return text
