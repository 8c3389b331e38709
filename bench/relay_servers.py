"""The relay benchmark's servers, each run as its own process so /proc can tell their CPU apart.

  python bench/relay_servers.py provider --text-events 200 [--delay 0.005] [--timestamps]
  python bench/relay_servers.py gateway --upstream URL [--port PORT] [--relabel]
  python bench/relay_servers.py passthrough --gateway URL --provider URL

Each prints one JSON line with its bound URLs on stdout once it listens, then serves until
SIGTERM or SIGINT. Once listening it moves its heap out of the garbage collector's reach, as
`calltap serve` does, so that a full collection (10-40 ms here) never stalls a measured
stream. The event loop is uvloop when it is installed, as for `calltap serve`, so the baseline
and calltap always run on the same loop.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from calltap.fakes import FakeGateway, FakeProvider
from relay_passthrough import PassThrough, start_listener

KEPT_EXCHANGES = 8
"""The fake provider keeps every answer for tests; a benchmark keeps only the last few."""

Serve = Callable[[argparse.Namespace], Awaitable[tuple[dict[str, str], Callable[[], Any]]]]


async def provider(args: argparse.Namespace) -> tuple[dict[str, str], Callable[[], Any]]:
    fake = FakeProvider(events_delay=args.delay, text_events=args.text_events,
                        timestamps=args.timestamps)
    fake.exchanges = collections.deque(maxlen=KEPT_EXCHANGES)  # type: ignore[assignment]
    await fake.start()
    return {"url": fake.url}, fake.stop


async def gateway(args: argparse.Namespace) -> tuple[dict[str, str], Callable[[], Any]]:
    if args.relabel:
        runner, url = await start_listener(PassThrough(args.upstream, relabel=True).app(),
                                           "127.0.0.1", args.port)
        return {"url": url}, runner.cleanup
    fake = FakeGateway(args.upstream, port=args.port)
    await fake.start()
    return {"url": fake.url}, fake.stop


async def passthrough(args: argparse.Namespace) -> tuple[dict[str, str], Callable[[], Any]]:
    front, front_url = await start_listener(PassThrough(args.gateway).app(), "127.0.0.1", 0)
    back, back_url = await start_listener(PassThrough(args.provider).app(), "127.0.0.1", 0)

    async def stop() -> None:
        await front.cleanup()
        await back.cleanup()

    return {"front": front_url, "back": back_url}, stop


async def serve(start: Serve, args: argparse.Namespace) -> None:
    urls, stop = await start(args)
    gc.freeze()
    sys.stdout.write(orjson.dumps(urls).decode() + "\n")
    sys.stdout.flush()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    await stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fake_provider = commands.add_parser("provider")
    fake_provider.add_argument("--text-events", type=int, default=200)
    fake_provider.add_argument("--delay", type=float, default=0.0)
    fake_provider.add_argument("--timestamps", action="store_true")
    fake_gateway = commands.add_parser("gateway")
    fake_gateway.add_argument("--upstream", required=True)
    fake_gateway.add_argument("--port", type=int, default=0)
    fake_gateway.add_argument("--relabel", action="store_true",
                              help="a bare pass-through that re-labels every chunk's id")
    bare = commands.add_parser("passthrough")
    bare.add_argument("--gateway", required=True)
    bare.add_argument("--provider", required=True)
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    start = {"provider": provider, "gateway": gateway, "passthrough": passthrough}[args.command]
    try:
        import uvloop  # type: ignore[import-not-found]  # calltap's optional `fast` extra
    except ImportError:
        asyncio.run(serve(start, args))
    else:
        uvloop.run(serve(start, args))


if __name__ == "__main__":
    main()
