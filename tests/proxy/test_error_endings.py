"""An error relayed inside the stream ends the leg as the terminal marker does.

The official SDKs raise on an error payload in a 200 stream and hang up: openai-python on any
data payload with a truthy `error` (a Chat chunk, a Responses `error` event), the Anthropic SDK
on `event: error`, and so on for every dialect. A client that closes after an error frame was
told the stream failed: its leg ended complete (pair.json keeps the socket's word in
`relay_ended`), and the error is the divergence logged. A hang-up before the error frame is still
a cut leg, with no `divergence` line.

Each dialect's error frame is inserted by the "gateway" into a whole provider stream, in the
shapes the dialect fixtures take from the providers' documentation (see their READMEs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from tests.proxy.conftest import chat_request, chat_stream
from tests.proxy.test_analysis import job
from tests.proxy.test_judged_endings import held_open
from tests.support.properties import examples

from calltap.fakes import eventstream as wire
from calltap.proxy.analysis import analyze
from calltap.proxy.outcomes import alarms
from calltap.proxy.relay import Leg
from calltap.recordings import CLIENT_ABORTED, COMPLETE, SHUTDOWN
from fixtures.anthropic import stream as anthropic
from fixtures.bedrock.converse_stream import THROTTLED, TOOL_USE
from fixtures.gemini import stream as gemini
from fixtures.openai_responses import stream as responses

FIXTURES = Path(__file__).parents[1] / "fixtures"
INVOKE_PATH = "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/invoke-with-response-stream"
CONVERSE_PATH = "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/converse-stream"
CHAT_ERROR = {"error": {"message": "Provider returned error", "type": "server_error", "code": 502}}
HUNG_UP = (CLIENT_ABORTED, SHUTDOWN)


@dataclass(frozen=True)
class Case:
    """A whole provider stream, and the client's copy with one error frame at `start`..`end`."""

    path: str
    upstream: bytes
    downstream: bytes
    start: int
    end: int


def inserted(path: str, frames: list[bytes], at: int, error: bytes) -> Case:
    """The provider's `frames`, and the gateway's copy with `error` before frame `at`."""
    start = len(b"".join(frames[:at]))
    upstream = b"".join(frames)
    downstream = upstream[:start] + error + upstream[start:]
    return Case(path, upstream, downstream, start, start + len(error))


def sse_frames(body: bytes, separator: bytes = b"\n\n") -> list[bytes]:
    return [frame + separator for frame in body.split(separator)[:-1]]


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def invoke_events() -> list[bytes]:
    """Anthropic Messages events, each in an InvokeModelWithResponseStream `chunk`."""
    events = [anthropic.message_start(72), *anthropic.text_block(0, ["I'll check", " both."]),
              anthropic.message_delta("end_turn", 41), anthropic.STOP]
    return [wire.chunk(event) for event in events]


def response_failed(body: bytes) -> Case:
    """A Responses stream whose terminal `response.completed` the gateway sent as
    `response.failed`, with the response's `error`."""
    frames = sse_frames(body)
    completed = orjson.loads(frames[-1].split(b"data: ", 1)[1])
    completed["type"] = "response.failed"
    completed["response"] |= {"status": "failed",
                              "error": {"code": "server_error", "message": "bridge failed"}}
    failed = b"event: response.failed\ndata: " + orjson.dumps(completed) + b"\n\n"
    start = len(body) - len(frames[-1])
    return Case("/v1/responses", body, body[:start] + failed, start, start + len(failed))


def responses_error() -> bytes:
    return b"event: error\ndata: " + orjson.dumps(responses.error_event()) + b"\n\n"


CASES = {
    "openai.chat": inserted("/v1/chat/completions", sse_frames(chat_stream(tool_calls=1)), 2,
                            b"data: " + orjson.dumps(CHAT_ERROR) + b"\n\n"),
    "anthropic.messages": inserted(
        "/v1/messages", sse_frames(fixture("anthropic/text.upstream.sse")), 3,
        anthropic.sse([anthropic.error()])),
    "anthropic on bedrock, error event": inserted(INVOKE_PATH, invoke_events(), 3,
                                                  wire.chunk(anthropic.error())),
    "anthropic on bedrock, exception": inserted(INVOKE_PATH, invoke_events(), 3,
                                                wire.exception(*THROTTLED)),
    "openai.responses, error event": inserted(
        "/v1/responses", sse_frames(fixture("openai_responses/tools.upstream.sse")), 4,
        responses_error()),
    "openai.responses, response.failed": response_failed(
        fixture("openai_responses/text.upstream.sse")),
    "google.gemini": inserted(gemini.GEMINI_PATH,
                              sse_frames(fixture("gemini/text.sse"), b"\r\n\r\n"), 1,
                              gemini.sse([gemini.error()])),
    "ollama.chat": inserted("/api/chat", fixture("ollama/chat.ndjson").splitlines(keepends=True),
                            3, b'{"error":"model runner has unexpectedly stopped"}\n'),
    "bedrock.converse": inserted(CONVERSE_PATH, [wire.event(kind, body) for kind, body in TOOL_USE],
                                 3, wire.exception(*THROTTLED)),
}
"""Every dialect's error frame: OpenAI Chat, Anthropic Messages (also on Bedrock InvokeModel),
OpenAI Responses, Gemini, Ollama and Bedrock Converse."""


def judged(directory: Path, case: Case, body: bytes, relayed: int,
           ended: str = CLIENT_ABORTED) -> tuple[dict[str, Any], list[str]]:
    """The client's leg as pair.json says it ended, after it hung up with `relayed` bytes of
    `body` sent on; and the codes of the `divergence` lines the log addon would write for it."""
    work = job(directory, case.upstream, body, downstream_ended=ended, relayed=relayed)
    for spec in (work["upstream"], work["downstream"]):
        assert spec is not None
        spec["path"] = case.path
    result = analyze(work)
    leg = orjson.loads((directory / "pair.json").read_bytes())["legs"]["downstream"]
    client = Leg("downstream", "POST", case.path, [], 0.0)
    client.ended = leg["ended"]
    lines = alarms(result["judgement"], "compare", client, unpartnered=True)
    return leg, [str(line.finding.code) for line in lines if line.event == "divergence"]


def test_every_case_holds_one_error_frame_the_provider_never_sent() -> None:
    for case in CASES.values():
        error = case.downstream[case.start:case.end]
        assert case.upstream[:case.start] == case.downstream[:case.start]
        assert error not in case.upstream
        assert case.downstream.count(error) == 1


@pytest.mark.parametrize("name", CASES)
def test_a_hang_up_at_any_byte_after_the_error_frame_is_complete_and_logs_it(
    tmp_path: Path, name: str
) -> None:
    case = CASES[name]
    for relayed in range(case.end, len(case.downstream) + 1):
        ended = HUNG_UP[relayed % 2]
        leg, divergences = judged(tmp_path, case, case.downstream[:relayed], relayed, ended)
        assert (leg["ended"], leg["relay_ended"]) == (COMPLETE, ended), relayed
        assert "ERROR_IN_STREAM" in divergences, relayed


@pytest.mark.parametrize("name", CASES)
def test_a_hang_up_before_the_error_frame_was_relayed_is_cut_and_logs_nothing(
    tmp_path: Path, name: str
) -> None:
    """The whole stream was read from the gateway and recorded, error frame and all, but the
    client was gone before its last line end reached it."""
    case = CASES[name]
    for relayed in range(0, case.end - 1):
        ended = HUNG_UP[relayed % 2]
        leg, divergences = judged(tmp_path, case, case.downstream, relayed, ended)
        assert (leg["ended"], "relay_ended" in leg) == (ended, False), relayed
        assert divergences == [], relayed


@examples(60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_hang_up_is_complete_whenever_the_error_frame_was_relayed(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Any hang-up point, with the recording holding any number of bytes past it (the relay
    records a chunk before it writes it on)."""
    case = CASES[data.draw(st.sampled_from(sorted(CASES)), label="dialect")]
    relayed = data.draw(st.integers(0, len(case.downstream)), label="relayed")
    recorded = data.draw(st.integers(relayed, len(case.downstream)), label="recorded")
    leg, divergences = judged(tmp_path_factory.mktemp("error"), case,
                              case.downstream[:recorded], relayed)
    if relayed >= case.end:
        assert leg["ended"] == COMPLETE
        assert "ERROR_IN_STREAM" in divergences
    elif relayed < case.end - 1:
        assert leg["ended"] == CLIENT_ABORTED
        assert divergences == []


# --- through the proxy ----------------------------------------------------------------------


async def read_until_error(response: aiohttp.ClientResponse) -> bytes:
    """Read as openai-python does: event by event, until a data payload with a truthy `error`,
    on which it raises and the connection is closed."""
    received = b""
    while True:
        chunk = await response.content.readany()
        assert chunk, "the stream ended before an error frame"
        received += chunk
        for frame in received.split(b"\n\n")[:-1]:
            for line in frame.split(b"\n"):
                if line.startswith(b"data: {") and orjson.loads(line[6:]).get("error"):
                    return received


def stalled_after(case: Case, sent: int) -> tuple[bytes, bytes]:
    """The gateway's rewrite of the provider's whole stream (one chunk): the client's copy up to
    byte `sent`, and then nothing more (the gateway keeps the response open)."""
    return case.upstream, case.downstream[:sent]


def frame_ends(case: Case) -> list[int]:
    """Each frame end of the client's copy from the error frame's on, but before the terminal
    marker's: the bytes relayed never carry the marker."""
    ends = [end for end in range(case.end, len(case.downstream))
            if case.downstream[:end].endswith(b"\n\n")]
    return ends


CHAT = CASES["openai.chat"]
RESPONSES = CASES["openai.responses, error event"]


async def hang_up_after_error(topology: dict[str, Any], client: aiohttp.ClientSession,
                              case: Case, sent: int, request: bytes) -> dict[str, Any]:
    """The provider sends its whole stream and holds the response open; the gateway inserts
    the error frame and stalls after byte `sent` of the client's copy; the client reads up to
    the error frame and hangs up. The pair.json compared."""
    tap, provider, gateway = topology["tap"], topology["provider"], topology["gateway"]
    held_open(case.upstream, provider)
    gateway.replace = stalled_after(case, sent)
    response = await client.post(tap.front_url + case.path, data=request,
                                 headers={"Content-Type": "application/json"})
    key = response.headers["X-Request-ID"]
    await read_until_error(response)
    response.close()
    return await tap.wait_compared(key)


@pytest.mark.parametrize("sent", frame_ends(CHAT))
async def test_a_chat_client_that_hangs_up_on_an_error_frame_gets_it_logged(
    topology: dict[str, Any], client: aiohttp.ClientSession, log, sent: int
) -> None:
    pair = await hang_up_after_error(topology, client, CHAT, sent, chat_request())
    downstream = pair["legs"]["downstream"]
    assert (downstream["ended"], downstream["relay_ended"]) == (COMPLETE, CLIENT_ABORTED)
    assert downstream["bytes_relayed"] == sent
    divergences = [line["code"] for line in log.lines("divergence")]
    assert "ERROR_IN_STREAM" in divergences
    assert divergences == [finding["code"] for finding in pair["comparison"]["findings"]
                           if finding["severity"] in ("fatal", "negotiable")]
    assert log.lines("pair.compared")[-1]["downstream_ended"] == COMPLETE
    assert [line["side"] for line in log.lines("leg.aborted")] == []


@pytest.mark.parametrize("sent", frame_ends(RESPONSES))
async def test_a_responses_client_that_hangs_up_on_an_error_event_gets_it_logged(
    topology: dict[str, Any], client: aiohttp.ClientSession, log, sent: int
) -> None:
    request = orjson.dumps({"model": "gpt-4.1", "input": "Weather in Lisbon?", "stream": True})
    pair = await hang_up_after_error(topology, client, RESPONSES, sent, request)
    downstream = pair["legs"]["downstream"]
    assert (downstream["ended"], downstream["relay_ended"]) == (COMPLETE, CLIENT_ABORTED)
    assert "ERROR_IN_STREAM" in [line["code"] for line in log.lines("divergence")]
    assert log.lines("pair.compared")[-1]["downstream_ended"] == COMPLETE


async def test_a_client_gone_before_the_error_frame_is_a_cut_leg_with_no_divergence(
    topology: dict[str, Any], client: aiohttp.ClientSession, log
) -> None:
    """The gateway stalls before the error frame; the client reads what came and hangs up."""
    tap, provider, gateway = topology["tap"], topology["provider"], topology["gateway"]
    held_open(CHAT.upstream, provider)
    gateway.replace = stalled_after(CHAT, CHAT.start)
    response = await client.post(tap.front_url + CHAT.path, data=chat_request())
    key = response.headers["X-Request-ID"]
    received = b""
    while len(received) < CHAT.start:
        received += await response.content.readany()
    response.close()
    pair = await tap.wait_compared(key)
    assert pair["legs"]["downstream"]["ended"] == CLIENT_ABORTED
    assert pair["comparison"]["verdict"] == "diverged"
    assert log.lines("divergence") == []
    aborted = {line["side"]: line["ended"] for line in log.lines("leg.aborted")}
    assert aborted["downstream"] == CLIENT_ABORTED
