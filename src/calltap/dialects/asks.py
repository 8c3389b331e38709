"""From one recorded request body to an `Ask`: decode, pick the dialect, read.

The straight path a request body takes (a response body's is `transcribe`): a request is one JSON
object, never framed and never content-encoded by the clients and gateways calltap sits between,
so it is decoded once and handed to the request side (`REQUEST`) of the dialect its path names
(`dialect_of_path`), or, for a path no dialect names, of the dialect its shape names
(`contents`: Gemini; `input`: Responses; else Chat Completions, the shape most gateways take).

It never raises on a body: one that is not JSON, not an object, larger than MAX_REQUEST_BYTES,
nested past what a decoder follows, or not a request of its dialect, gives an Ask that is not
`readable`, with a REQUEST_UNREADABLE warning saying why.
"""

from __future__ import annotations

from typing import Any

import orjson

from calltap.ask import Ask
from calltap.codes import Code
from calltap.dialects import DIALECTS, dialect_named, dialect_of_path
from calltap.dialects.base import RequestSide
from calltap.dialects.request_common import RequestUnreadable
from calltap.transcript import Finding

MAX_REQUEST_BYTES = 64 * 1024 * 1024
"""A request larger than this is not read: the comparison of requests stays bounded."""
UNKNOWN = "unknown"


def read_ask(body: bytes, path: str | None, dialect: str | None = None) -> Ask:
    """What a request body asks, read as `dialect` (a NAME) or by its path and shape."""
    if len(body) > MAX_REQUEST_BYTES:
        return unreadable(dialect or UNKNOWN, f"body of {len(body)} bytes is over the limit")
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        return unreadable(dialect or UNKNOWN, f"body is not JSON: {error}")
    if not isinstance(request, dict):
        return unreadable(dialect or UNKNOWN, "body is not a JSON object")
    side = request_side(request, path, dialect)
    try:
        return side.ask(request, path or "")
    except (RequestUnreadable, TypeError, ValueError, KeyError, AttributeError,
            RecursionError) as error:
        return unreadable(side.NAME, f"not a {side.NAME} request: {error}")


def request_side(request: dict[str, Any], path: str | None, dialect: str | None) -> RequestSide:
    """The request side that reads this body: the forced dialect's, else its path's, else its
    shape's."""
    if dialect is not None:
        return dialect_named(dialect).REQUEST
    named = dialect_of_path(path)
    if named is not None:
        return named.REQUEST
    if "contents" in request:
        return dialect_named("google.gemini").REQUEST
    if "input" in request and "messages" not in request:
        return dialect_named("openai.responses").REQUEST
    return DIALECTS[0].REQUEST


def unreadable(dialect: str, reason: str) -> Ask:
    return Ask(dialect=dialect, readable=False,
               findings=[Finding(Code.REQUEST_UNREADABLE, side="request", detail=reason)])
