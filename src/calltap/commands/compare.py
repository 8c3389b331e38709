"""Compare what the provider sent (UPSTREAM) with what the client got (DOWNSTREAM), by meaning.

Both files are raw response bodies as recorded (an event stream or a JSON body). They are reduced to
choices, tool calls, text, finish reasons, terminal markers and usage, then compared: ids, indexes,
key order, whitespace and chunking do not matter; a lost tool call, changed arguments, a rewritten
finish reason, a stripped `[DONE]` do. Upstream is the reference: a defect already present upstream
is reported on that side but is not the gateway's divergence.

When a pair.json sits next to files named upstream.* and downstream.* (a calltap recording), the
request path, status, Content-Encoding and how each leg ended are taken from it, and the client's
recorded request (downstream.request) says whether it asked for usage: a gateway that requested
usage for itself and kept it from a client who never asked is not USAGE_MISSING.

The two sides need not speak the same dialect: behind a translating gateway the provider may
stream Anthropic Messages or OpenAI Responses while the client reads OpenAI Chat Completions, and
the comparison is by meaning all the same. Each side's dialect (openai.chat, anthropic.messages,
openai.responses) is detected from its content, then from its request path; --upstream-dialect and
--downstream-dialect read a side as the dialect you name instead, for bare files whose content
says nothing (an empty stream, a stream of errors). The JSON report names each side's dialect.

The requests too: `calltap compare PAIR_DIR` compares a recorded pair's answers and its requests
(the client's downstream.request with the upstream.request the provider received: a tool dropped,
a tool choice changed, a schema's enum lost, an image inside a tool result thrown away,
temperature 0 dropped), and `calltap compare --requests CLIENT_REQUEST PROVIDER_REQUEST` compares
two request bodies alone. A request's dialect comes from its pair.json leg's path when the file
sits in a recording, else from its shape; --client-dialect and --provider-dialect name it.

exit codes: 0 equal, 1 diverged, 2 usage error (missing, empty or unreadable file, unknown
dialect), 3 inconclusive (a warning on either side: a cut capture, an unsafe integer, a payload
that is not JSON, ...)

examples:
  calltap compare recordings/2026-11-30/req-1
  calltap compare --requests downstream.request upstream.request --json
  cd recordings/2026-11-30/req-1 && calltap compare upstream.sse downstream.sse
  calltap compare upstream.sse downstream.sse --upstream-dialect anthropic.messages
  calltap compare upstream.sse downstream.sse --json | jq -r '.findings[].code'
  calltap compare upstream.sse downstream.sse --json --redact > report-to-share.json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from calltap import recordings
from calltap.commands.check import (
    EXIT_CODES,
    UnreadableCapture,
    add_dialect_flag,
    add_output_flags,
    forced,
    print_json,
    read_capture,
    sibling_leg,
    usage_error,
)
from calltap.compare import Comparison, compare_captures
from calltap.compare_pair import with_requests
from calltap.compare_requests import compare_requests
from calltap.dialects.asks import read_ask
from calltap.report import comparison_json, render_comparison, render_requests, requests_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", metavar="UPSTREAM DOWNSTREAM | PAIR_DIR", nargs="+",
                        help="the body the provider sent and the body the client received, or"
                             " a recorded pair's directory (answers and requests compared)")
    parser.add_argument("--requests", action="store_true",
                        help="compare two request bodies instead: CLIENT_REQUEST (what the"
                             " client sent) then PROVIDER_REQUEST (what the provider received)")
    add_dialect_flag(parser, "--upstream-dialect", "UPSTREAM")
    add_dialect_flag(parser, "--downstream-dialect", "DOWNSTREAM")
    add_dialect_flag(parser, "--client-dialect", "CLIENT_REQUEST")
    add_dialect_flag(parser, "--provider-dialect", "PROVIDER_REQUEST")
    add_output_flags(parser)


def run(args: argparse.Namespace) -> int:
    paths = [Path(path) for path in args.paths]
    if args.requests:
        if len(paths) != 2:
            return usage_error("compare", ValueError(
                "error: --requests takes two files: CLIENT_REQUEST PROVIDER_REQUEST"))
        return _requests(args, *paths)
    if len(paths) == 1 and paths[0].is_dir():
        return _pair(args, paths[0])
    if len(paths) != 2:
        return usage_error("compare", ValueError(
            "error: give UPSTREAM and DOWNSTREAM files, or one recorded pair's directory"))
    try:
        upstream = forced(read_capture(paths[0]), args.upstream_dialect)
        downstream = forced(read_capture(paths[1]), args.downstream_dialect)
    except UnreadableCapture as error:
        return usage_error("compare", error)
    request = recordings.request_body(paths[1].parent, sibling_leg(paths[1]))
    return _report(args, compare_captures(upstream, downstream, downstream_request=request))


def _pair(args: argparse.Namespace, directory: Path) -> int:
    """A recorded pair: its answers as `compare UPSTREAM DOWNSTREAM`, joined by its requests."""
    legs = recordings.pair_legs(directory)
    up_body = recordings.leg_body(directory, "upstream")
    down_body = recordings.leg_body(directory, "downstream")
    if up_body is None or down_body is None:
        return usage_error("compare", ValueError(
            f"'{directory}' holds no recorded upstream and downstream bodies"))
    try:
        upstream = forced(read_capture(up_body, legs.get("upstream")), args.upstream_dialect)
        downstream = forced(read_capture(down_body, legs.get("downstream")),
                            args.downstream_dialect)
    except UnreadableCapture as error:
        return usage_error("compare", error)
    request = recordings.request_body(directory, legs.get("downstream"))
    comparison = compare_captures(upstream, downstream, downstream_request=request)
    return _report(args, with_requests(comparison, recordings.pair_requests(directory)))


def _requests(args: argparse.Namespace, client: Path, provider: Path) -> int:
    try:
        bodies = [_request_file(path) for path in (client, provider)]
    except UnreadableCapture as error:
        return usage_error("compare", error)
    asks = [read_ask(body, _request_path(path), dialect)
            for body, path, dialect in zip(bodies, (client, provider),
                                           (args.client_dialect, args.provider_dialect),
                                           strict=True)]
    result = compare_requests(*asks)
    if args.json:
        print_json(requests_json(result, redact=args.redact))
    else:
        render_requests(result, Console(), redact=args.redact)
    return EXIT_CODES[result.verdict]


def _request_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise UnreadableCapture(f"cannot read '{path}': {error.strerror or error}") from None


def _request_path(path: Path) -> str | None:
    """The path a recorded request was sent to, from the pair.json leg whose request it is."""
    for leg in _legs(path.parent):
        if leg.get("request_file") == path.name and isinstance(leg.get("path"), str):
            return leg["path"]
    return None


def _legs(directory: Path) -> list[dict[str, Any]]:
    try:
        document = recordings.read_pair(directory)
    except recordings.PairUnreadable:
        return []
    legs = document.get("legs")
    found = [legs.get(side) for side in recordings.SIDES] if isinstance(legs, dict) else []
    return [leg for leg in (*found, *recordings.upstream_attempts(document))
            if isinstance(leg, dict)]


def _report(args: argparse.Namespace, result: Comparison) -> int:
    if args.json:
        print_json(comparison_json(result, redact=args.redact))
    else:
        render_comparison(result, Console(), redact=args.redact)
    return EXIT_CODES[result.verdict]
