"""One index row per stored pair, from its pair.json: pure data, no I/O.

The row holds what the list shows and what people ask about fleets of pairs: when, which route
and model, which dialects, how it paired, the verdict and its findings (`codes`, `severities` and
`sides` are parallel lists, one entry per distinct code and side), sizes, duration, and which
replica stored it under which key. `FORMAT` is the row schema's version: columns are added, never
renamed, and a reader takes segments of every format (missing columns read as null).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import orjson

FORMAT = 1
COLUMNS: dict[str, str] = {
    "request_id": "VARCHAR", "stored_as": "VARCHAR", "day": "VARCHAR",
    "started_at": "TIMESTAMPTZ", "finished_at": "TIMESTAMPTZ", "route": "VARCHAR",
    "model": "VARCHAR", "dialect_upstream": "VARCHAR", "dialect_downstream": "VARCHAR",
    "pairing": "VARCHAR", "attempts": "INTEGER", "verdict": "VARCHAR", "codes": "VARCHAR[]",
    "severities": "VARCHAR[]", "sides": "VARCHAR[]", "bytes_upstream": "BIGINT",
    "bytes_downstream": "BIGINT", "duration_ms": "DOUBLE", "replica": "VARCHAR",
    "capture_id": "VARCHAR", "kept": "VARCHAR", "format": "INTEGER",
}
"""Every column and its DuckDB type, in segment order."""
MODEL_SEGMENT = re.compile(r"(/models?/)[^/:?]+")
MODEL_IN_PATH = re.compile(r"/models?/([^/:?]+)")
"""The model a path names: Bedrock's `/model/{id}/…`, Gemini's `/models/{m}:…`."""
REPORTS = ("comparison", "check")
"""pair.json's keys for a pair's comparison and a single leg's check."""
RECORDED = "recorded"
"""The verdict of a capture that was recorded but neither compared nor checked."""
SKIPPED = "skipped"
"""The verdict of a capture calltap did not compare because its comparison backlog shed it
(pair.json's `skipped`): `calltap scan` compares it."""
SEVERITY_ORDER = {"fatal": 0, "negotiable": 1, "cosmetic": 2}


def row_of(document: dict[str, Any], request: bytes | None, *, day: str, stored_as: str,
           replica: str, kept: str = "all") -> dict[str, Any]:
    """The row of one stored pair. Never raises on a document it does not understand: a field
    it cannot read is None."""
    legs = _dict(document.get("legs"))
    down, up = _dict(legs.get("downstream")), _dict(legs.get("upstream"))
    attempts = legs.get("upstream_attempts")
    if not up and isinstance(attempts, list) and attempts:
        up = _dict(attempts[-1])
    first = down or up
    report = next((_dict(document[name]) for name in REPORTS if name in document), {})
    path = _text(first.get("path"))
    findings = _findings(report)
    started, finished = _time(first.get("started_at")), _time(first.get("finished_at"))
    return {
        "request_id": _text(document.get("request_id")) or stored_as,
        "stored_as": stored_as,
        "day": day,
        "started_at": started,
        "finished_at": finished,
        "route": route_of(path),
        "model": _asked_model(report) or model_of(request, path),
        "dialect_upstream": _dialect(report, "upstream") if up else None,
        "dialect_downstream": _dialect(report, "downstream") if down else None,
        "pairing": _text(document.get("pairing")),
        "attempts": _int(document.get("attempts"), 32),
        "verdict": _text(report.get("verdict"))
        or (SKIPPED if isinstance(document.get("skipped"), dict) else RECORDED),
        "codes": [code for code, _, _ in findings],
        "severities": [severity for _, severity, _ in findings],
        "sides": [side for _, _, side in findings],
        "bytes_upstream": _int(up.get("bytes")),
        "bytes_downstream": _int(down.get("bytes")),
        "duration_ms": round((finished - started).total_seconds() * 1000, 1)
        if started and finished else None,
        "replica": replica,
        "capture_id": _text(document.get("capture_id")),
        "kept": kept,
        "format": FORMAT,
    }


def route_of(path: str | None) -> str | None:
    """The request path without its query, a model it names read as `{model}`: one route per
    endpoint, however many models it serves."""
    if path is None:
        return None
    return MODEL_SEGMENT.sub(r"\1{model}", path.split("?", 1)[0])


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


def _findings(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(code, severity, side) of each distinct finding (requests' included), most severe
    first, then by code."""
    seen: dict[tuple[str, str], str] = {}
    findings = report.get("findings")
    for finding in findings if isinstance(findings, list) else ():
        if not isinstance(finding, dict) or not isinstance(finding.get("code"), str):
            continue
        side = _text(finding.get("side")) or ""
        severity = _text(finding.get("severity")) or ""
        key = (finding["code"], side)
        if key not in seen or _rank(severity) < _rank(seen[key]):
            seen[key] = severity
    return sorted(((code, severity, side) for (code, side), severity in seen.items()),
                  key=lambda item: (_rank(item[1]), item[0], item[2]))


def _asked_model(report: dict[str, Any]) -> str | None:
    """The model the client asked for, as the requests' comparison read it."""
    requests = _dict(report.get("requests"))
    return _text(_dict(requests.get("downstream")).get("model")) or _text(
        _dict(requests.get("upstream")).get("model"))


def _rank(severity: str) -> int:
    return SEVERITY_ORDER.get(severity, len(SEVERITY_ORDER))


def _dialect(report: dict[str, Any], side: str) -> str | None:
    summary = report.get(side) or report.get("capture")
    return _text(summary.get("dialect")) if isinstance(summary, dict) else None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any, bits: int = 64) -> int | None:
    """An integer its column holds (BIGINT; INTEGER for `attempts`), else None: a row the
    segment cannot hold would stop its writer's segments for good."""
    if isinstance(value, int) and not isinstance(value, bool) and (
            -(1 << (bits - 1)) <= value < 1 << (bits - 1)):
        return value
    return None
