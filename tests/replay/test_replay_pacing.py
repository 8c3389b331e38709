"""The cassette provider's pace: the recorded gaps between events kept, or none at all."""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path

import aiohttp
import pytest
from tests.e2e.conftest import open_topology

from calltap.fakes.provider import TEXT_REQUEST
from calltap.replay.cassette import Answer, Timing, load
from calltap.replay.pacing import schedule, split
from calltap.replay.provider import CassetteProvider

EVENTS_DELAY = 0.06
TOLERANCE = 0.025
"""Seconds a replayed gap may stray from the recorded one on a loaded 2-core machine."""


PACE = Timing(first_byte=0.1, rest=0.3)


def answer(body: bytes, content_type: str, content_encoding: str | None = None) -> Answer:
    return Answer(1, "POST", "/v1/chat/completions", None, 200,
                  (("content-type", content_type),), body, PACE, "complete", content_encoding)


def test_a_stream_is_cut_where_its_events_start_and_spread_over_the_recorded_time():
    body = b": keep-alive\n\ndata: 1\n\n: ping\ndata: 2\n\ndata: [DONE]\n\n"
    sent = schedule(answer(body, "text/event-stream"), "recorded")
    assert [piece for _, piece in sent] == [b": keep-alive\n\n", b"data: 1\n\n",
                                            b": ping\ndata: 2\n\n", b"data: [DONE]\n\n"]
    assert [at for at, _ in sent] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert [at for at, _ in schedule(answer(body, "text/event-stream"), "none")] == [0] * 4


def test_ndjson_lines_and_a_cut_tail_are_pieces_of_their_own():
    body = b'{"a":1}\n{"b":2}\n{"c":'
    assert split(answer(body, "application/x-ndjson")) == [b'{"a":1}\n', b'{"b":2}\n', b'{"c":']


def test_a_whole_json_body_and_an_encoded_stream_are_one_piece_sent_at_the_first_byte():
    whole = answer(b'{"choices": []}', "application/json")
    assert schedule(whole, "recorded") == [(0.1, b'{"choices": []}')]
    encoded = answer(b"\x1f\x8b...", "text/event-stream", content_encoding="gzip")
    assert split(encoded) == [b"\x1f\x8b..."]
    assert schedule(answer(b"", "application/json"), "recorded") == []


async def timed_events(url: str) -> list[float]:
    """When each SSE event of the answer to a text request arrived, in seconds since sent."""
    arrivals: list[float] = []
    async with aiohttp.ClientSession() as session:
        started = time.monotonic()
        async with session.post(f"{url}/v1/chat/completions", json=TEXT_REQUEST) as response:
            buffered = b""
            async for chunk in response.content.iter_any():
                buffered += chunk
                while b"\n\n" in buffered:
                    _, buffered = buffered.split(b"\n\n", 1)
                    arrivals.append(time.monotonic() - started)
    return arrivals


@pytest.fixture
async def paced_pair(tmp_path: Path) -> Path:
    """A text answer recorded from a provider that waits EVENTS_DELAY between events."""
    async with open_topology(tmp_path / "recordings", events_delay=EVENTS_DELAY) as topology:
        sent = await topology.send(TEXT_REQUEST)
    return sent.directory


async def test_recorded_pace_keeps_the_gaps_between_events(paced_pair: Path):
    recorded = load(paced_pair)
    async with CassetteProvider("recorded") as cassette:
        cassette.play(recorded.cassette)
        arrivals = await timed_events(cassette.url)
    gaps = [later - earlier for earlier, later in pairwise(arrivals)]
    assert len(arrivals) == len(split(recorded.cassette[0])) > 5
    assert all(abs(gap - EVENTS_DELAY) < TOLERANCE for gap in gaps), gaps
    timing = recorded.cassette[0].timing
    assert arrivals[-1] - arrivals[0] == pytest.approx(timing.rest, abs=TOLERANCE)


async def test_no_pace_sends_everything_at_once(paced_pair: Path):
    async with CassetteProvider("none") as cassette:
        cassette.play(load(paced_pair).cassette)
        arrivals = await timed_events(cassette.url)
    assert arrivals[-1] < EVENTS_DELAY
