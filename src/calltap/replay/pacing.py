"""When each piece of a recorded answer is sent again.

pair.json keeps three instants per leg (request started, first byte, last byte), not one per
event, so the recorded pace is rebuilt from them and from the body's own frames: nothing is sent
before the recorded time to first byte, then the frames (SSE events, NDJSON lines, event-stream
messages, array elements) go out one per piece, evenly spaced so that the last one leaves at the
recorded end. A provider that streams tokens at a steady rate is replayed at that rate; one that
paused mid-stream is replayed with the pause spread over its events. A whole JSON body, or one
with a Content-Encoding, is one piece.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Literal

from calltap.dialects.framing import STREAM_FRAMINGS, sniff_framing
from calltap.replay.cassette import Answer

Pace = Literal["recorded", "none"]
PACES: tuple[Pace, ...] = ("recorded", "none")
Schedule = list[tuple[float, bytes]]
"""(seconds after the request arrived, bytes to send then), in order."""


def schedule(answer: Answer, pace: Pace) -> Schedule:
    """The answer's body cut at its frame boundaries, each piece with its send time."""
    pieces = split(answer)
    if pace == "none" or not pieces:
        return [(0.0, piece) for piece in pieces]
    first, rest = answer.timing.first_byte, answer.timing.rest
    gap = rest / (len(pieces) - 1) if len(pieces) > 1 else 0.0
    return [(first + number * gap, piece) for number, piece in enumerate(pieces)]


def split(answer: Answer) -> list[bytes]:
    """The body in pieces that end where its frames end: whatever precedes the first frame (a
    keep-alive comment) and an unfinished last frame are pieces of their own."""
    body = answer.body
    if not body:
        return []
    content_type = dict(answer.headers).get("content-type")
    framing = sniff_framing(body, content_type)
    if answer.content_encoding or framing not in STREAM_FRAMINGS:
        return [body]
    frames = STREAM_FRAMINGS[framing](body)
    starts = {frame.offset for frame in frames}
    if (cut := frames.cut()) is not None:
        starts.add(cut.offset)
    bounds = [0, *sorted(starts - {0}), len(body)]
    return [body[start:end] for start, end in pairwise(bounds) if end > start]
