"""A recorded pair as what a replay needs: the client's request, the provider's answers attempt
by attempt (the cassette), and the comparison the recording ended with: its answers' and its
requests' findings (a pair compared before requests were has its recorded requests compared now,
so that a request finding the replay reproduces is not taken for a new one).

Read once from a pair directory through `calltap.recordings`, then plain immutable data: the
provider server, the matcher and the exporter all work from it without touching the disk again.
Headers whose values were redacted at recording time are left out (the replay cannot know them;
`--header` supplies them), as are the ones the HTTP layer writes itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote_plus

from calltap import recordings
from calltap.compare_requests import compare_pair_requests
from calltap.proxy.relay import HOP_BY_HOP
from calltap.redact import REDACTED, redacted_parameters
from calltap.report import finding_json, requests_json

Headers = tuple[tuple[str, str], ...]

TRANSPORT_HEADERS = HOP_BY_HOP | {"content-length", "date", "server"}
"""Written by whoever sends the message, never replayed from the recording."""
IDENTITY_HEADERS = frozenset({"x-request-id", "traceparent"})
"""The recorded request's identity: the replay is a new request, which calltap names afresh."""


class CassetteError(ValueError):
    """A pair directory a replay cannot be made from; the message says what is missing."""


@dataclass(frozen=True, slots=True)
class Timing:
    """How the provider paced an answer: seconds until its first byte, then until its last."""

    first_byte: float = 0.0
    rest: float = 0.0


@dataclass(frozen=True, slots=True)
class Answer:
    """One recorded upstream attempt: the request the gateway made and what the provider said."""

    attempt: int
    method: str
    path: str
    request_body: bytes | None
    status: int
    headers: Headers
    body: bytes
    timing: Timing
    ended: str
    content_encoding: str | None


@dataclass(frozen=True, slots=True)
class ClientRequest:
    """The client's request as recorded at the front, minus what the replay must not resend."""

    method: str
    path: str
    headers: Headers
    body: bytes
    redacted: tuple[str, ...]
    """Header names the recording redacted: a gateway may need them back (`--header`)."""
    query: str = ""
    """As the client sent it (Azure-style routes need their `api-version`), secret parameters'
    values redacted."""

    def target(self, parameters: Headers = ()) -> str:
        """The path and query to send the request to again, with each of `parameters` (NAME,
        VALUE) given its value (`--query`)."""
        query = with_parameters(self.query, parameters)
        return f"{self.path}?{query}" if query else self.path

    @property
    def redacted_parameters(self) -> tuple[str, ...]:
        """Query parameters whose values the recording redacted (`--query` gives them back)."""
        return redacted_parameters(self.query)


class Judged:
    """The verdict and codes of a comparison object (`comparison` of a pair.json), as the
    replay prints them: the recorded pair's and the replayed one's."""

    __slots__ = ()
    comparison: dict[str, Any]

    @property
    def verdict(self) -> str:
        return str(self.comparison.get("verdict") or "not compared")

    @property
    def codes(self) -> tuple[str, ...]:
        return finding_codes(self.comparison)


@dataclass(frozen=True, slots=True)
class Recorded(Judged):
    """Everything a replay of one pair needs."""

    directory: Path
    request_id: str
    client: ClientRequest
    cassette: tuple[Answer, ...]
    comparison: dict[str, Any]
    document: dict[str, Any]
    """pair.json as read, for the exporter."""


def finding_codes(comparison: dict[str, Any]) -> tuple[str, ...]:
    """The distinct codes of a comparison's findings, in the order they were found."""
    findings = comparison.get("findings")
    if not isinstance(findings, list):
        return ()
    codes = (f.get("code") for f in findings if isinstance(f, dict))
    return tuple(dict.fromkeys(code for code in codes if isinstance(code, str)))


def load(directory: Path) -> Recorded:
    """The replay's view of a pair directory; CassetteError when it lacks a part."""
    try:
        document = recordings.read_pair(directory)
    except recordings.PairUnreadable as error:
        raise CassetteError(str(error)) from None
    legs = document.get("legs")
    downstream = legs.get("downstream") if isinstance(legs, dict) else None
    if not isinstance(downstream, dict):
        raise CassetteError(f"{directory}: pair.json has no downstream leg to replay")
    attempts = recordings.upstream_attempts(document)
    if not attempts:
        raise CassetteError(f"{directory}: pair.json has no upstream leg: nothing to answer with")
    comparison = document.get("comparison")
    return Recorded(
        directory=directory,
        request_id=str(document.get("request_id") or directory.name),
        client=_client_request(directory, downstream),
        cassette=tuple(_answer(directory, n, leg) for n, leg in enumerate(attempts, 1)),
        comparison=with_recorded_requests(directory, comparison),
        document=document,
    )


def with_recorded_requests(directory: Path, comparison: Any) -> dict[str, Any]:
    """pair.json's comparison, joined with the pair's recorded requests compared now when it
    holds no `requests` (written before requests were compared) as the proxy joins them: their
    findings added, and a diverged request makes an equal pair diverged."""
    if not isinstance(comparison, dict):
        return {}
    if "requests" in comparison or not isinstance(comparison.get("findings"), list):
        return comparison
    recorded = recordings.pair_requests(directory)
    if recorded is None:
        return comparison
    requests, attempts = compare_pair_requests(recorded)
    joined = {**comparison, "requests": requests_json(requests, attempts),
              "findings": [*comparison["findings"], *map(finding_json, requests.findings)]}
    if comparison.get("verdict") == "equal" and requests.verdict == "diverged":
        joined["verdict"] = "diverged"
    return joined


def _client_request(directory: Path, leg: dict[str, Any]) -> ClientRequest:
    body = recordings.request_body(directory, leg)
    if body is None:
        raise CassetteError(f"{directory}: the client's request body was not recorded")
    headers, redacted = replayable_headers(leg.get("request_headers"), IDENTITY_HEADERS)
    return ClientRequest(_text(leg, "method", "POST"), _text(leg, "path", "/"), headers, body,
                         redacted, _text(leg, "query", ""))


def _answer(directory: Path, attempt: int, leg: dict[str, Any]) -> Answer:
    body = recordings.response_body(directory, leg)
    if body is None:
        raise CassetteError(f"{directory}: the body of upstream attempt {attempt} is missing")
    status = leg.get("status")
    if not isinstance(status, int):
        raise CassetteError(f"{directory}: upstream attempt {attempt} has no status")
    encoding = leg.get("content_encoding")
    return Answer(
        attempt=attempt,
        method=_text(leg, "method", "POST"),
        path=_text(leg, "path", "/"),
        request_body=recordings.request_body(directory, leg),
        status=status,
        headers=replayable_headers(leg.get("response_headers"))[0],
        body=body,
        timing=timing(leg),
        ended=_text(leg, "ended", recordings.COMPLETE),
        content_encoding=encoding if isinstance(encoding, str) and encoding else None,
    )


def with_parameters(query: str, parameters: Headers) -> str:
    """`query` with each (NAME, VALUE) of `parameters` set: every parameter of that (decoded)
    name takes the value in place, and a name the query lacks is added at the end. Values are
    percent-encoded; every other byte of `query` stays as it was."""
    if not parameters:
        return query
    values = dict(parameters)
    pieces = query.split("&") if query else []
    placed = set()
    for index, piece in enumerate(pieces):
        raw_name = piece.partition("=")[0]
        name = unquote_plus(raw_name)
        if name in values:
            pieces[index] = f"{raw_name}={quote(values[name], safe='')}"
            placed.add(name)
    pieces += [f"{quote(name, safe='')}={quote(value, safe='')}"
               for name, value in parameters if name not in placed]
    return "&".join(pieces)


def replayable_headers(recorded: Any, drop: frozenset[str] = frozenset()) -> tuple[Headers,
                                                                                  tuple[str, ...]]:
    """Recorded headers worth sending again, and the names whose values were redacted."""
    if not isinstance(recorded, dict):
        return (), ()
    kept: list[tuple[str, str]] = []
    redacted: list[str] = []
    for name, value in recorded.items():
        values = value if isinstance(value, list) else [value]
        if name in TRANSPORT_HEADERS or name in drop:
            continue
        if REDACTED in values:
            redacted.append(name)
            continue
        kept.extend((name, item) for item in values if isinstance(item, str))
    return tuple(kept), tuple(redacted)


def timing(leg: dict[str, Any]) -> Timing:
    """The leg's pace from its timestamps; zero where they are missing or out of order."""
    started, first, finished = (_instant(leg.get(key))
                                for key in ("started_at", "first_byte_at", "finished_at"))
    if started is None or first is None or finished is None:
        return Timing()
    return Timing(max(0.0, first - started), max(0.0, finished - first))


def _instant(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _text(leg: dict[str, Any], key: str, default: str) -> str:
    value = leg.get(key)
    return value if isinstance(value, str) and value else default
