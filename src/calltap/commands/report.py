"""Write a private static report of recordings: OUT/report.html and OUT/results.json.

SOURCE is a recordings tree (every capture under it), one pair directory, or two capture files
(UPSTREAM DOWNSTREAM, as for `calltap compare`). Every capture is compared (or checked) again
with the current rules. report.html lists them all with their verdicts and codes, and shows
each one that is not equal (or clean) the way `calltap view` shows a pair: both legs side by
side, the findings linked to their raw events, headers and timings. It has no script and no
external asset (its style is inline), and every captured string in it is escaped. results.json
holds each capture's verdict, codes and comparison object (as `calltap compare --json`).

OUT must not exist: it is created 0700 and its files 0600, since recordings hold prompts and
answers. --redact keeps codes, severities, positions and counts only (captures are numbered,
not named; no text, function names, arguments, ids, headers or paths), for sharing.

exit codes: 0 all equal/clean, 1 any diverged/defective, 2 usage error (OUT exists, SOURCE
unreadable or holding no capture), 3 any inconclusive (and none diverged)

examples:
  calltap report recordings -o report-2026-11-30
  calltap report recordings/2026-11-30/req-1 -o req-1-report --redact
  calltap report upstream.sse downstream.sse -o one-pair
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from calltap import recordings
from calltap.bucket_copy import local_source
from calltap.commands.check import UnreadableCapture, read_capture, usage_error
from calltap.storage import StoreError
from calltap.view import static_report
from calltap.view.pages import build_page
from calltap.view.source import read_recorded
from calltap.view.static_report import Entry


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE", nargs="+",
                        help="a recordings tree, a pair directory, s3://BUCKET[/PREFIX][/DAY/ID],"
                             " or UPSTREAM DOWNSTREAM files")
    parser.add_argument("-o", "--output", metavar="OUT", required=True, type=Path,
                        help="the report directory to create (must not exist)")
    parser.add_argument("--redact", action="store_true",
                        help="codes, severities, positions and counts only, for sharing")


def run(args: argparse.Namespace) -> int:
    try:
        sources = [local_source(source) for source in args.source]
    except (StoreError, ValueError) as error:
        return usage_error("report", f"cannot read '{args.source[0]}': {error}")
    if len(sources) > 2:
        return usage_error("report", "SOURCE: one directory, or two capture files")
    if args.output.exists() or args.output.is_symlink():
        return usage_error("report", f"'{args.output}' already exists: choose a new directory")
    try:
        entries = _entries(sources)
    except (UnreadableCapture, OSError) as error:
        return usage_error("report", error)
    if not entries:
        return usage_error("report", f"no capture found under '{sources[0]}'")
    files = static_report.render(entries, sources[0], redact=args.redact)
    try:
        write_private(args.output, files)
    except OSError as error:
        return usage_error("report", f"cannot write '{args.output}': {error.strerror or error}")
    print(f"calltap report: {args.output / 'report.html'} ({len(entries)} captures)")
    return static_report.exit_code(entries)


def _entries(sources: list[Path]) -> list[Entry]:
    if len(sources) == 2:
        upstream, downstream = (read_capture(path) for path in sources)
        request = recordings.request_body(
            sources[1].parent, recordings.pair_legs(sources[1].parent).get("downstream"))
        page = build_page(upstream, downstream, request=request)
        return [Entry(f"{sources[0].name} → {sources[1].name}", page)]
    (root,) = sources
    if not root.is_dir():
        reason = "no such directory" if not root.exists() else "not a directory or two files"
        raise UnreadableCapture(f"cannot read '{root}': {reason}")
    entries = []
    for directory in recordings.capture_directories(root):
        recorded = read_recorded(directory, directory.parent.name, directory.name)
        if recorded is not None:
            name = str(directory.relative_to(root)) if directory != root else directory.name
            entries.append(Entry(name, recorded.page, recorded))
    return entries


def write_private(out: Path, files: dict[str, bytes]) -> None:
    """Create `out` (0700, refusing an existing path) holding `files` (0600 each); on any
    failure nothing is left behind."""
    os.mkdir(out, 0o700)
    try:
        os.chmod(out, 0o700)
        for name, payload in files.items():
            descriptor = os.open(out / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                                 0o600)
            with os.fdopen(descriptor, "wb") as file:
                os.fchmod(descriptor, 0o600)
                file.write(payload)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
