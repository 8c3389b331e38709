"""`transcribe` reads a stream a piece at a time: what it keeps is bounded by the answer, not by
how many events carried it."""

from __future__ import annotations

import tracemalloc

from calltap.dialects import transcribe
from calltap.transcript import Capture

EVENT = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{}}]}\n\n'
FINAL = (
    b'data: {"id":"c","object":"chat.completion.chunk",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


def test_a_stream_of_many_events_is_reduced_without_keeping_them() -> None:
    events = 200_000
    body = EVENT * events + FINAL
    tracemalloc.start()
    try:
        transcript = transcribe(Capture(body))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert transcript.events == events + 2
    assert transcript.terminal_seen
    assert transcript.choices[0].finish_reason == "stop"
    assert transcript.findings == []
    # Kept all at once, the events alone would take well over 100 bytes each.
    assert peak < events * 20


def test_events_after_done_are_counted_and_the_end_is_at_done() -> None:
    body = FINAL + EVENT * 3
    transcript = transcribe(Capture(body))
    assert transcript.events == 5
    assert transcript.end_position is not None
    assert transcript.end_position.event == 1
