"""Reading one capture directory for a page: pair.json (when readable), each side's capture
and the recorded requests (the client's, the provider's), all through the recordings format's own
functions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calltap import recordings
from calltap.transcript import Capture
from calltap.view.pages import PairPage, build_page


@dataclass(slots=True)
class RecordedPair:
    """A capture directory, read: its page, pair.json's metadata and its files."""

    day: str
    key: str
    document: dict[str, Any]
    page: PairPage
    files: list[str]

    @property
    def legs(self) -> dict[str, Any]:
        legs = self.document.get("legs")
        return legs if isinstance(legs, dict) else {}

    @property
    def attempts(self) -> list[dict[str, Any]]:
        attempts = self.legs.get("upstream_attempts")
        return [a for a in attempts if isinstance(a, dict)] if isinstance(attempts, list) else []


def read_recorded(directory: Path, day: str, key: str) -> RecordedPair | None:
    """None when the directory holds no compared leg's body (not a capture, or not yet)."""
    try:
        document = recordings.read_pair(directory)
    except recordings.PairUnreadable:
        document = {}
    legs = recordings.pair_legs(directory)
    captures: dict[str, Capture] = {}
    for side in recordings.SIDES:
        path = recordings.leg_body(directory, side)
        if path is not None:
            try:
                captures[side] = recordings.capture_of(path.read_bytes(), legs.get(side))
            except OSError:
                continue
    if not captures:
        return None
    request = recordings.request_body(directory, legs.get("downstream"))
    page = build_page(captures.get("upstream"), captures.get("downstream"), request=request,
                      requests=recordings.pair_requests(directory))
    return RecordedPair(day, key, document, page, recordings.capture_files(directory))
