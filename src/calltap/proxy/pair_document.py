"""pair.json's draft, from a finalized capture's legs, before a worker adds what it measures.

The relay's process knows the legs (methods, paths, statuses, headers, timings, how each ended);
the worker adds each body's `bytes` and `sha256`, the endings judged from what was relayed, and
the comparison. Headers and query strings are redacted here: secrets never reach the worker or
the disk.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from calltap.proxy.analysis import BodySpec, RequestSpec
from calltap.proxy.hooks import Mode, Recording
from calltap.proxy.relay import Leg
from calltap.recordings import CAPTURE_TRUNCATED
from calltap.redact import redact_headers, redact_query


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def mode_of(recording: Recording, chosen: Leg | None) -> Mode:
    """Compare a pair whose two bodies were recorded, check a leg alone, else only record."""
    if recording.kind == "other":
        return "record"
    if recording.kind == "pair" and chosen is not None and recording.downstream is not None:
        if chosen.file is not None and recording.downstream.file is not None:
            return "compare"
        return "record"
    return "check"


def draft(recording: Recording, chosen: Leg | None, mode: Mode,
          redact_extra: tuple[str, ...]) -> dict[str, Any]:
    """pair.json without the worker's findings (sizes, hashes, judged endings, the report)."""
    legs: dict[str, Any] = {}
    if recording.downstream is not None:
        legs["downstream"] = leg_json(recording.downstream, redact_extra)
    if chosen is not None:
        legs["upstream"] = leg_json(chosen, redact_extra)
    if len(recording.attempts) > 1:
        legs["upstream_attempts"] = [leg_json(leg, redact_extra) for leg in recording.attempts]
    document: dict[str, Any] = {
        "request_id": recording.key,
        "capture_id": secrets.token_hex(8),
        "pairing": recording.pairing,
        "attempts": len(recording.attempts),
        "orphaned": recording.orphan,
        "legs": legs,
    }
    if mode == "compare":
        document["comparison"] = None
    elif mode == "check":
        document["check"] = None
    return document


def leg_json(leg: Leg, redact_extra: tuple[str, ...]) -> dict[str, Any]:
    truncated = leg.sink is not None and leg.sink.truncated
    out: dict[str, Any] = {
        "method": leg.method,
        "path": leg.path,
        "status": leg.status,
        "request_headers": redact_headers(leg.request_headers, redact_extra),
        "response_headers": redact_headers(leg.response_headers, redact_extra),
        "started_at": iso(leg.started),
        "first_byte_at": iso(leg.first_byte_at),
        "finished_at": iso(leg.finished),
        "bytes": None,
        "sha256": None,
        "ended": CAPTURE_TRUNCATED if truncated else leg.ended,
        "file": leg.file,
        "content_encoding": leg.content_encoding,
        "bytes_relayed": leg.bytes,
        "request_file": leg.request_file,
    }
    if leg.query:
        out["query"] = redact_query(leg.query)
    if truncated:
        out["relay_ended"] = leg.ended
    if leg.attempt is not None:
        out["attempt"] = leg.attempt
    if leg.error is not None:
        out["error"] = leg.error
    return out


def body_spec(leg: Leg | None) -> BodySpec | None:
    """What the worker needs to read one recorded response body."""
    if leg is None or leg.file is None:
        return None
    return {"file": leg.file, "request_file": leg.request_file, "path": leg.path,
            "content_encoding": leg.content_encoding, "content_type": leg.content_type or None,
            "status": leg.status, "truncated": leg.sink is not None and leg.sink.truncated,
            "ended": leg.ended, "bytes_relayed": leg.bytes}


def earlier_requests(recording: Recording, chosen: Leg | None) -> list[RequestSpec]:
    """The recorded requests of the upstream attempts that are not the compared one."""
    return [{"attempt": leg.attempt, "file": leg.request_file, "path": leg.path}
            for leg in recording.attempts
            if leg is not chosen and leg.request_file is not None and leg.attempt is not None]


def forget_failed(leg: Leg) -> None:
    """Drop the file names of the leg's bodies the disk thread could not record."""
    if leg.sink is not None and leg.sink.failed:
        leg.file = None
    if leg.request_sink is not None and leg.request_sink.failed:
        leg.request_file = None
