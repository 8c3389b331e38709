"""Replay recorded pairs through a gateway, one after another, and say what came out.

The topology is calltap's own, with the provider swapped for the cassette:

  replay client -> calltap front -> gateway -> calltap back (--back) -> cassette provider

The gateway is the one under test (--gateway), or the demo's fake gateway (--demo-gateway), which
injects whatever defect the recorded client request asked it for, as it did in `calltap demo`.

calltap runs as `calltap serve` would (`Calltap` with a front, a back, recordings), so the new
pair is recorded, paired and compared by the real proxy; the replay then reads its pair.json.
One addon of the replay's own comes first: a request reaching the back that the cassette will
not answer with a recorded attempt (a miss, a side request) is not offered for pairing, so the
cassette's refusal is never recorded as an upstream attempt of the replayed pair (it is kept,
if at all, as a request of its own) and never compared as the provider's answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import aiohttp

from calltap.config import Address, Config
from calltap.fakes import FakeGateway
from calltap.otel.runs import RunSpan, export_run, from_environment
from calltap.otel.settings import OtelSettings
from calltap.proxy.app import Calltap
from calltap.proxy.hooks import Addon, LegArrived
from calltap.replay.cassette import Headers, Recorded
from calltap.replay.outcome import Result
from calltap.replay.pacing import Pace
from calltap.replay.provider import CassetteProvider

LOOPBACK: Address = ("127.0.0.1", 0)
PAIRING_WINDOW = 5.0
"""The gateway has called the back before it answers the client, so a replayed front leg with
no partner by then never gets one: there is no reason to wait calltap's usual 30 s for it."""
COMPARED_WAIT = 60.0
CLIENT_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=300)


@dataclass(frozen=True, slots=True)
class Settings:
    """Where the replay listens and sends, and how."""

    gateway: str | None
    """The gateway's base URL; None replays through the demo's fake gateway, on loopback."""
    back: Address
    recordings: Path
    headers: Headers = ()
    """`--header` values: sent with every replayed client request, over any recorded one."""
    pace: Pace = "recorded"
    query: Headers = ()
    """`--query` values (NAME, VALUE): set in every replayed client request's query string."""


class UnansweredNotPaired(Addon):
    """The addon that keeps what the cassette refuses out of the replayed pair: it sees each back
    request before the pairing addon does and takes it off the compared paths unless the
    cassette's current player expects it."""

    def __init__(self, cassette: CassetteProvider) -> None:
        self.cassette = cassette

    def leg_arrived(self, event: LegArrived) -> None:
        leg = event.leg
        if leg.side != "upstream" or not leg.compared:
            return
        body = leg.body_prefix if leg.body_whole else None
        if not self.cassette.player.expects(leg.method, leg.path, body):
            leg.compared = False


async def replay_all(pairs: Iterable[Recorded], settings: Settings, log: TextIO) -> list[Result]:
    """Replay each recorded pair in turn through one calltap and one cassette provider. With
    the standard `OTEL_*` variables set, the run is a span and every replayed request carries
    its traceparent (over any recorded one), so the replayed pairs' spans land beneath it."""
    otel = from_environment()
    if otel is None:
        return await _replay_all(pairs, settings, log, None)
    run = RunSpan("calltap replay")
    settings = replace(settings, headers=(*settings.headers, ("traceparent", run.traceparent)))
    results = await _replay_all(pairs, settings, log, otel)
    diverged = sum(1 for result in results if result.comparison.get("verdict") == "diverged")
    await export_run(otel, run.finish({"calltap.replay.pairs": len(results),
                                       "calltap.replay.diverged": diverged},
                                      f"{diverged} diverged" if diverged else None))
    return results


async def _replay_all(pairs: Iterable[Recorded], settings: Settings, log: TextIO,
                      otel: OtelSettings | None) -> list[Result]:
    async with CassetteProvider(settings.pace) as cassette, _gateway(settings) as (url, fake):
        config = Config(front=LOOPBACK, gateway=url, back=settings.back,
                        provider=cassette.url, recordings=settings.recordings,
                        pairing_window=PAIRING_WINDOW, compare_workers=1, otel=otel)
        tap = Calltap(config, log_stream=log)
        tap.addons.insert(0, UnansweredNotPaired(cassette))  # before the pairing addon
        async with (tap,
                    aiohttp.ClientSession(auto_decompress=False, timeout=CLIENT_TIMEOUT) as client):
            if fake is not None:
                fake.upstream = tap.back_url
            return [await _replay(recorded, settings, cassette, tap, client)
                    for recorded in pairs]


@asynccontextmanager
async def _gateway(settings: Settings) -> AsyncIterator[tuple[str, FakeGateway | None]]:
    """The gateway's URL, and the fake gateway when the replay runs its own."""
    if settings.gateway is not None:
        yield settings.gateway, None
        return
    async with FakeGateway() as fake:
        yield fake.url, fake


async def _replay(recorded: Recorded, settings: Settings, cassette: CassetteProvider,
                  tap: Calltap, client: aiohttp.ClientSession) -> Result:
    player = cassette.play(recorded.cassette)
    request = recorded.client
    try:
        status, request_id = await _send(client, tap.front_url + request.target(settings.query),
                                         request.method, _headers(request.headers, settings),
                                         request.body)
    except (aiohttp.ClientError, TimeoutError) as error:
        return Result(recorded, None, player, client_error=f"{type(error).__name__}: {error}")
    pair: dict[str, Any] | None
    try:
        pair = await tap.wait_compared(request_id, timeout=COMPARED_WAIT)
    except TimeoutError:
        pair = None
    return Result(recorded, pair, player, client_status=status)


async def _send(client: aiohttp.ClientSession, url: str, method: str, headers: Headers,
                body: bytes) -> tuple[int, str]:
    """Send the client's request and read the whole answer, as the client did."""
    async with client.request(method, url, headers=list(headers), data=body) as response:
        with suppress(aiohttp.ClientPayloadError):  # a cut answer is what the pair records
            await response.read()
        return response.status, response.headers.get("X-Request-ID", "")


def _headers(recorded: Headers, settings: Settings) -> Headers:
    """The recorded headers, with every name `--header` gives replaced by its value."""
    override = {name.lower() for name, _ in settings.headers}
    kept = tuple((name, value) for name, value in recorded if name.lower() not in override)
    return kept + settings.headers
