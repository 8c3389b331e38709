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

exit codes: 0 equal, 1 diverged, 2 usage error (missing, empty or unreadable file, unknown
dialect), 3 inconclusive (a warning on either side: a cut capture, an unsafe integer, a payload
that is not JSON, ...)

examples:
  cd recordings/2026-11-30/req-1 && calltap compare upstream.sse downstream.sse
  calltap compare upstream.sse downstream.sse --upstream-dialect anthropic.messages
  calltap compare upstream.sse downstream.sse --json | jq -r '.findings[].code'
  calltap compare upstream.sse downstream.sse --json --redact > report-to-share.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

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
from calltap.compare import compare_captures
from calltap.report import comparison_json, render_comparison


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("upstream", metavar="UPSTREAM", help="the body the provider sent")
    parser.add_argument("downstream", metavar="DOWNSTREAM", help="the body the client received")
    add_dialect_flag(parser, "--upstream-dialect", "UPSTREAM")
    add_dialect_flag(parser, "--downstream-dialect", "DOWNSTREAM")
    add_output_flags(parser)


def run(args: argparse.Namespace) -> int:
    try:
        upstream = forced(read_capture(Path(args.upstream)), args.upstream_dialect)
        downstream = forced(read_capture(Path(args.downstream)), args.downstream_dialect)
    except UnreadableCapture as error:
        return usage_error("compare", error)
    downstream_path = Path(args.downstream)
    request = recordings.request_body(downstream_path.parent, sibling_leg(downstream_path))
    result = compare_captures(upstream, downstream, downstream_request=request)
    if args.json:
        print_json(comparison_json(result, redact=args.redact))
    else:
        render_comparison(result, Console(), redact=args.redact)
    return EXIT_CODES[result.verdict]
