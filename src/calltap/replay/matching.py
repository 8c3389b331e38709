"""Which recorded answer a gateway's request gets: matched by meaning, attempt by attempt.

A gateway replaying the same client request rarely sends the same bytes: it adds fields, orders
keys its own way, stamps ids. So a request matches a recorded attempt when the method and path
are the same and the dialect's reading of the conversation (the normalization calltap pairs legs
with: the last turn's content and the tool names) is the same. Attempts are served in the
order the gateway made them; a request the cassette cannot answer is a miss, with the reason.

Requests to paths that are not chat endpoints (a gateway's `GET /v1/models` or health check)
were never part of the pair: they are answered 404 and noted, not counted as misses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calltap.dialects import COMPARED_PATHS
from calltap.proxy.fingerprint import request_fingerprint
from calltap.replay.cassette import Answer


@dataclass(frozen=True, slots=True)
class Miss:
    """A request the cassette had no answer for."""

    method: str
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.method} {self.path}: {self.reason}"


def request_key(body: bytes | None, path: str) -> str | None:
    """The meaning a request is matched by; None when its body is no chat request."""
    return None if body is None else request_fingerprint(body, path)


def is_chat_path(path: str) -> bool:
    return any(path == known or path.endswith(known) for known in COMPARED_PATHS)


@dataclass
class Player:
    """Hands out a cassette's answers in order, to the requests that match them."""

    cassette: tuple[Answer, ...]
    served: list[Answer] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    side_requests: list[str] = field(default_factory=list)
    """Requests off the chat endpoints, answered 404: `METHOD path`."""

    def answer(self, method: str, path: str, body: bytes) -> Answer | Miss | None:
        """The recorded answer for this request, a Miss, or None for a side request."""
        if len(self.served) >= len(self.cassette):
            if not is_chat_path(path):
                self.side_requests.append(f"{method} {path}")
                return None
            return self._miss(method, path, f"request {len(self.served) + 1}, but the cassette"
                              f" holds {_attempts(len(self.cassette))}")
        expected = self.cassette[len(self.served)]
        if (method, path) != (expected.method, expected.path):
            if not is_chat_path(path):
                self.side_requests.append(f"{method} {path}")
                return None
            return self._miss(method, path, f"attempt {expected.attempt} was recorded as"
                              f" {expected.method} {expected.path}")
        recorded = request_key(expected.request_body, expected.path)
        if recorded is not None and request_key(body, path) != recorded:
            return self._miss(method, path, f"the conversation (last turn, tool names) differs"
                              f" from attempt {expected.attempt}'s")
        self.served.append(expected)
        return expected

    @property
    def unplayed(self) -> int:
        """Recorded attempts the gateway never asked for."""
        return len(self.cassette) - len(self.served)

    def _miss(self, method: str, path: str, reason: str) -> Miss:
        miss = Miss(method, path, reason)
        self.misses.append(miss)
        return miss


def _attempts(count: int) -> str:
    return "1 attempt" if count == 1 else f"{count} attempts"
