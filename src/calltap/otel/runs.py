"""A span for one `calltap probe` or `calltap replay` run: every request the run sends carries its
`traceparent`, so the spans calltap exports for those requests' pairs land on the run's trace,
beneath it. Exported once, when the run ends, by the process that ran it (the standard `OTEL_*`
variables of its environment turn it on); a receiver that is down costs that span, never the run.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from calltap.otel import wire
from calltap.otel.settings import OtelSettings, read_otel
from calltap.otel.span import SPAN_KIND_INTERNAL, PairSpan
from calltap.otel.transport import Poster


def from_environment(environ: Mapping[str, str] | None = None) -> OtelSettings | None:
    """The export settings the environment gives, or None (off, or set wrongly: a run is never
    refused for its tracing)."""
    try:
        return read_otel(None, os.environ if environ is None else environ)
    except ValueError:
        return None


@dataclass(slots=True)
class RunSpan:
    """The run's span, open: its ids now, its end and its outcome when the run is over."""

    name: str
    trace_id: int = field(default_factory=lambda: random.getrandbits(128) or 1)
    span_id: int = field(default_factory=lambda: random.getrandbits(64) or 1)
    start: int = field(default_factory=time.time_ns)

    @property
    def traceparent(self) -> str:
        """What each of the run's requests sends: the run's span is their parent, sampled."""
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-01"

    def finish(self, attributes: dict[str, Any], error: str | None = None) -> PairSpan:
        return PairSpan(self.name, self.trace_id, self.span_id, None, self.start,
                        time.time_ns(), attributes, [], error, SPAN_KIND_INTERNAL)


async def export_run(settings: OtelSettings, span: PairSpan) -> bool:
    """Post the run's span (off the loop, within the settings' timeout); whether it went."""
    poster = Poster.to(settings.traces_endpoint, settings)
    body = wire.export_request(settings.resource, [wire.span_message(span)])
    try:
        return await asyncio.to_thread(poster.post, body)
    finally:
        poster.close()
