"""The comparison worker's job: identical legs are transcribed once and reported exactly as two
transcriptions would be; pair.json is completed and written by the worker; workers run at the
configured lower CPU priority."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from tests.proxy.conftest import chat_request, chat_stream, post_chat
from tests.proxy.test_failopen import forkserver_workers
from tests.support.properties import examples

from calltap.compare import compare_captures
from calltap.proxy.analysis import Job, Workers, _frame, _read, _unframe, analyze
from calltap.report import comparison_json
from calltap.transcript import Capture

CHAT = "/v1/chat/completions"


def leg(name: str, ended: str = "complete") -> dict[str, Any]:
    return {"file": name, "bytes": None, "sha256": None, "status": 200, "ended": ended}


def job(directory: Path, upstream: bytes, downstream: bytes, *,
        encoding: str | None = None, downstream_ended: str = "complete",
        relayed: int | None = None) -> Job:
    """A comparison job; the downstream leg ended as `downstream_ended` after relaying
    `relayed` bytes (all it recorded by default)."""
    (directory / "upstream.sse").write_bytes(upstream)
    (directory / "downstream.sse").write_bytes(downstream)
    spec = {"request_file": None, "path": CHAT, "content_encoding": encoding, "status": 200,
            "truncated": False}
    return {
        "directory": str(directory),
        "files": ["upstream.sse", "downstream.sse"],
        "mask_patterns": [],
        "upstream": {"file": "upstream.sse", **spec, "ended": "complete",
                     "bytes_relayed": len(upstream)},
        "downstream": {"file": "downstream.sse", **spec, "ended": downstream_ended,
                       "bytes_relayed": len(downstream) if relayed is None else relayed},
        "mode": "compare",
        "document": {"request_id": "r",
                     "legs": {"downstream": leg("downstream.sse", downstream_ended),
                              "upstream": leg("upstream.sse")},
                     "comparison": None},
        "closed_at": time.time(),
    }


def two_transcriptions(upstream: bytes, downstream: bytes) -> dict[str, Any]:
    return comparison_json(compare_captures(Capture(upstream, CHAT, None, 200),
                                            Capture(downstream, CHAT, None, 200)))


bodies = st.builds(
    chat_stream,
    text=st.text(st.sampled_from("ab é{}\"\\"), min_size=1, max_size=30),
    tool_calls=st.integers(0, 3),
) | st.binary(max_size=300) | st.builds(
    lambda body, cut: body[:cut], st.builds(chat_stream), st.integers(0, 2000))


@examples(40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_identical_legs_report_as_two_transcriptions_would(tmp_path: Path, body: bytes) -> None:
    directory = tmp_path / hashlib.sha256(body).hexdigest()[:16]
    directory.mkdir(exist_ok=True)
    result = analyze(job(directory, body, body))
    assert result["report"] == two_transcriptions(body, body)


def test_different_legs_are_both_transcribed(tmp_path: Path) -> None:
    upstream = chat_stream("one two", tool_calls=2)
    downstream = chat_stream("one two", tool_calls=1)
    result = analyze(job(tmp_path, upstream, downstream))
    assert result["report"] == two_transcriptions(upstream, downstream)
    assert result["report"]["verdict"] == "diverged"


def test_worker_completes_and_writes_pair_json(tmp_path: Path) -> None:
    body = chat_stream()
    result = analyze(job(tmp_path, body, body))
    written = tmp_path / "pair.json"
    document = orjson.loads(written.read_bytes())
    assert written.stat().st_mode & 0o777 == 0o600
    assert result["pair_json_error"] is None
    assert result["pair_json_bytes"] == written.stat().st_size
    assert document["comparison"] == result["report"]
    for side in ("upstream", "downstream"):
        assert document["legs"][side]["sha256"] == hashlib.sha256(body).hexdigest()
        assert document["legs"][side]["bytes"] == len(body)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_unwritable_pair_json_is_reported_not_raised(tmp_path: Path) -> None:
    body = chat_stream()
    work = job(tmp_path, body, body)
    (tmp_path / "pair.json").mkdir()
    result = analyze(work)
    assert result["pair_json_error"] is not None
    assert result["pair_json_error"]["errno"] is not None
    assert result["report"]["verdict"] == "equal"


def test_same_length_bodies_are_measured_apart(tmp_path: Path) -> None:
    upstream = chat_stream("one two", tool_calls=0)
    downstream = upstream.replace(b"one", b"uno")
    assert len(upstream) == len(downstream) and upstream != downstream
    result = analyze(job(tmp_path, upstream, downstream))
    assert result["files"]["upstream.sse"]["sha256"] == hashlib.sha256(upstream).hexdigest()
    assert result["files"]["downstream.sse"]["sha256"] == hashlib.sha256(downstream).hexdigest()
    assert result["report"] == two_transcriptions(upstream, downstream)


def test_masked_body_is_rewritten_and_measured_masked(tmp_path: Path) -> None:
    body = chat_stream("card 4111-1111 ok")
    work = job(tmp_path, body, body)
    work["mask_patterns"] = [r"\d{4}-\d{4}"]
    result = analyze(work)
    recorded = (tmp_path / "upstream.sse").read_bytes()
    assert b"4111-1111" not in recorded and b"[masked]" in recorded
    assert (tmp_path / "upstream.sse").stat().st_mode & 0o777 == 0o600
    assert result["files"]["upstream.sse"] == {"bytes": len(recorded),
                                                "sha256": hashlib.sha256(recorded).hexdigest()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["downstream.sse", "pair.json",
                                                          "upstream.sse"]


def test_a_file_is_read_to_its_end_past_its_reported_size() -> None:
    whole = Path("/proc/self/cmdline").read_bytes()
    assert Path("/proc/self/cmdline").stat().st_size == 0 < len(whole)
    assert _read("/proc/self/cmdline") == whole


def niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


async def test_workers_run_at_the_configured_niceness(provider, make_tap, client) -> None:
    script, provider_url = provider
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url, compare_niceness=7,
                         compare_when_idle=False)
    async with client.post(tap.back_url + CHAT, data=b"{}",
                           headers={"X-Request-ID": "nice-1"}) as response:
        assert await response.read() == script.body
    assert (await tap.wait_compared("nice-1"))["check"]["verdict"] == "clean"
    workers = forkserver_workers()
    assert workers
    expected = min(19, os.getpriority(os.PRIO_PROCESS, 0) + 7)
    assert {niceness(pid) for pid in workers} == {expected}
    assert {os.sched_getscheduler(pid) for pid in workers} == {os.SCHED_OTHER}


async def test_workers_run_only_on_idle_cpu_by_default(provider, make_tap, client) -> None:
    """Under SCHED_IDLE a saturated machine's CPU goes to the relay; the comparisons wait."""
    script, provider_url = provider
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url)
    async with client.post(tap.back_url + CHAT, data=b"{}",
                           headers={"X-Request-ID": "idle-1"}) as response:
        assert await response.read() == script.body
    pair = await tap.wait_compared("idle-1")
    assert pair["check"]["verdict"] == "clean"
    assert 0 <= pair["compared_after"] < 10
    workers = forkserver_workers()
    assert workers
    assert {os.sched_getscheduler(pid) for pid in workers} == {os.SCHED_IDLE}


async def test_request_body_goes_straight_to_its_final_name(topology, client) -> None:
    tap = topology["tap"]
    _, headers, _ = await post_chat(client, tap.front_url)
    pair = await tap.wait_compared(headers["X-Request-ID"])
    directory = next(tap.recordings.glob(f"*/{headers['X-Request-ID']}"))
    names = sorted(p.name for p in directory.iterdir())
    assert names == sorted([pair["legs"]["downstream"]["request_file"],
                            pair["legs"]["upstream"]["request_file"],
                            pair["legs"]["downstream"]["file"],
                            pair["legs"]["upstream"]["file"], "pair.json"])
    assert (directory / "downstream.request").read_bytes() == chat_request()


@given(st.lists(st.binary(max_size=300), max_size=8), st.data())
def test_framed_messages_come_out_whole_and_in_order_for_any_split(
    messages: list[bytes], data: st.DataObject
) -> None:
    stream = b"".join(_frame(message) for message in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    received = bytearray()
    out: list[bytes] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        received += stream[start:end]
        while (message := _unframe(received)) is not None:
            out.append(message)
    assert out == messages
    assert not received


def test_the_long_length_form_is_read() -> None:
    received = bytearray(b"\xff\xff\xff\xff" + (5).to_bytes(8, "big") + b"hello!")
    assert _unframe(received) == b"hello"
    assert received == bytearray(b"!")


async def test_an_answer_larger_than_the_socket_buffer_arrives_whole(tmp_path: Path) -> None:
    names = [f"{n:04d}-" + "x" * 200 for n in range(3000)]
    for name in names:
        (tmp_path / name).write_bytes(name.encode())
    workers = Workers(1)
    await asyncio.to_thread(workers.warm)
    try:
        result = await workers.analyze({
            "directory": str(tmp_path), "files": names, "mask_patterns": [], "upstream": None,
            "downstream": None, "mode": "record", "document": {"legs": {}},
            "closed_at": time.time(),
        })
    finally:
        await workers.stop()
    assert len(orjson.dumps(result)) > 800_000
    assert result["files"] == {
        name: {"bytes": len(name), "sha256": hashlib.sha256(name.encode()).hexdigest()}
        for name in names
    }
