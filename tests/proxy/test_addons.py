"""The relay core's hooks: an addon of one file sees every leg and pair, in order, and one that
fails costs a log line, never the traffic."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from tests.proxy.conftest import chat_stream, post_chat

from calltap.proxy.hooks import (
    Addon,
    CaptureClosed,
    LegArrived,
    LegEnded,
    LegStarted,
    PairCompared,
    ResponseStarted,
)


class Journal(Addon):
    """Writes down every event it gets, and when it was started and stopped."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self.seen.append(("started",))
        yield
        self.seen.append(("stopped",))

    def health(self) -> dict[str, Any]:
        return {"journal": {"events": len(self.seen)}}

    async def leg_arrived(self, event: LegArrived) -> None:
        self.seen.append(("leg_arrived", event.leg.side))

    def leg_started(self, event: LegStarted) -> None:
        self.seen.append(("leg_started", event.leg.side, event.leg.key))

    def response_started(self, event: ResponseStarted) -> None:
        self.seen.append(("response_started", event.leg.side, str(event.leg.status)))

    def leg_ended(self, event: LegEnded) -> None:
        self.seen.append(("leg_ended", event.leg.side, str(event.leg.ended)))

    def capture_closed(self, event: CaptureClosed) -> None:
        self.seen.append(("capture_closed", event.recording.key))

    def pair_compared(self, event: PairCompared) -> None:
        self.seen.append(("pair_compared", event.recording.key, str(event.verdict),
                          ",".join(event.codes)))


class Broken(Addon):
    def leg_started(self, event: LegStarted) -> None:
        raise RuntimeError("an addon's bug")

    def pair_compared(self, event: PairCompared) -> None:
        raise RuntimeError("another")


async def test_an_addon_sees_each_leg_and_the_pair_in_order(
        provider, gateway, make_tap, client) -> None:
    journal = Journal()
    _, provider_url = provider
    gateway_script, gateway_url = gateway
    tap = await make_tap(front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0),
                         provider=provider_url, addons=[journal])
    gateway_script.target = tap.back_url
    status, headers, _ = await post_chat(client, tap.front_url)
    key = headers["X-Request-ID"]
    await tap.wait_compared(key)
    assert status == 200
    assert tap.health()["journal"] == {"events": len(journal.seen)}
    await tap.stop()
    seen = journal.seen
    for side in ("downstream", "upstream"):
        assert [event for event in seen if side in event] == [
            ("leg_arrived", side),
            ("leg_started", side, key),
            ("response_started", side, "200"),
            ("leg_ended", side, "complete"),
        ]
    assert seen[:3] == [("started",), ("leg_arrived", "downstream"),
                        ("leg_started", "downstream", key)], "the front leg comes first"
    assert seen[-3:] == [("capture_closed", key), ("pair_compared", key, "equal", ""),
                         ("stopped",)], "the capture closes once both legs ended"
    assert len(seen) == 12


async def test_a_failing_addon_costs_a_log_line_not_the_traffic(
        provider, gateway, make_tap, client, log) -> None:
    _, provider_url = provider
    gateway_script, gateway_url = gateway
    tap = await make_tap(front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0),
                         provider=provider_url, addons=[Broken()])
    gateway_script.target = tap.back_url
    status, headers, body = await post_chat(client, tap.front_url)
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert (status, body) == (200, chat_stream())
    assert pair["comparison"]["verdict"] == "equal"
    stages = [line["stage"] for line in log.lines("capture.failed")]
    assert stages.count("leg_started") == 2 and stages.count("pair_compared") == 1
    assert [line["error"] for line in log.lines("capture.failed")] == ["RuntimeError"] * 3
