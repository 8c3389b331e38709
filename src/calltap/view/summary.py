"""One row of the pair list, from a pair.json document: pure data, no I/O.

The list shows what a person scans for first (time, request id, endpoint, model, dialects,
pairing, attempts, verdict, codes, bytes, duration); `summarize` takes it from pair.json and the
client's request, and never raises on a document it does not understand: a field it cannot read
is None.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import orjson

MODEL_IN_PATH = re.compile(r"/models?/([^/:?]+)")
"""The model a path names: Bedrock's `/model/{id}/…`, Gemini's `/models/{m}:…`."""
REPORTS = ("comparison", "check")
"""pair.json's keys for a pair's comparison and a single leg's check."""
RECORDED = "recorded"
"""The verdict of a capture that was recorded but neither compared nor checked."""
SKIPPED = "skipped"
"""The verdict of a capture calltap did not compare because its comparison backlog shed it
(pair.json's `skipped`): `calltap scan` compares it."""


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


def summarize(day: str, key: str, document: dict[str, Any], request: bytes | None) -> Summary:
    """The list row of one capture; `request` is the client's request body, when recorded."""
    legs = document.get("legs") if isinstance(document.get("legs"), dict) else {}
    down = _dict(legs.get("downstream"))
    up = _dict(legs.get("upstream"))
    attempts = legs.get("upstream_attempts")
    if not up and isinstance(attempts, list) and attempts:
        up = _dict(attempts[-1])
    first = down or up
    report = next((_dict(document[name]) for name in REPORTS if name in document), {})
    endpoint = _text(first.get("path"))
    return Summary(
        day=day,
        key=key,
        request_id=_text(document.get("request_id")) or key,
        started_at=_text(first.get("started_at")),
        endpoint=endpoint,
        model=model_of(request, endpoint),
        dialect_up=_dialect(report, "upstream", bool(up)),
        dialect_down=_dialect(report, "downstream", bool(down)),
        pairing=_text(document.get("pairing")),
        attempts=_int(document.get("attempts")),
        verdict=_text(report.get("verdict"))
        or (SKIPPED if isinstance(document.get("skipped"), dict) else RECORDED),
        codes=codes_of(report),
        bytes_up=_int(up.get("bytes")),
        bytes_down=_int(down.get("bytes")),
        duration_ms=duration_ms(first),
    )


def codes_of(report: dict[str, Any]) -> tuple[str, ...]:
    """The distinct finding codes of a comparison or a check, sorted."""
    findings = report.get("findings")
    if not isinstance(findings, list):
        return ()
    return tuple(sorted({f["code"] for f in findings if isinstance(f, dict)
                         and isinstance(f.get("code"), str)}))


def model_of(request: bytes | None, path: str | None) -> str | None:
    """The model a request asked for: its `model` field, else the one its path names."""
    if request:
        try:
            value = orjson.loads(request)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("model"), str):
            return value["model"]
    match = MODEL_IN_PATH.search(path or "")
    return match.group(1) if match else None


def duration_ms(leg: dict[str, Any]) -> float | None:
    """From the leg's start to its end, in milliseconds."""
    started, finished = _time(leg.get("started_at")), _time(leg.get("finished_at"))
    if started is None or finished is None:
        return None
    return round((finished - started).total_seconds() * 1000, 1)


def _dialect(report: dict[str, Any], side: str, present: bool) -> str | None:
    if not present:
        return None
    summary = report.get(side) or report.get("capture")
    return _text(summary.get("dialect")) if isinstance(summary, dict) else None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
