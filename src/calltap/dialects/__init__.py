"""From one recorded body to a Transcript: decode, parse, detect the dialect, reduce.

`transcribe(capture)` undoes the Content-Encoding (gzip, deflate, identity; a list is undone right
to left), reads a body that starts with `{` (after whitespace or a BOM) as JSON and anything else
as an event stream, detects the dialect from the content, falls back to the request path when the
content says nothing (an empty stream, a stream of errors, a JSON error body), and hands the
events or the JSON value to that dialect's reducer. A JSON body that is neither a known dialect's
nor an error, or bytes that hold no event and no event boundary, are unknown whatever the path:
an answer in another dialect (one Ollama line, an HTML page) must not read as one without choices.

It never raises on a body: an encoding it cannot undo, a body that is neither JSON nor a stream of
a known dialect, gives a transcript of dialect "unknown" with a JSON_INVALID warning, so the
verdict becomes inconclusive rather than wrong.

`Transcript.bytes` is the length of the body as recorded (still encoded); byte offsets in positions
count in the decoded body, where the events are.

When content and path disagree, the content wins: it is what the client had to parse. A capture
whose `dialect` is set (`calltap compare --upstream-dialect`, `calltap check --dialect`) skips
detection: the body is read as that dialect, whatever it looks like.

A dialect is a module with the five names below, so a new one is a new module added to DIALECTS.
Its reducers end with `common.finish(transcript)`, the side rules every dialect shares; both come
from one subclass of `common.Reducer` (of `single_choice.SingleChoiceReducer` for a dialect whose
payloads name their type and whose answer is one choice).
  NAME: str                                    the transcript's `dialect` ("openai.chat")
  PATHS: tuple[str, ...]                       request-path suffixes that confirm it
  sniff(payload) -> bool                       does this decoded payload (or body) belong to it
  reduce_events(events, *, status) -> Transcript      a parsed event stream
  reduce_json(payload, *, status) -> Transcript       a decoded JSON body
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Sequence
from itertools import chain, islice
from types import ModuleType
from typing import Any

from calltap import sse
from calltap.codes import Code
from calltap.dialects import anthropic, openai_chat, openai_responses
from calltap.dialects.common import invalid_payload, issue_findings
from calltap.jsonvalues import JsonInvalid, load_envelope
from calltap.transcript import Capture, Finding, Position, Transcript

DIALECTS: tuple[ModuleType, ...] = (openai_chat, anthropic, openai_responses)
NAMES: tuple[str, ...] = tuple(dialect.NAME for dialect in DIALECTS)
"""Every dialect's NAME, the values a capture's `dialect` may force."""
COMPARED_PATHS: tuple[str, ...] = tuple(path for dialect in DIALECTS for path in dialect.PATHS)
"""Request-path suffixes of every dialect's endpoints: the proxy pairs and compares these."""
UNKNOWN = "unknown"
JSON_START = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*\{")
"""A JSON body: an optional BOM, optional whitespace, then an object."""
SNIFF_EVENTS = 8
"""How many events detection reads before it gives up on the content and asks the path."""
FEED_PIECE = 64 * 1024
"""Bytes handed to the SSE parser at a time."""


class EncodingError(ValueError):
    """A Content-Encoding this module cannot undo."""


def transcribe(capture: Capture) -> Transcript:
    """Everything one recorded body says, reduced to meaning by its dialect."""
    try:
        body = decode_content(capture.body, capture.content_encoding)
    except EncodingError as error:
        transcript = _unknown(str(error), streaming=False)
    else:
        if _looks_like_json(body):
            transcript = _transcribe_json(body, capture)
        else:
            transcript = _transcribe_stream(body, capture)
    transcript.bytes = len(capture.body)
    if capture.truncated:
        transcript.findings.append(
            Finding(Code.CAPTURE_TRUNCATED, position=Position(None, len(capture.body)))
        )
    return transcript


def decode_content(body: bytes, content_encoding: str | None) -> bytes:
    """Undo a Content-Encoding header value; a cut gzip/deflate body yields what it holds."""
    if not content_encoding:
        return body
    codings = [coding.strip().lower() for coding in content_encoding.split(",")]
    for coding in reversed(codings):
        if coding in ("", "identity"):
            continue
        if coding in ("gzip", "x-gzip"):
            body = _inflate(body, 16 + zlib.MAX_WBITS, coding)
        elif coding == "deflate":
            zlib_wrapped = (
                len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
            )
            body = _inflate(body, zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS, coding)
        else:
            raise EncodingError(f"cannot decode Content-Encoding {coding!r}")
    return body


def _inflate(body: bytes, wbits: int, coding: str) -> bytes:
    try:
        return zlib.decompressobj(wbits).decompress(body)
    except zlib.error as error:
        raise EncodingError(f"cannot decode Content-Encoding {coding!r}: {error}") from error


def _looks_like_json(body: bytes) -> bool:
    return JSON_START.match(body) is not None


def _transcribe_json(body: bytes, capture: Capture) -> Transcript:
    try:
        text = body.decode("utf-8-sig")
        payload, issues = load_envelope(text)
    except (UnicodeDecodeError, JsonInvalid) as error:
        return _unknown(f"body is not JSON: {error}", streaming=False)
    path = capture.path if payload.__class__ is dict and "error" in payload else None
    dialect = _forced(capture) or _detect((payload,), path)
    if dialect is None:
        return _unknown("body is not a known dialect's JSON", streaming=False)
    transcript = dialect.reduce_json(payload, status=capture.status)
    transcript.findings[:0] = issue_findings(issues, Position(None, 0))
    return transcript


def _transcribe_stream(body: bytes, capture: Capture) -> Transcript:
    parser = sse.SSEParser()
    events = _feed(parser, body)
    sample = list(islice(events, SNIFF_EVENTS))
    path = capture.path if sample or parser.close() is None else None
    dialect = _forced(capture) or _detect(_sample_payloads(sample), path)
    if dialect is None:
        transcript = _unknown(
            "body is neither JSON nor a stream of a known dialect", streaming=True
        )
        transcript.events = len(sample) + sum(1 for _ in events)
    else:
        transcript = dialect.reduce_events(chain(sample, events), status=capture.status)
    incomplete = parser.close()
    if incomplete is not None:
        transcript.findings.append(
            Finding(
                Code.SSE_INCOMPLETE_EVENT,
                position=Position(None, incomplete.offset),
                detail=f"{incomplete.length} bytes after the last event boundary",
            )
        )
    return transcript


def _feed(parser: sse.SSEParser, body: bytes) -> Iterator[sse.Event]:
    """The body's events, parsed a piece at a time: only one piece's events are alive at once,
    so a huge capture costs memory for its largest event, not for all of them."""
    for start in range(0, len(body), FEED_PIECE):
        yield from parser.feed(body[start : start + FEED_PIECE])


def _sample_payloads(events: Sequence[sse.Event]) -> list[Any]:
    payloads: list[Any] = []
    for event in events:
        try:
            payloads.append(load_envelope(event.data)[0])
        except JsonInvalid:
            continue
    return payloads


def dialect_named(name: str) -> ModuleType:
    """The dialect module whose NAME this is; ValueError for any other name."""
    for dialect in DIALECTS:
        if name == dialect.NAME:
            return dialect
    raise ValueError(f"unknown dialect {name!r} (known: {', '.join(NAMES)})")


def _forced(capture: Capture) -> ModuleType | None:
    return dialect_named(capture.dialect) if capture.dialect is not None else None


def _detect(payloads: Sequence[Any], path: str | None) -> ModuleType | None:
    """The dialect the content names; the one the path names when the content names none."""
    for payload in payloads:
        for dialect in DIALECTS:
            if dialect.sniff(payload):
                return dialect
    if path:
        route = path.split("?", 1)[0].rstrip("/")
        for dialect in DIALECTS:
            if route.endswith(dialect.PATHS):
                return dialect
    return None


def _unknown(reason: str, *, streaming: bool) -> Transcript:
    transcript = Transcript(dialect=UNKNOWN, streaming=streaming)
    transcript.findings.append(invalid_payload(reason, Position(None, 0)))
    return transcript
