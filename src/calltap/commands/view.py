"""Serve a browser view of a recordings tree.

The list shows every pair newest first (time, request id, endpoint, model, dialects, pairing,
attempts, verdict, codes, bytes, duration) with filters by verdict, finding code and request id
prefix; new pairs appear while the page is open. A pair's page sets both legs side by side per
choice (text, tool calls with their decoded arguments, finish reason), links every finding to
the event it points at in each leg's raw events, and shows the redacted headers, the timings,
the attempts and the raw files. /compare compares two uploaded captures without storing them.
The same facts are JSON at /api/pairs and /api/pairs/<request id>.

The view only reads the tree. It lists pairs from the index of pairs (`_index/`, written by
`calltap serve`; a tree's pairs that have no row yet are read from their pair.json) and reads a
pair's files only when its page is opened. A bucket's index segments are kept in the user's cache
directory (--index to choose), and its opened pairs beside them.

It answers loopback only. --allow-remote lets it listen elsewhere, and then every request must
carry `Authorization: Bearer $CALLTAP_VIEW_TOKEN`.

exit codes: 0 stopped, 2 usage error (no such directory, bad address, remote without a token)

examples:
  calltap view                                # ./recordings on http://127.0.0.1:8703/
  calltap view demo-recordings --listen 127.0.0.1:9000
  calltap view s3://team-recordings/staging   # every replica's pairs in one bucket
  CALLTAP_VIEW_TOKEN=$(openssl rand -hex 16) calltap view --listen 0.0.0.0:8703 --allow-remote
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from aiohttp import web

from calltap.bucket_copy import BucketCopy, default_copy_location
from calltap.commands.check import usage_error
from calltap.storage import BucketURL, StoreError, is_bucket
from calltap.view.guard import TOKEN_VARIABLE, Access, is_loopback
from calltap.view.server import ViewSettings, standalone
from calltap.view.state import ViewState

DEFAULT_LISTEN = "127.0.0.1:8703"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", nargs="?", default="recordings",
                        help="the recordings tree (default: recordings), or s3://BUCKET[/PREFIX]"
                             " (every replica's pairs; credentials from the AWS_* variables)")
    parser.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                        help=f"where to serve the view (default {DEFAULT_LISTEN})")
    parser.add_argument("--allow-remote", action="store_true",
                        help=f"listen beyond loopback; every request then needs {TOKEN_VARIABLE}")
    parser.add_argument("--index", metavar="DIR", type=Path,
                        help="where a bucket's index segments are kept on this machine (default:"
                             " one directory per bucket in ~/.cache/calltap/index)")


def run(args: argparse.Namespace) -> int:
    copy = None
    if is_bucket(args.directory):
        try:
            url = str(BucketURL.parse(args.directory))
            copy = BucketCopy(url, default_copy_location(url))
            copy.open()
        except (StoreError, ValueError) as error:
            return usage_error("view", f"cannot read '{args.directory}': {error}")
        except OSError as error:
            return usage_error("view", f"cannot keep the pairs opened from '{args.directory}'"
                                       f" in {copy.root}: {error.strerror}")
    root = copy.root if copy is not None else Path(args.directory)
    if not root.is_dir():
        reason = "no such directory" if not root.exists() else "not a directory"
        return usage_error("view", f"cannot read '{root}': {reason}")
    host, _, port = args.listen.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        return usage_error("view", f"--listen: expected HOST:PORT, got {args.listen!r}")
    token = os.environ.get(TOKEN_VARIABLE) or None
    if not args.allow_remote and not is_loopback(host):
        return usage_error("view", f"{host} is not loopback: add --allow-remote (and set "
                                   f"{TOKEN_VARIABLE})")
    if args.allow_remote and token is None:
        return usage_error("view", f"--allow-remote needs a token in {TOKEN_VARIABLE}")
    settings = ViewSettings(root, access=Access(remote=args.allow_remote, token=token),
                            index_cache=args.index, bucket=copy)
    state = ViewState(settings)
    if copy is not None:
        try:
            state.list_segments()
        except StoreError as error:
            return usage_error("view", f"cannot read '{args.directory}': {error}")
    shown = f"[{host}]" if ":" in host else host
    try:
        web.run_app(standalone(settings, state), host=host, port=int(port), access_log=None,
                    print=lambda _text: print(f"calltap view: http://{shown}:{port}/ "
                                              f"({args.directory})", flush=True),
                    shutdown_timeout=1.0, handler_cancellation=True)
    except OSError as error:
        return usage_error("view", f"cannot listen on {args.listen}: {error.strerror or error}")
    sys.stdout.flush()
    return 0
