"""How a leg ended is judged from what was relayed, not from the socket alone.

The official openai SDK closes its connection as soon as it reads `data: [DONE]`, often before
the gateway has ended its response; the relay then sees a client hang-up. A leg whose relayed
bytes carried the terminal marker ended complete (pair.json keeps the socket's word in
`relay_ended`), so its divergences are logged; only a leg cut before its marker stays cut.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import orjson
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from tests.proxy.conftest import chat_request, chat_stream, post_chat
from tests.proxy.test_analysis import job
from tests.support.properties import examples

from calltap.proxy.analysis import analyze

UPSTREAM = chat_stream(tool_calls=2)
DOWNSTREAM = chat_stream(tool_calls=1)
"""A gateway that dropped the second call, and ended its stream with [DONE] all the same."""
MARKER_END = len(DOWNSTREAM)
MARKER_START = DOWNSTREAM.rindex(b"data: [DONE]")


def judged(directory: Path, body: bytes, ended: str, relayed: int) -> dict:
    result = analyze(job(directory, UPSTREAM, body, downstream_ended=ended, relayed=relayed))
    document = orjson.loads((directory / "pair.json").read_bytes())
    assert result["report"] == document["comparison"]
    assert document["format"] == 1
    return document["legs"]["downstream"]


def test_a_hang_up_right_after_done_ended_a_complete_leg(tmp_path: Path) -> None:
    leg = judged(tmp_path, DOWNSTREAM, "client_aborted", MARKER_END)
    assert (leg["ended"], leg["relay_ended"]) == ("complete", "client_aborted")


def test_a_hang_up_before_done_stays_a_hang_up(tmp_path: Path) -> None:
    cut = DOWNSTREAM[:MARKER_START]
    leg = judged(tmp_path, cut, "client_aborted", len(cut))
    assert leg["ended"] == "client_aborted"
    assert "relay_ended" not in leg


def test_done_recorded_but_never_relayed_stays_a_hang_up(tmp_path: Path) -> None:
    """The chunk holding [DONE] was read from the gateway, recorded, and its write to the
    client failed: the client never got the marker."""
    leg = judged(tmp_path, DOWNSTREAM, "client_aborted", MARKER_START)
    assert leg["ended"] == "client_aborted"


def test_a_leg_the_relay_saw_complete_is_left_as_it_was(tmp_path: Path) -> None:
    leg = judged(tmp_path, DOWNSTREAM, "complete", MARKER_END)
    assert (leg["ended"], "relay_ended" in leg) == ("complete", False)


def test_an_upstream_reset_after_done_is_not_a_hang_up(tmp_path: Path) -> None:
    """Only the reader's hang-up (or calltap's shutdown) can be undone by the bytes: a reset or
    a timeout is how the sender ended, whatever it had sent."""
    leg = judged(tmp_path, DOWNSTREAM, "upstream_reset", MARKER_END)
    assert leg["ended"] == "upstream_reset"


@examples(40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_hang_up_at_any_byte_is_complete_exactly_when_the_marker_was_relayed(
    tmp_path_factory, data: st.DataObject
) -> None:
    recorded = data.draw(st.integers(MARKER_START, MARKER_END + 8), label="recorded")
    body = (DOWNSTREAM + b": trailing\n\n")[:recorded]
    relayed = data.draw(st.integers(0, len(body)), label="relayed")
    ended = data.draw(st.sampled_from(["client_aborted", "shutdown"]), label="ended")
    directory = tmp_path_factory.mktemp("judged")
    leg = judged(directory, body, ended, relayed)
    marker_relayed = relayed >= MARKER_END
    assert leg["ended"] == ("complete" if marker_relayed else ended)


# --- through the proxy ----------------------------------------------------------------------


async def read_through_done(response: aiohttp.ClientResponse) -> bytes:
    """Read as the openai SDK does: up to `data: [DONE]`, then stop listening."""
    received = b""
    while not received.endswith(b"data: [DONE]\n\n"):
        received += await response.content.readany()
    return received


def renumbered(body: bytes, offset: int = 1) -> bytes:
    """A chat stream with every tool-call index moved up by `offset`: the calls of a gateway that
    kept the provider's output index (TOOL_CALL_INDEX_GAP)."""
    events = []
    for block in body.split(b"\n\n"):
        if block.startswith(b"data: {"):
            payload = orjson.loads(block[6:])
            for choice in payload["choices"]:
                for call in choice["delta"].get("tool_calls", ()):
                    call["index"] += offset
            block = b"data: " + orjson.dumps(payload)
        events.append(block)
    return b"\n\n".join(events)


def held_open(body: bytes, provider) -> None:
    """The provider sends `body` whole, then keeps the response open (as a gateway that has not
    yet sent its chunked terminator): only the client's hang-up ends the stream."""
    provider.body = body + b": still open\n\n"
    provider.hold_after = len(body)
    provider.chunk_size = len(body)


async def test_a_client_that_hangs_up_after_done_gets_its_divergences_logged(
    topology: dict[str, Any], client: aiohttp.ClientSession, log
) -> None:
    tap, provider, gateway = topology["tap"], topology["provider"], topology["gateway"]
    held_open(chat_stream(tool_calls=1), provider)
    gateway.replace = (b'"finish_reason":"tool_calls"', b'"finish_reason":"stop"')
    response = await client.post(tap.front_url + "/v1/chat/completions", data=chat_request())
    key = response.headers["X-Request-ID"]
    await read_through_done(response)
    response.close()
    pair = await tap.wait_compared(key)
    downstream = pair["legs"]["downstream"]
    assert (downstream["ended"], downstream["relay_ended"]) == ("complete", "client_aborted")
    assert pair["comparison"]["verdict"] == "diverged"
    assert [line["code"] for line in log.lines("divergence")] == ["FINISH_REASON_CHANGED"]
    assert log.lines("pair.compared")[-1]["downstream_ended"] == "complete"
    assert log.lines("leg.aborted") == []


async def test_a_client_that_hangs_up_before_done_is_a_cut_leg_with_no_divergence(
    topology: dict[str, Any], client: aiohttp.ClientSession, log
) -> None:
    tap, provider, gateway = topology["tap"], topology["provider"], topology["gateway"]
    body = chat_stream(tool_calls=1)
    held_open(body, provider)
    provider.hold_after = provider.chunk_size = body.rindex(b"data: [DONE]")
    gateway.replace = (b'"finish_reason":"tool_calls"', b'"finish_reason":"stop"')
    response = await client.post(tap.front_url + "/v1/chat/completions", data=chat_request())
    key = response.headers["X-Request-ID"]
    received = b""
    while b'"usage"' not in received:
        received += await response.content.readany()
    response.close()
    pair = await tap.wait_compared(key)
    assert pair["legs"]["downstream"]["ended"] == "client_aborted"
    assert log.lines("divergence") == []
    aborted = {line["side"]: line["ended"] for line in log.lines("leg.aborted")}
    assert aborted["downstream"] == "client_aborted"


async def test_an_orphaned_front_leg_logs_each_fatal_defect_as_leg_defect(
    provider, gateway, make_tap, client: aiohttp.ClientSession, log
) -> None:
    provider_script, provider_url = provider
    gateway_script, gateway_url = gateway
    tap = await make_tap(front=("127.0.0.1", 0), gateway=gateway_url, back=("127.0.0.1", 0),
                         provider=provider_url, pairing_window=0.3)
    gateway_script.target = provider_url
    held_open(renumbered(chat_stream(tool_calls=2)), provider_script)
    response = await client.post(tap.front_url + "/v1/chat/completions", data=chat_request())
    key = response.headers["X-Request-ID"]
    await read_through_done(response)
    response.close()
    pair = await tap.wait_compared(key, timeout=10)
    assert pair["orphaned"] is True
    defects = log.lines("leg.defect")
    assert [(d["code"], d["side"], d["choice"], d["count"], d["request_id"]) for d in defects] == [
        ("TOOL_CALL_INDEX_GAP", "downstream", 0, 2, key)
    ]
    assert defects[0]["capture"] == log.lines("pair.orphaned")[-1]["capture"]
    assert log.lines("divergence") == []


async def test_an_unreadable_upstream_logs_no_divergence_only_each_sides_defects(
    topology: dict[str, Any], client: aiohttp.ClientSession, log
) -> None:
    """The provider answers in a dialect calltap cannot read (Ollama's `/api/generate` lines);
    the gateway hands the client a chat stream with a defect of its own."""
    tap, provider, gateway = topology["tap"], topology["provider"], topology["gateway"]
    provider.body = b'{"model":"m","response":"hi","done":true}\n'
    provider.content_type = "application/x-ndjson"
    downstream = renumbered(chat_stream(tool_calls=1))
    gateway.replace = (provider.body, downstream)
    _status, headers, body = await post_chat(client, tap.front_url)
    assert body == downstream
    pair = await tap.wait_compared(headers["X-Request-ID"])
    assert pair["comparison"]["verdict"] == "inconclusive"
    assert log.lines("divergence") == []
    assert [(d["code"], d["side"]) for d in log.lines("leg.defect")] == [
        ("TOOL_CALL_INDEX_GAP", "downstream")
    ]
