"""Signals reaching a real `calltap serve` process mid-stream.

SIGTERM: it stops accepting, lets the streams in flight finish within the grace period, closes
and compares every capture, and exits 0. SIGKILL: the streams die with it; a body past the
hold bound (calltap keeps a small one in memory and writes it once at the leg's end) has
spilled to its `.partial`, which keeps what the disk had received (a prefix of the provider's
answer: a spilled body is written in 16 KiB pieces, so at most the last piece is lost), and a
restart on the same recordings directory reports them and leaves them as they are.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
from itertools import islice
from pathlib import Path

import aiohttp
import pytest
from tests.reliability.harness import chat_body, launch, stack, streaming_provider
from tests.support.provider import answer_events

from calltap.fakes.provider import CHAT_PATH
from calltap.proxy.capture import HOLD_BYTES

STREAMS = 5


async def open_stream(client: aiohttp.ClientSession, front: str, key: str,
                      events: int) -> aiohttp.ClientResponse:
    reply = await client.post(front + CHAT_PATH, data=chat_body(f"signal {key}", events),
                              headers={"X-Request-ID": key, "Content-Type": "application/json"})
    assert reply.status == 200
    return reply


def answer_prefix(key: str, events: int, size: int) -> bytes:
    marker = hashlib.sha256(f"signal {key}".encode()).hexdigest()[:16]
    return b"".join(islice(answer_events(marker, events), events + 3))[:size]


async def test_sigterm_mid_stream_lets_streams_finish_and_closes_captures(tmp_path: Path,
                                                                          tally) -> None:
    events = 100
    provider = streaming_provider(delay=0.01)
    async with stack(tmp_path, provider) as run:
        keys = [f"term-{n}" for n in range(STREAMS)]
        replies = [await open_stream(run.client, run.front, key, events) for key in keys]
        heads = [await reply.content.readuntil(b"\n\n") for reply in replies]
        run.calltap.signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            while not run.calltap.lines("serve.stopping"):
                await asyncio.sleep(0.02)
        async with aiohttp.ClientSession() as fresh:
            with pytest.raises(aiohttp.ClientConnectorError):
                await fresh.post(run.front + CHAT_PATH, data=chat_body("late", 3))
        bodies = [head + await reply.read() for head, reply in zip(heads, replies, strict=True)]
        code = await run.calltap.wait()
        (stopped,) = run.calltap.lines("serve.stopped")
        (stopping,) = run.calltap.lines("serve.stopping")
        pairs = {key: run.pair(key) for key in keys}
    assert code == 0
    assert stopping["in_flight"] == 2 * STREAMS
    assert stopped["cut"] == 0
    for key, body in zip(keys, bodies, strict=True):
        assert hashlib.sha256(body).hexdigest() == provider.sent[key].sha256
        assert pairs[key]["comparison"]["verdict"] == "equal"
        assert pairs[key]["legs"]["downstream"]["ended"] == "complete"
        assert pairs[key]["legs"]["upstream"]["sha256"] == provider.sent[key].sha256
    assert not list(run.calltap.recordings.rglob("*.partial"))
    tally.fault("SIGTERM mid-stream")
    tally.streams(STREAMS)


async def test_sigkill_mid_stream_leaves_partials_that_a_restart_reports_and_keeps(
    tmp_path: Path, tally
) -> None:
    events, enough = 20_000, HOLD_BYTES + 48 * 1024
    provider = streaming_provider(delay=0.002)
    async with stack(tmp_path, provider) as run:
        keys = [f"kill-{n}" for n in range(3)]
        replies = [await open_stream(run.client, run.front, key, events) for key in keys]
        received = [bytearray() for _ in keys]
        for reply, got in zip(replies, received, strict=True):
            while len(got) < enough:
                got += await reply.content.readany()
        run.calltap.process.kill()
        assert await run.calltap.wait() == -signal.SIGKILL
        for reply, got in zip(replies, received, strict=True):
            with pytest.raises(aiohttp.ClientPayloadError):
                async for chunk in reply.content.iter_any():
                    got += chunk
        recordings = run.calltap.recordings
        partials = sorted(str(path.relative_to(recordings))
                          for path in recordings.rglob("*.partial"))
        kept = {name: (recordings / name).read_bytes() for name in partials}

        restarted = await launch(tmp_path, recordings, gateway=run.gateway.url,
                                 provider=provider.url)
        try:
            run.gateway.upstream = restarted.urls["back"]
            (leftovers,) = restarted.lines("recording.leftovers")
            reply = await open_stream(run.client, restarted.urls["front"], "after-kill", 50)
            body = await reply.read()
            await restarted.wait_compared(run.client, 1)
            after = run.pair("after-kill")
        finally:
            restarted.end()
    expected = {f"{key}/{name}.partial" for key in keys
                for name in ("downstream.sse", "upstream.sse")}
    assert {name.split("/", 1)[1] for name in partials} == expected
    assert leftovers["count"] == len(partials) and leftovers["files"] == partials
    for name, content in kept.items():
        key = name.split("/")[1]
        assert (recordings / name).read_bytes() == content
        assert content == answer_prefix(key, events, len(content))
        assert len(content) >= 16 * 1024
    for key, got in zip(keys, received, strict=True):
        assert bytes(got) == answer_prefix(key, events, len(got))
    assert hashlib.sha256(body).hexdigest() == provider.sent["after-kill"].sha256
    assert after["comparison"]["verdict"] == "equal"
    tally.fault("SIGKILL mid-stream, restart on the same recordings")
