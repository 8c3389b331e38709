"""Running the probes one after the other, each within its wall-clock limit and all within the
overall one; a probe that fails, times out or cannot connect is a failed outcome, and the others
still run.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from calltap.probe.client import BoundedClient, Limits, ProbeFailure
from calltap.probe.judge import Judgement, expected_calls, judge_first, judge_text
from calltap.probe.masking import Masker
from calltap.probe.probes import ROUND_TRIP_RESULT, Probe
from calltap.probe.requests import SHAPES, Call, Shape, endpoint

ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how to probe: the base URL, the model, the dialect and the key."""

    base_url: str
    model: str
    dialect: str = "openai.chat"
    key: str | None = None
    traceparent: str | None = None
    """Sent with every request when the run is traced, so calltap's pair spans join its trace."""

    @property
    def shape(self) -> Shape:
        return SHAPES[self.dialect]


@dataclass(slots=True)
class Outcome:
    """One probe's result, as results.json and the report show it."""

    name: str
    passed: bool
    expected: Any
    received: Any
    reason: str
    request_ids: list[str] = field(default_factory=list)
    """The `X-Request-ID` of each answer, in turn order (a calltap front's capture keys)."""
    seconds: float = 0.0
    failed_request_id: str | None = None
    """The request id of the turn that decided the outcome (the one that failed, if any): the
    pair attribution looks up."""
    pair: dict[str, Any] | None = None
    """The calltap pair of the failed (else the last) turn: verdict, codes, attribution."""


@dataclass(slots=True)
class Run:
    """Every outcome and the sanitized trace of every exchange."""

    outcomes: list[Outcome]
    trace: list[dict[str, Any]]


async def run_probes(
    target: Target, probes: list[Probe], limits: Limits, masker: Masker | None = None
) -> Run:
    """Send every probe in order and judge each; never raises for what a server does."""
    masker = masker or Masker(target.key)
    outcomes: list[Outcome] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limits.overall
    async with BoundedClient(target.key, limits, masker) as client:
        for probe in probes:
            wall = limits.round_trip_wall if probe.round_trip else limits.probe_wall
            left = deadline - loop.time()
            if left <= 0:
                outcomes.append(_not_run(probe, limits.overall))
                continue
            if left < wall:
                stop = f"stopped at the overall limit of {limits.overall:g} s"
            else:
                stop = f"stopped at the wall-clock limit of {wall:g} s"
            outcomes.append(await _timed(client, target, probe, min(wall, left), stop))
    return Run([_masked(outcome, masker) for outcome in outcomes], client.trace)


async def _timed(
    client: BoundedClient, target: Target, probe: Probe, limit: float, stop: str
) -> Outcome:
    """One probe within `limit` seconds; `stop` is its reason when the limit cuts it."""
    started = time.monotonic()
    outcome = Outcome(probe.name, False, _expected(probe), None, "")
    try:
        async with asyncio.timeout(limit):
            await _probe(client, target, probe, outcome)
    except TimeoutError:
        outcome.reason = stop
        outcome.passed = False
    except ProbeFailure as failure:
        outcome.reason = str(failure)
        outcome.passed = False
    outcome.seconds = round(time.monotonic() - started, 3)
    return outcome


async def _probe(client: BoundedClient, target: Target, probe: Probe, outcome: Outcome) -> None:
    """One probe's turns; the outcome is filled in as they go, so a timeout keeps what was seen."""
    shape = target.shape
    url = endpoint(target.base_url, shape)
    first = await _turn(client, target, url, shape.first(probe, target.model), probe, "call")
    outcome.request_ids.extend(first.request_ids)
    judgement = first.judgement
    outcome.received = judgement.received
    if judgement.passed and probe.round_trip:
        call = judgement.calls[0]
        body = shape.second(
            probe, target.model, Call(call.id or "call_probe_1", call.name, call.arguments)
        )
        second = await _turn(client, target, url, body, probe, "answer")
        outcome.request_ids.extend(second.request_ids)
        outcome.received = {"call": judgement.received, "answer": second.judgement.received}
        judgement = second.judgement
        outcome.failed_request_id = second.request_ids[0] if second.request_ids else None
    else:
        outcome.failed_request_id = first.request_ids[0] if first.request_ids else None
    outcome.passed = judgement.passed
    outcome.reason = "; ".join(judgement.reasons)


@dataclass(slots=True)
class _Turn:
    judgement: Judgement
    request_ids: list[str]


async def _turn(
    client: BoundedClient,
    target: Target,
    url: str,
    body: dict[str, Any],
    probe: Probe,
    step: str,
) -> _Turn:
    headers = {"X-Request-ID": f"probe-{probe.name}-{step}-{secrets.token_hex(4)}"}
    if probe.stream:
        headers["Accept"] = "text/event-stream"
    if target.dialect == "anthropic.messages":
        headers["anthropic-version"] = ANTHROPIC_VERSION
    if target.traceparent is not None:
        headers["traceparent"] = target.traceparent
    reply = await client.post(url, body, headers, f"{probe.name}: {step}")
    path = target.shape.path
    if step == "call":
        judgement = judge_first(probe, reply, path, target.dialect)
    else:
        judgement = judge_text(reply, path, target.dialect)
    return _Turn(judgement, [reply.request_id] if reply.request_id else [])


def _expected(probe: Probe) -> Any:
    calls = expected_calls(probe)
    if probe.forbids:
        return {"calls": calls, "answer": "any text, finish reason stop"}
    if probe.round_trip:
        return {"call": calls, "answer": {"contains": ROUND_TRIP_RESULT}}
    return calls


def _not_run(probe: Probe, overall: float) -> Outcome:
    return Outcome(
        probe.name,
        False,
        _expected(probe),
        None,
        f"not run: the overall limit of {overall:g} s was reached",
    )


def _masked(outcome: Outcome, masker: Masker) -> Outcome:
    outcome.received = masker.value(outcome.received)
    outcome.reason = masker.text(outcome.reason)
    return outcome
