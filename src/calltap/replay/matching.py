"""Which recorded answer a gateway's request gets: matched by meaning, attempt by attempt.

A gateway replaying the same client request rarely sends the same bytes: it adds fields, orders
keys its own way, stamps ids. So a request matches a recorded attempt when the method and path
are the same and the dialect's reading of the conversation's last turn (the normalization
calltap pairs legs with: the text and tool results of the trailing turn) is the same. What the
request offers and how it asks (the tools, the tool choice, the sampling settings, earlier turns)
is left out on purpose: that is what a request-side divergence is about, so a gateway that
stopped dropping a tool, or sends the tool choice it was given, still asks the recorded question
and gets the recorded answer, and its replayed pair says whether the defect is fixed. Attempts
are served in the order the gateway made them; a request the cassette cannot answer is a miss,
with the reason: another path than the attempt's (a chat endpoint or not: a gateway that
calls `/v1/completions` or a moderation endpoint for the client's request asks for an answer
that was never recorded), another conversation, or more attempts than were recorded.

Requests without a body off the chat endpoints (a gateway's `GET /v1/models` or health check)
were never part of the pair: they are answered 404 and noted, not counted as misses.
`expects` says, without serving anything, whether a request would get a recorded answer: the
replay asks it when the request reaches calltap's back, so that what the cassette refuses is
never recorded as one of the pair's upstream attempts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calltap.dialects import COMPARED_PATHS
from calltap.proxy.fingerprint import turn_fingerprint
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
    """The meaning a request is matched by (its last turn); None when its body is no chat
    request."""
    return None if body is None else turn_fingerprint(body, path)


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
        found = self.judge(method, path, body)
        if found is None:
            self.side_requests.append(f"{method} {path}")
        elif isinstance(found, Miss):
            self.misses.append(found)
        else:
            self.served.append(found)
        return found

    def expects(self, method: str, path: str, body: bytes | None) -> bool:
        """Whether this request would get the next recorded answer (serving nothing); `body`
        None when only its first bytes are known: then the conversation is not checked."""
        return isinstance(self.judge(method, path, body), Answer)

    def judge(self, method: str, path: str, body: bytes | None) -> Answer | Miss | None:
        """What `answer` would give, without keeping anything."""
        if not is_chat_path(path) and not body:
            return None
        if len(self.served) >= len(self.cassette):
            return Miss(method, path, f"request {len(self.served) + 1}, but the cassette"
                        f" holds {_attempts(len(self.cassette))}")
        expected = self.cassette[len(self.served)]
        if (method, path) != (expected.method, expected.path):
            return Miss(method, path, f"attempt {expected.attempt} was recorded as"
                        f" {expected.method} {expected.path}")
        recorded = request_key(expected.request_body, expected.path)
        if body is not None and recorded is not None and request_key(body, path) != recorded:
            return Miss(method, path, f"the conversation's last turn differs"
                        f" from attempt {expected.attempt}'s")
        return expected

    @property
    def unplayed(self) -> int:
        """Recorded attempts the gateway never asked for."""
        return len(self.cassette) - len(self.served)


def _attempts(count: int) -> str:
    return "1 attempt" if count == 1 else f"{count} attempts"
