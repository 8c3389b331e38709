"""From one recorded body to a Transcript: decode, frame, detect the dialect, reduce.

`transcribe(capture)` undoes the Content-Encoding (`content.decode_content`), tells the body's
framing (`framing.sniff_framing`: JSON, NDJSON, AWS event stream or SSE), detects the dialect from
the content among the dialects of that framing (any dialect for a JSON body), falls back to the
request path when the content says nothing (an empty stream, a stream of errors, a JSON error
body), and hands the frames or the JSON value to that dialect's reducer. An SSE body of nothing
but one-line `data:` blocks (`sse.Blocks`) goes, without its frames, to the dialect's reader of
blocks when it has one (`BLOCK_READERS`): the same transcript for a fraction of the cost. A JSON
body that is neither a known dialect's nor an error, or bytes that hold no frame and no frame
boundary, are unknown whatever the path: an answer in another dialect (an HTML page) must not
read as one without choices.

It never raises on a body: an encoding it cannot undo, a body that is neither JSON nor a stream of
a known dialect, gives a transcript of dialect "unknown" with a JSON_INVALID warning, so the
verdict becomes inconclusive rather than wrong.

`Transcript.bytes` is the length of the body as recorded (still encoded); byte offsets in positions
count in the decoded body, where the frames are.

When content and path disagree, the content wins: it is what the client had to parse. A capture
whose `dialect` is set (`calltap compare --upstream-dialect`, `calltap check --dialect`) skips
detection: the body is read as that dialect, a JSON body whole and anything else in the dialect's
own framing.

A dialect is a module that satisfies `base.Dialect`, so a new one is a new module added to
DIALECTS. Its reducers end with `common.finish(transcript)`, the side rules every dialect shares;
both come from one subclass of `common.Reducer` (of `single_choice.SingleChoiceReducer` for a
dialect whose answer is one choice). The request side (`conversation`, `usage_requested`) is
reached through `request_conversation` and `usage_requested` here, by the request path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import chain, islice
from typing import Any

from calltap.codes import Code
from calltap.dialects import (
    anthropic,
    bedrock,
    bedrock_anthropic,
    gemini,
    ollama,
    openai_chat,
    openai_responses,
)
from calltap.dialects.base import Conversation, Dialect, Framing
from calltap.dialects.common import error_expected, invalid_payload, issue_findings
from calltap.dialects.content import EncodingError, decode_content
from calltap.dialects.framing import STREAM_FRAMINGS, Frames, reader, sniff_framing
from calltap.jsonvalues import JsonInvalid, load_envelope
from calltap.sse import Blocks
from calltap.transcript import Capture, Finding, Position, Transcript

DIALECTS: tuple[Dialect, ...] = (
    openai_chat,
    anthropic,
    openai_responses,
    ollama,
    bedrock,
    bedrock_anthropic,
    gemini,
)
NAMES: tuple[str, ...] = tuple(dict.fromkeys(dialect.NAME for dialect in DIALECTS))
"""Every dialect's NAME, the values a capture's `dialect` may force. One dialect may be read in
two framings (Anthropic Messages as SSE, and on Bedrock as an event stream): two modules, one
NAME; the framing of a body tells which reads it."""
COMPARED_PATHS: tuple[str, ...] = tuple(path for dialect in DIALECTS for path in dialect.PATHS)
"""Request-path suffixes of every dialect's endpoints: the proxy pairs and compares these."""
UNKNOWN = "unknown"
REPORTED_FRAMINGS: dict[str, str] = {"jsonarray": "json"}
"""A framing as reports name it: Gemini's array of chunks is JSON."""
SNIFF_EVENTS = 8
"""How many frames detection reads before it gives up on the content and asks the path."""
DEFAULT_REQUEST_DIALECT: Dialect = openai_chat
"""Whose request reading a path no dialect names gets: a chat-like `messages` list anywhere."""
BLOCK_READERS: dict[Dialect, Callable[..., Transcript]] = {openai_chat: openai_chat.reduce_blocks}
"""The dialects that read a body of plain `data:` blocks (`sse.Blocks`) without its events."""


def transcribe(capture: Capture) -> Transcript:
    """Everything one recorded body says, reduced to meaning by its dialect."""
    try:
        body = decode_content(capture.body, capture.content_encoding)
    except EncodingError as error:
        transcript = _unknown(str(error), streaming=False)
    else:
        forced = _forced(capture, body)
        framing = _framing(body, capture, forced)
        if framing == "json":
            transcript = _transcribe_json(body, capture, forced)
        else:
            transcript = _transcribe_stream(body, capture, forced, framing)
        transcript.framing = REPORTED_FRAMINGS.get(framing, framing)
    transcript.bytes = len(capture.body)
    if capture.truncated:
        transcript.findings.append(
            Finding(Code.CAPTURE_TRUNCATED, position=Position(None, len(capture.body)))
        )
    return transcript


def _framing(body: bytes, capture: Capture, forced: Dialect | None) -> Framing:
    """The sniffed framing; an empty body is in the framing of the dialect forced or named by
    the path (so that it ends without its terminal marker). A forced dialect reads a non-JSON
    body in its own framing, and lines of JSON whole (as one JSON body) unless it is a dialect
    of lines; a JSON array element by element if it is a dialect of events, else whole."""
    framing = sniff_framing(body, capture.content_type)
    named = forced or dialect_of_path(capture.path)
    if named is not None and (not body or body.isspace()) and named.FRAMING != "json":
        return named.FRAMING
    if forced is None or reader(framing) in ("json", forced.FRAMING):
        return framing
    if framing in ("ndjson", "jsonarray"):
        return "json"
    return "sse" if forced.FRAMING == "json" else forced.FRAMING


def _transcribe_json(body: bytes, capture: Capture, forced: Dialect | None) -> Transcript:
    try:
        text = body.decode("utf-8-sig")
        payload, issues = load_envelope(text)
    except (UnicodeDecodeError, JsonInvalid) as error:
        return _unknown(f"body is not JSON: {error}", streaming=False)
    error_body = payload.__class__ is dict and "error" in payload
    path = capture.path if error_body or error_expected(capture.status) else None
    dialect = forced or _detect((payload,), path, DIALECTS)
    if dialect is None:
        return _unknown("body is not a known dialect's JSON", streaming=False)
    transcript = dialect.reduce_json(payload, status=capture.status)
    transcript.findings[:0] = issue_findings(issues, Position(None, 0))
    return transcript


def _transcribe_stream(
    body: bytes, capture: Capture, forced: Dialect | None, framing: Framing
) -> Transcript:
    frames = STREAM_FRAMINGS[framing](body)
    blocks = frames.blocks()
    if blocks is not None:
        transcript = _transcribe_blocks(blocks, capture, forced, frames)
        if transcript is not None:
            return transcript
    events = iter(frames)
    sample = list(islice(events, SNIFF_EVENTS))
    path = capture.path if sample or frames.cut() is None else None
    candidates = tuple(dialect for dialect in DIALECTS if reader(framing) == dialect.FRAMING)
    payloads = (frames.payload(frame) for frame in sample)
    dialect = forced or _detect(payloads, path, candidates)
    if dialect is None:
        transcript = _unknown(
            "body is neither JSON nor a stream of a known dialect", streaming=True
        )
        transcript.events = len(sample) + sum(1 for _ in events)
    else:
        transcript = dialect.reduce_events(chain(sample, events), status=capture.status)
    ending = frames.end()
    if ending is not None:
        transcript.findings.append(ending)
    return transcript


def _transcribe_blocks(
    blocks: Blocks, capture: Capture, forced: Dialect | None, frames: Frames
) -> Transcript | None:
    """A body of plain blocks read by its dialect's BLOCK_READERS entry, detected from the same
    events as `_transcribe_stream` reads; None when its dialect has none (the body then goes
    the general way). Such a body ends at a block boundary: there is no ending to report."""
    events = (window.event(index) for window in blocks.windows()
              for index in range(len(window.data)))
    payloads = (frames.payload(event) for event in islice(events, SNIFF_EVENTS))
    candidates = tuple(dialect for dialect in DIALECTS if dialect.FRAMING == "sse")
    dialect = forced or _detect(payloads, capture.path, candidates)
    read = BLOCK_READERS.get(dialect) if dialect is not None else None
    return None if read is None else read(blocks, status=capture.status)


def dialect_named(name: str) -> Dialect:
    """The dialect whose NAME this is; ValueError for any other name."""
    for dialect in DIALECTS:
        if name == dialect.NAME:
            return dialect
    raise ValueError(f"unknown dialect {name!r} (known: {', '.join(NAMES)})")


def dialect_of_path(path: str | None) -> Dialect | None:
    """The dialect whose endpoint the request path (query string ignored) ends with."""
    if not path:
        return None
    route = path.split("?", 1)[0].rstrip("/")
    for dialect in DIALECTS:
        if route.endswith(dialect.PATHS):
            return dialect
    return None


def request_conversation(request: dict[str, Any], path: str) -> Conversation | None:
    """A decoded request's conversation, read by the dialect its path names (Chat Completions'
    reading for a path no dialect names)."""
    return (dialect_of_path(path) or DEFAULT_REQUEST_DIALECT).conversation(request)


def usage_requested(dialect: str, request: bytes) -> bool:
    """Whether the client's request, answered in `dialect`, asked for usage; an unknown dialect
    counts as asking."""
    try:
        return dialect_named(dialect).usage_requested(request)
    except ValueError:
        return True


def _forced(capture: Capture, body: bytes) -> Dialect | None:
    """The dialect a capture forces: of the modules with that NAME, the one that reads the
    body's framing (else the first)."""
    if capture.dialect is None:
        return None
    named = dialect_named(capture.dialect)
    framing = reader(sniff_framing(body, capture.content_type))
    for dialect in DIALECTS:
        if dialect.NAME == named.NAME and framing == dialect.FRAMING:
            return dialect
    return named


def _detect(
    payloads: Iterable[Any], path: str | None, candidates: Sequence[Dialect]
) -> Dialect | None:
    """The dialect the content names; the one the path names when the content names none."""
    for payload in payloads:
        for dialect in candidates:
            if dialect.sniff(payload):
                return dialect
    dialect = dialect_of_path(path)
    return dialect if dialect in candidates else None


def _unknown(reason: str, *, streaming: bool) -> Transcript:
    transcript = Transcript(dialect=UNKNOWN, streaming=streaming)
    transcript.findings.append(invalid_payload(reason, Position(None, 0)))
    return transcript
