"""Keep secrets off disk: header and query redaction for pair.json, optional masking of bodies.

A redacted header or query parameter keeps its name (people can see a key was sent) and loses
its value.
Body masking is a blunt tool: it rewrites the recorded bytes, so the comparator sees the
masked text and a pattern that also matches inside tool-call arguments changes what is
compared. It is off unless patterns are configured.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote_plus

SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "api-key", "x-api-key",
     "x-goog-api-key", "x-litellm-api-key"}
)
"""Header names (lower case) whose values never reach disk: the six the README names, plus the key
headers of Gemini's API and of LiteLLM's virtual keys, which gateways put on the wire too."""

SECRET_QUERY_PARAMETERS = frozenset(
    {"key", "api_key", "api-key", "apikey", "access_token", "token", "sig",
     "x-amz-credential", "x-amz-security-token", "x-amz-signature"}
)
"""Query parameter names (lower case, percent-decoded) whose values never reach disk: Gemini's
REST API takes its key as `?key=`, some gateways accept `api_key`, `apikey` or an OAuth
`access_token`, an Azure SAS URL signs with `sig`, and an AWS presigned URL carries its
credential, session token and signature."""

REDACTED = "[redacted]"
MASKED = b"[masked]"


def redact_headers(
    headers: Iterable[tuple[str, str]], extra: Iterable[str] = ()
) -> dict[str, str | list[str]]:
    """Headers as a JSON-ready mapping: names lower-cased, a repeated header as a list of its
    values in arrival order, secret and `extra` headers' values replaced by `[redacted]`."""
    secret = SECRET_HEADERS.union(name.lower() for name in extra)
    out: dict[str, str | list[str]] = {}
    for raw_name, raw_value in headers:
        name = raw_name.lower()
        value = REDACTED if name in secret else raw_value
        previous = out.get(name)
        if previous is None:
            out[name] = value
        elif isinstance(previous, list):
            previous.append(value)
        else:
            out[name] = [previous, value]
    return out


def redact_query(query: str) -> str:
    """The raw query string (no `?`) with the values of secret parameters replaced by
    `[redacted]`; everything else, separators and percent-encoding included, as it came."""
    parameters = query.split("&")
    for index, parameter in enumerate(parameters):
        name, has_value, _ = parameter.partition("=")
        if has_value and unquote_plus(name).lower() in SECRET_QUERY_PARAMETERS:
            parameters[index] = f"{name}={REDACTED}"
    return "&".join(parameters)


def redacted_parameters(query: str) -> tuple[str, ...]:
    """The (decoded) names of the parameters `redact_query` redacted in `query`, in order."""
    names = []
    for parameter in query.split("&"):
        name, has_value, value = parameter.partition("=")
        if has_value and value == REDACTED:
            names.append(unquote_plus(name))
    return tuple(dict.fromkeys(names))


class BodyMasker:
    """Replaces every match of the configured regular expressions in a body by `[masked]`.

    Patterns are applied one after the other to the whole body, so mask complete bodies,
    not stream chunks: a match split across two chunks would be missed. A pattern that
    matches the empty string is refused, since it would splice the marker between every
    byte.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self._patterns = tuple(re.compile(pattern.encode()) for pattern in patterns)
        for compiled in self._patterns:
            if compiled.search(b"") is not None:
                raise ValueError(f"mask pattern {compiled.pattern!r} matches the empty string")

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def mask(self, body: bytes) -> bytes:
        """The body with every match masked; the very same object when nothing is configured."""
        for compiled in self._patterns:
            body = compiled.sub(MASKED, body)
        return body
