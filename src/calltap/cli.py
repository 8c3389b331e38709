"""The `calltap` command line: one subcommand per module, imported only when it runs.

Each command module exposes `add_arguments(parser)` and `run(args) -> int` (the exit code), so
`calltap compare` never pays for importing the proxy and the proxy never imports the CLI.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from calltap import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("calltap.commands.serve", "run the recording proxy beside a gateway"),
    "demo": ("calltap.demo", "run a fake provider, a faulty gateway and calltap on loopback"),
    "compare": ("calltap.commands.compare", "compare an upstream and a downstream capture"),
    "check": ("calltap.commands.check", "run the single-side checks on one capture"),
    "scan": ("calltap.commands.scan", "re-check a recordings tree and print a summary"),
    "replay": ("calltap.commands.replay", "replay a recorded pair through a gateway again"),
    "view": ("calltap.commands.view", "serve a browser view of a recordings tree"),
    "report": ("calltap.commands.report", "write a private static report of recordings"),
    "probe": ("calltap.commands.probe", "send active tool-call probes through a gateway"),
    "index": ("calltap.commands.index", "rebuild or compact the index of pairs of a location"),
    "query": ("calltap.commands.query", "run read-only SQL over the index of pairs (DuckDB)"),
}

EPILOG = """\
exit codes: 0 equal/clean, 1 diverged/defective, 2 usage error, 3 inconclusive

examples:
  calltap serve --gateway http://127.0.0.1:4000 --provider https://api.openai.com
  calltap compare recordings/2026-11-30/r1/upstream.sse recordings/2026-11-30/r1/downstream.sse
  calltap check downstream.sse --json
  calltap serve | jq 'select(.event=="divergence" or .event=="leg.defect")'
  calltap replay recordings/2026-11-30/r1 --gateway http://127.0.0.1:4000
"""


def build_parser(command: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calltap",
        description=(
            "Record both legs of every LLM API request around a gateway"
            " and compare them by meaning."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"calltap {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, summary) in COMMANDS.items():
        if name == command:
            module = importlib.import_module(module_name)
            cmd_parser = sub.add_parser(
                name,
                help=summary,
                description=module.__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
            module.add_arguments(cmd_parser)
            cmd_parser.set_defaults(run=module.run)
        else:
            sub.add_parser(name, help=summary)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    return int(args.run(args))


def entry() -> None:
    """The process's entry point (the console script, `python -m calltap`): `main`, then exit.

    A command that used a bucket leaves obstore's runtime threads behind, and one of them may
    still be handing a finished request back to Python; on Python 3.11 a thread that waits for
    the interpreter while it is being torn down aborts the whole process (SIGABRT instead of the
    command's exit code). So such a process flushes what it wrote and ends without tearing the
    interpreter down; every command has closed its files and servers by the time `main` returns.
    """
    code = main()
    storage = sys.modules.get("calltap.storage")
    if storage is None or not storage.opened():
        raise SystemExit(code)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
