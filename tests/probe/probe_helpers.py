"""What the probe tests share: the fake provider behind a fake gateway on loopback (faithful, or
injecting one defect), a run of probes against a URL, and the outcomes by name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from calltap.fakes import FakeGateway, FakeProvider
from calltap.probe.client import Limits
from calltap.probe.probes import PROBES, Probe
from calltap.probe.runner import Outcome, Run, Target, run_probes

KEY = "sk-probe-test-0123456789abcdefXYZ"


@asynccontextmanager
async def gateway(defect: str | None = None, **provider: Any) -> AsyncIterator[str]:
    """The URL of a fake gateway (injecting `defect`) in front of a fake provider."""
    async with FakeProvider(**provider) as fake, FakeGateway(fake.url, defect=defect) as relay:
        yield relay.url


async def probe(
    url: str,
    names: list[str] | None = None,
    dialect: str = "openai.chat",
    limits: Limits | None = None,
) -> Run:
    probes: list[Probe] = [PROBES[name] for name in names] if names else list(PROBES.values())
    return await run_probes(Target(url, "gpt-4o-mini", dialect, KEY), probes, limits or Limits())


def by_name(run: Run) -> dict[str, Outcome]:
    return {outcome.name: outcome for outcome in run.outcomes}
