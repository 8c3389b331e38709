"""What one replay showed: the recorded verdict and codes beside the replayed ones.

A replay reproduced its pair when the new comparison has the same verdict and the same set of
codes, its requests' codes among them (what the gateway asked the provider, against what the
client asked); it differs otherwise (a fixed gateway differs: `diverged` became `equal`); it
could not be replayed when the gateway asked the cassette for something it does not hold
(another path, another conversation, more attempts than were recorded), whatever the comparison
says: each such request is named with its method and path (`misses`, and `unanswered` in the
JSON).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from calltap.replay.cassette import Judged, Recorded
from calltap.replay.matching import Player

Status = Literal["reproduced", "different", "cannot"]
EXIT_CODES: dict[Status, int] = {"reproduced": 0, "different": 1, "cannot": 3}


@dataclass(frozen=True, slots=True)
class Result(Judged):
    recorded: Recorded
    pair: dict[str, Any] | None
    """The replayed pair's pair.json, or None when calltap never wrote it."""
    player: Player
    client_status: int | None = None
    client_error: str | None = None

    @property
    def comparison(self) -> dict[str, Any]:
        comparison = (self.pair or {}).get("comparison")
        return comparison if isinstance(comparison, dict) else {}

    @property
    def status(self) -> Status:
        if self.player.misses:
            return "cannot"
        same = (self.verdict, set(self.codes)) == (self.recorded.verdict, set(self.recorded.codes))
        return "reproduced" if same else "different"

    def notes(self) -> list[str]:
        """Why a replay came out as it did, beyond the verdicts: misses, unasked attempts, a
        client that got no answer, secrets the gateway may have wanted."""
        notes = [f"cassette miss: {miss}" for miss in self.player.misses]
        if self.player.unplayed:
            notes.append(f"the gateway asked for {len(self.player.served)} of"
                         f" {len(self.recorded.cassette)} recorded attempts")
        if self.player.side_requests:
            notes.append("answered 404 (not part of the pair): "
                         + ", ".join(self.player.side_requests))
        if self.client_error:
            notes.append(f"the client got no answer: {self.client_error}")
        elif not self.player.served and not self.player.misses and self.client_status:
            notes.append(f"the gateway answered {self.client_status} without calling the"
                         " provider")
            notes.extend(f"the recording redacted {name}: pass --header '{name}: …'"
                         for name in self.recorded.client.redacted)
            notes.extend(f"the recording redacted the query parameter {name}:"
                         f" pass --query '{name}=…'"
                         for name in self.recorded.client.redacted_parameters)
        return notes

    def as_json(self) -> dict[str, Any]:
        replayed = self.pair or {}
        return {
            "request_id": self.recorded.request_id,
            "directory": str(self.recorded.directory),
            "result": self.status,
            "recorded": {"verdict": self.recorded.verdict, "codes": list(self.recorded.codes),
                         "attempts": len(self.recorded.cassette)},
            "replayed": {"verdict": self.verdict, "codes": list(self.codes),
                         "attempts": replayed.get("attempts"),
                         "request_id": replayed.get("request_id"),
                         "client_status": self.client_status},
            "misses": [str(miss) for miss in self.player.misses],
            "unanswered": [{"method": miss.method, "path": miss.path, "reason": miss.reason}
                           for miss in self.player.misses],
            "notes": self.notes(),
        }


def exit_code(results: list[Result]) -> int:
    """3 when any pair could not be replayed, else 1 when any differs, else 0."""
    statuses = {result.status for result in results}
    for status in ("cannot", "different"):
        if status in statuses:
            return EXIT_CODES[status]
    return EXIT_CODES["reproduced"]
