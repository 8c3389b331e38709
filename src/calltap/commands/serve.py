"""Run the recording proxy beside a gateway.

calltap listens in two places. Clients call the front (default 127.0.0.1:8700) instead of the
gateway; the gateway calls the back (default 127.0.0.1:8701) instead of the provider. Every
byte is relayed untouched and recorded under recordings/<UTC day>/<request id>/; when both legs
of a chat request have ended they are compared by meaning, the report is written to pair.json
and one JSON line per divergence goes to stdout:

  calltap serve --gateway http://127.0.0.1:4000 --provider https://api.openai.com \\
      | jq 'select(.event=="divergence" or .event=="leg.defect")'

Then point the gateway's provider base URL at the back (for LiteLLM: `api_base:
http://127.0.0.1:8701/v1`) and the clients' base URL at the front. With only --gateway (or only
--provider) calltap runs one leg and checks each capture on its own. The admin listener
(127.0.0.1:8702) serves GET /healthz and GET /metrics (Prometheus).

Settings come from, lowest first: built-in defaults, the TOML file (--config, else
config/calltap.toml when it exists here; every key is documented in the repository's copy),
CALLTAP_<SETTING> environment variables (CALLTAP_PROVIDER, CALLTAP_MAX_CAPTURE_BYTES, ...),
then these flags. A listener address of `off` turns it off. A bad setting, a busy port or an
unwritable recordings directory prints one line and exits 2 before anything listens.

Every listener binds to loopback unless told otherwise: calltap has no authentication and the
recordings hold prompts and answers, so an address such as 0.0.0.0 is refused (exit 2) without
--allow-remote. Requests are bounded: a body past max_request_body (32 MiB) gets 413, a header
line past max_header_line (16 KiB) or headers past max_header_bytes (64 KiB) get 431, each as
an OpenAI-shaped JSON error from calltap; the upstream never receives such a request whole.

With --recordings s3://BUCKET[/PREFIX] (N gateway replicas, one calltap beside each, one
bucket), captures are written to the spool as to a local tree and each finalized pair is uploaded
by a background uploader, bodies first and pair.json last; the store being down only grows the
spool (then recording pauses at the quota). A bucket that does not exist or credentials it
refuses exit 2 at start.

SIGTERM or SIGINT: stop accepting, let streams in flight finish within the grace period, close
every capture (pair.json says how each leg ended), exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys
from pathlib import Path

from calltap.config import Config, ConfigError, load_config

EXIT_OK = 0
EXIT_USAGE = 2

FLAGS = {
    "front": ("HOST:PORT", "listen for clients here (default 127.0.0.1:8700; 'off' to disable)"),
    "gateway": ("URL", "the gateway's base URL the front relays to"),
    "back": ("HOST:PORT", "listen for the gateway here (default 127.0.0.1:8701; 'off')"),
    "provider": ("URL", "the provider's base URL the back relays to"),
    "admin": ("HOST:PORT", "health and metrics listener (default 127.0.0.1:8702; 'off')"),
    "recordings": ("DIR|s3://BUCKET[/PREFIX]",
                   "where captures are kept (default ./recordings); with a bucket they wait in"
                   " the spool and are uploaded once finalized (credentials from AWS_* variables)"),
    "spool": ("DIR", "with a bucket: where captures wait until stored"
              " (default ./recordings-spool)"),
    "keep": ("all|diverged", "keep every pair (default), or only diverged, inconclusive, orphaned"
             " and defective ones plus a keep_equal_sample share of the equal ones"),
    "grace": ("SECONDS", "how long in-flight streams may finish on shutdown (default 10)"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for name, (metavar, text) in FLAGS.items():
        parser.add_argument(f"--{name}", metavar=metavar, help=text)
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow listening on addresses other than loopback",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        help="TOML settings file (default config/calltap.toml if present)",
    )


def run(args: argparse.Namespace) -> int:
    overrides = {name: getattr(args, name) for name in FLAGS if name != "grace"}
    overrides["grace_period"] = args.grace
    overrides["allow_remote"] = "true" if args.allow_remote else None
    try:
        config = load_config(args.config, overrides)
    except ConfigError as exc:
        return _usage_error(str(exc))
    return _run_loop(config)


def _usage_error(message: str) -> int:
    print(f"calltap serve: {message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def _run_loop(config: Config) -> int:
    try:
        import uvloop  # type: ignore[import-not-found]  # the optional `fast` extra
    except ImportError:
        return asyncio.run(_serve(config))
    return uvloop.run(_serve(config))


async def _serve(config: Config) -> int:
    from calltap.proxy.app import Calltap

    tap = Calltap(config)
    # Handlers first: a SIGTERM that arrives as soon as serve.started is logged (a supervisor's
    # or a test's) still gets the orderly stop, never the default kill.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await tap.start()
    except ConfigError as exc:
        return _usage_error(str(exc))
    except OSError as exc:
        return _usage_error(f"cannot listen: {exc.strerror or exc}")
    # What startup built lives as long as the process: keep it out of every later collection, so
    # a full collection never walks it while streams are in flight.
    gc.freeze()
    await stop.wait()
    await tap.stop()
    return EXIT_OK
