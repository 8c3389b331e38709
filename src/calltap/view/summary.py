"""One row of the pair list, as the pages and `/api/pairs` show it: pure data, no I/O.

The list shows what a person scans for first (time, request id, endpoint, model, dialects,
pairing, attempts, verdict, codes, bytes, duration); `calltap.view.listing` reads it from the
index of pairs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Summary:
    day: str
    key: str
    request_id: str
    started_at: str | None
    endpoint: str | None
    model: str | None
    dialect_up: str | None
    dialect_down: str | None
    pairing: str | None
    attempts: int | None
    verdict: str
    codes: tuple[str, ...]
    bytes_up: int | None
    bytes_down: int | None
    duration_ms: float | None

    def as_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["codes"] = list(self.codes)
        return row
