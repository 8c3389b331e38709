"""Run the single-side rules on one recorded response body.

A capture is checked on its own, without the other leg: a stream that ends without its terminal
marker (DONE_MISSING), a choice without a finish reason, tool-call deltas without an index, argument
fragments that do not join into valid JSON, an error object inside a 200, a new call id on an index
already in use. Warnings (a cut capture, an integer a JavaScript client cannot hold, a duplicate
key, a payload that is not JSON) make the verdict inconclusive.

The body is read as recorded. When a pair.json sits next to a file named upstream.* or
downstream.*, its request path, status, Content-Encoding and how the leg ended are used too.

The dialect (openai.chat, anthropic.messages, openai.responses) is detected from the content, and
from the request path when the content names none. --dialect reads the body as the dialect you
name instead: for a bare file whose content says nothing (an empty stream, a stream of errors), or
to see what a client of that dialect would make of the bytes.

exit codes: 0 clean, 1 defective, 2 usage error (missing, empty or unreadable file, unknown
dialect), 3 inconclusive

examples:
  calltap check recordings/2026-11-30/req-1/downstream.sse
  calltap check upstream.sse --dialect anthropic.messages
  calltap check downstream.sse --json | jq '.findings[].code'
  calltap check downstream.sse --json --redact > report-to-share.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from calltap import recordings
from calltap.compare import check_capture
from calltap.dialects import NAMES
from calltap.report import check_json, render_check
from calltap.transcript import Capture

USAGE_ERROR = 2
EXIT_CODES = {"clean": 0, "equal": 0, "defective": 1, "diverged": 1, "inconclusive": 3}


class UnreadableCapture(Exception):
    """A capture file the command cannot use; the message names the file and why."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "capture", metavar="CAPTURE", help="a recorded response body (.sse or .json)"
    )
    add_dialect_flag(parser, "--dialect", "the capture")
    add_output_flags(parser)


def add_dialect_flag(parser: argparse.ArgumentParser, flag: str, what: str) -> None:
    """A flag that forces the dialect a capture is read as; its choices are the dialects' NAMEs."""
    parser.add_argument(
        flag,
        choices=NAMES,
        metavar="DIALECT",
        help=f"read {what} as this dialect instead of detecting it ({', '.join(NAMES)})",
    )


def forced(capture: Capture, dialect: str | None) -> Capture:
    """The capture, read as `dialect` when one was given."""
    return capture if dialect is None else dataclasses.replace(capture, dialect=dialect)


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of tables"
    )
    parser.add_argument(
        "--redact",
        action="store_true",
        help="codes, severities, positions and counts only: no text, names, arguments or ids",
    )


def run(args: argparse.Namespace) -> int:
    try:
        capture = forced(read_capture(Path(args.capture)), args.dialect)
    except UnreadableCapture as error:
        return usage_error("check", error)
    result = check_capture(capture)
    if args.json:
        print_json(check_json(result, redact=args.redact))
    else:
        render_check(result, Console(), redact=args.redact)
    return EXIT_CODES[result.verdict]


def read_capture(path: Path, leg: dict[str, Any] | None = None) -> Capture:
    """A Capture from a recorded file, with its leg's metadata from pair.json when there is one."""
    try:
        body = path.read_bytes()
    except FileNotFoundError:
        raise UnreadableCapture(f"cannot read '{path}': no such file") from None
    except IsADirectoryError:
        raise UnreadableCapture(f"cannot read '{path}': is a directory") from None
    except PermissionError:
        raise UnreadableCapture(f"cannot read '{path}': permission denied") from None
    except OSError as error:
        raise UnreadableCapture(f"cannot read '{path}': {error.strerror or error}") from None
    if not body:
        raise UnreadableCapture(f"cannot read '{path}': empty file")
    if leg is None:
        leg = sibling_leg(path)
    return recordings.capture_of(body, leg)


def sibling_leg(path: Path) -> dict[str, Any] | None:
    """The pair.json leg that describes `path` (upstream.sse -> legs.upstream), if there is one."""
    side = recordings.side_of_body(path.name)
    return None if side is None else recordings.pair_legs(path.parent).get(side)


def print_json(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")


def usage_error(command: str, error: Exception) -> int:
    sys.stderr.write(f"calltap {command}: {error}\n")
    return USAGE_ERROR
