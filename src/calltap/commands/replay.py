"""Reproduce a recorded divergence: replay a pair through a gateway and compare again.

calltap listens on --back (default 127.0.0.1:8701, where the gateway already sends its provider
traffic) as a cassette provider: each upstream request gets the recorded upstream answer (status,
headers, the exact body bytes), attempt by attempt, at the recorded pace or at once with
--pace none. It sends the recorded client request (headers minus the redacted ones, plus each
--header; the query with each --query set) through its own front to the gateway, records the
new pair (in a temporary directory unless --recordings DIR), compares it and prints the
recorded verdict and codes beside the replayed ones. The codes are the answers' and the
requests' (a tool the provider was not offered, a tool choice changed, …); a pair recorded before
calltap compared requests has its recorded requests compared for the recorded side.

The cassette matches the gateway's requests by meaning (method, path, and the conversation's
last turn and tool names, as calltap pairs legs), not by bytes: a gateway may add fields and
reorder keys. Requests without a body off the chat endpoints (a GET /v1/models) are answered 404
and noted; any other request the cassette does not hold (another path, another conversation, one
attempt more) is a miss: answered 502, never counted as an attempt of the replayed pair, and
named with its method and path.

PAIR_DIR may be a recordings tree: every pair in it is replayed (those with --code CODE only)
and a summary table says which were reproduced. --export DIR writes a self-contained regression
case (a folder of cases from a tree) and --case DIR runs one, or a folder of them.
--demo-gateway replays through the fake gateway `calltap demo` records through, so a divergence
the demo kept (`calltap demo --recordings DIR`) replays without a gateway of your own.

--suite DIR runs every case in DIR as a regression test of the gateway build: a case passes when
its replayed pair is equal (the divergence stays fixed), fails when it diverges again (the
recorded and replayed codes in the message) and is an error when the run cannot judge it (the
cassette cannot answer the gateway, the case cannot be read). --junit FILE writes JUnit XML (a
testcase per case); --github prints GitHub Actions annotations for the failures, worst severity
first, at most 10, and says how many more. Build a suite from a day of staging with
`calltap scan SOURCE --diverged --since 24h --export-cases DIR`.

Exit: 0 every pair reproduced (same verdict and codes), 1 any replayed differently, 2 usage
error, 3 the gateway asked for something a cassette cannot answer (another path, more attempts,
another conversation; the output, and `unanswered` in --json, say which method and path).
With --suite: 0 every case passed, 1 any failed, 3 any error and none failed, 2 usage error.

examples:
  calltap demo --recordings demo-recordings
  calltap replay demo-recordings --code TOOL_CALLS_DROPPED --demo-gateway
  calltap replay recordings/2026-11-30/r1 --gateway http://127.0.0.1:4000 \\
      --header "Authorization: Bearer $LITELLM_KEY"
  calltap replay recordings/2026-11-30/r2 --gateway http://127.0.0.1:4000 \\
      --query "key=$GEMINI_KEY"
  calltap replay recordings --code TOOL_CALLS_DROPPED --gateway http://127.0.0.1:4000 --pace none
  calltap replay recordings/2026-11-30/r1 --export cases/dropped-call
  calltap replay --case cases/dropped-call --gateway http://127.0.0.1:4000
  calltap replay --suite cases --gateway http://127.0.0.1:4000 --junit report.xml --github
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from calltap.bucket_copy import local_source
from calltap.codes import Code
from calltap.config import DEFAULT_BACK, ConfigError, parse_address, parse_url
from calltap.replay.annotations import annotations
from calltap.replay.case import export
from calltap.replay.cassette import CassetteError
from calltap.replay.junit import junit_xml
from calltap.replay.outcome import exit_code
from calltap.replay.pacing import PACES
from calltap.replay.selection import Selection, select
from calltap.replay.session import Settings, replay_all
from calltap.replay.suite import SuiteError, run_suite
from calltap.replay.suite import exit_code as suite_exit_code
from calltap.replay.summary import show, show_suite
from calltap.storage import StoreError

EXIT_USAGE = 2
LOG_NAME = "calltap.log"
WIDE = 160
"""Columns for the table when the output is not a terminal (a pipe or a CI log)."""


class Usage(Exception):
    """A command line the replay cannot run; the message is the one line shown."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pair_dir", metavar="PAIR_DIR", nargs="?",
                        help="a recorded pair's directory, or a recordings tree; or"
                             " s3://BUCKET/PREFIX/<day>/<id> (or the bucket) for one in a bucket")
    parser.add_argument("--case", metavar="DIR", type=Path,
                        help="run an exported regression case (or a folder of cases)")
    gateway = parser.add_mutually_exclusive_group()
    gateway.add_argument("--gateway", metavar="URL", help="the gateway's base URL")
    gateway.add_argument("--demo-gateway", action="store_true",
                         help="replay through the fake gateway `calltap demo` records through"
                              " (started on loopback)")
    parser.add_argument("--back", metavar="HOST:PORT",
                        help="listen for the gateway's provider requests here (default"
                             " {}:{}; a free port with --demo-gateway)".format(*DEFAULT_BACK))
    parser.add_argument("--header", metavar='"NAME: VALUE"', action="append", default=[],
                        help="send this header with the client request (a secret the recording"
                             " redacted); repeatable")
    parser.add_argument("--query", metavar="NAME=VALUE", action="append", default=[],
                        help="set this query parameter in the client request (a key the"
                             " recording redacted, such as key=…); repeatable")
    parser.add_argument("--pace", choices=PACES, default="recorded",
                        help="send each answer at the recorded pace (default) or at once")
    parser.add_argument("--recordings", metavar="DIR", type=Path,
                        help="keep the replayed pairs in DIR (default: a temporary directory)")
    parser.add_argument("--code", metavar="CODE", action="append", default=[],
                        help="with a tree: replay only pairs whose comparison has this code")
    parser.add_argument("--export", metavar="DIR", type=Path,
                        help="write the pair as a regression case in DIR (which must not exist)"
                             " instead of replaying it")
    parser.add_argument("--suite", metavar="DIR", type=Path,
                        help="run every case in DIR as a regression test of the gateway: a case"
                             " passes when its replay is equal, fails when it diverges again")
    parser.add_argument("--junit", metavar="FILE", type=Path,
                        help="with --suite: write the results as JUnit XML to FILE")
    parser.add_argument("--github", action="store_true",
                        help="with --suite: print GitHub Actions annotations for the failures"
                             " (worst first, at most 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = max(console.width, WIDE)
    if args.suite is not None:
        return _run_suite(args, console)
    try:
        if args.junit is not None or args.github:
            raise Usage("--junit and --github report a --suite run; give --suite DIR")
        selection = _selection(args)
        if args.export is not None:
            if args.header or args.query:
                raise Usage("--header and --query values are secrets and never written to a"
                            " case; give them when the case runs")
            return _export(selection, args.export, console)
        settings = _settings(args)
    except (Usage, ConfigError, CassetteError) as error:
        print(f"calltap replay: {error}", file=sys.stderr)
        return EXIT_USAGE
    return _replay(selection, settings, keep=args.recordings is not None, as_json=args.json,
                   console=console)


def _run_suite(args: argparse.Namespace, console: Console) -> int:
    """Every case in --suite DIR as a regression test; the table, JUnit and annotations."""
    try:
        if args.pair_dir is not None or args.case is not None or args.export is not None:
            raise Usage("--suite DIR runs the cases in DIR: give no PAIR_DIR, --case or --export")
        if args.code:
            raise Usage("--code selects recorded pairs; a suite runs every case in it")
        if args.json and args.github:
            raise Usage("--json prints one object and --github workflow commands: give one")
        if args.junit is not None and not args.junit.parent.is_dir():
            raise Usage(f"--junit {args.junit}: no such directory {args.junit.parent}")
        settings = _settings(args)
    except (Usage, ConfigError) as error:
        print(f"calltap replay: {error}", file=sys.stderr)
        return EXIT_USAGE
    keep = args.recordings is not None
    started = time.monotonic()
    try:
        settings.recordings.mkdir(parents=True, exist_ok=True)
        with (settings.recordings / LOG_NAME).open("a", encoding="utf-8") as log:
            cases = asyncio.run(run_suite(args.suite, settings, log, keep=keep))
    except (SuiteError, ConfigError, OSError) as error:
        print(f"calltap replay: --suite {args.suite}: {error}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if not keep:
            shutil.rmtree(settings.recordings, ignore_errors=True)
    if args.json:
        print(json.dumps({"cases": [case.as_json() for case in cases],
                          "exit": suite_exit_code(cases)}, indent=2))
    else:
        show_suite(cases, console)
    if args.github:
        for line in annotations(cases):
            print(line, flush=True)
    if args.junit is not None:
        name = args.suite.resolve().name or "suite"
        try:
            _write_new(args.junit, junit_xml(cases, name, seconds=time.monotonic() - started))
        except OSError as error:
            print(f"calltap replay: --junit {args.junit}: {error}", file=sys.stderr)
            return EXIT_USAGE
    return suite_exit_code(cases)


def _write_new(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all: a temporary file beside it, renamed over it."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _selection(args: argparse.Namespace) -> Selection:
    """One pair, or a tree's pairs with the --code codes."""
    if (args.pair_dir is None) == (args.case is None):
        raise Usage("give one PAIR_DIR or --case DIR")
    for code in args.code:
        if code not in Code.__members__:
            raise Usage(f"--code: unknown finding code {code!r}")
    if args.case is not None:
        return select(args.case, args.code)
    try:
        return select(local_source(args.pair_dir, args.code), args.code)
    except (StoreError, ValueError) as error:
        raise Usage(f"cannot read '{args.pair_dir}': {error}") from None


def _settings(args: argparse.Namespace) -> Settings:
    if not args.gateway and not args.demo_gateway:
        raise Usage("--gateway URL is required to replay (the gateway to send the request to)")
    if args.gateway:
        parse_url("gateway", args.gateway)
    default_back = "127.0.0.1:0" if args.demo_gateway else "{}:{}".format(*DEFAULT_BACK)
    back = parse_address("back", args.back or default_back)
    if back is None:
        raise Usage("--back: the cassette provider needs an address")
    headers = []
    for text in args.header:
        name, colon, value = text.partition(":")
        if not colon or not name.strip() or name != name.strip():
            raise Usage(f"--header: expected \"Name: value\", got {text!r}")
        headers.append((name, value.strip()))
    query = _query(args.query)
    recordings = args.recordings or Path(tempfile.mkdtemp(prefix="calltap-replay-"))
    return Settings(args.gateway or None, back, recordings, tuple(headers), args.pace,
                    query=query)


def _query(texts: list[str]) -> tuple[tuple[str, str], ...]:
    """The --query parameters as (NAME, VALUE), each name once."""
    parameters: dict[str, str] = {}
    for text in texts:
        name, equals, value = text.partition("=")
        if not equals or not name:
            raise Usage(f"--query: expected NAME=VALUE, got {text!r}")
        if name in parameters:
            raise Usage(f"--query: {name!r} given twice")
        parameters[name] = value
    return tuple(parameters.items())


def _export(selection: Selection, target: Path, console: Console) -> int:
    if target.exists():
        print(f"calltap replay: --export {target}: already exists", file=sys.stderr)
        return EXIT_USAGE
    written = 0
    try:
        if selection.single is not None:
            export(selection.single, target)
            written = 1
        else:
            target.mkdir(mode=0o700)
            for pair in selection.pairs():
                export(pair, target / pair.request_id)
                written += 1
    except OSError as error:
        print(f"calltap replay: --export {target}: {error}", file=sys.stderr)
        return EXIT_USAGE
    _print_skipped(selection, console)
    console.print(f"{written} case{'s' if written != 1 else ''} written to {target};"
                  f" run: calltap replay --case {target} --gateway URL")
    return 0


def _replay(selection: Selection, settings: Settings, *, keep: bool, as_json: bool,
            console: Console) -> int:
    """Replay, print, and remove the recordings unless they are kept."""
    root = settings.recordings
    try:
        root.mkdir(parents=True, exist_ok=True)
        with (root / LOG_NAME).open("a", encoding="utf-8") as log:
            results = asyncio.run(replay_all(selection.pairs(), settings, log))
    except (ConfigError, OSError) as error:
        print(f"calltap replay: {error}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    if not results:
        print(f"calltap replay: nothing could be replayed: {'; '.join(selection.skipped)}",
              file=sys.stderr)
        return EXIT_USAGE
    if as_json:
        print(json.dumps({"results": [result.as_json() for result in results],
                          "skipped": selection.skipped, "exit": exit_code(results)}, indent=2))
        return exit_code(results)
    show(results, console)
    _print_skipped(selection, console)
    if keep:
        console.print(f"Replayed pairs: {root} (calltap's log: {root / LOG_NAME})")
    return exit_code(results)


def _print_skipped(selection: Selection, console: Console) -> None:
    for reason in selection.skipped:
        console.print(f"skipped: {reason}", markup=False)
