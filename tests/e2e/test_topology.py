"""End to end: client -> calltap front -> fake gateway -> calltap back -> fake provider.

A faithful gateway must hand the client the provider's exact bytes and compare `equal`; each
injected defect must come out with the verdict, codes, pairing and attempts it is documented to
give, with captures holding exactly what each side saw and one log line per divergence.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

import orjson
import pytest

from calltap.codes import Code, Severity
from calltap.demo import conversation
from calltap.fakes import DEFECT_HEADER, DEFECTS, FAITHFUL, Defect
from calltap.fakes.provider import CHAT_PATH, TEXT_REQUEST, TOOLS_REQUEST

BREAKING = {Severity.FATAL, Severity.NEGOTIABLE}
STREAM_DEFECTS = {name: defect for name, defect in DEFECTS.items() if defect.request is None}
REQUEST_DEFECTS = {name: defect for name, defect in DEFECTS.items() if defect.request is not None}


def sha256(body: bytes | bytearray) -> str:
    return hashlib.sha256(body).hexdigest()


def provider_bytes(topology, sent, defect: Defect) -> bytes:
    """What the provider sent for this request: found by the forwarded id, or (when the
    gateway stripped every header) the provider's latest answer."""
    if defect.strips_headers:
        exchange = topology.provider.exchanges[-1]
        assert exchange.request_id is None
    else:
        exchange = topology.provider.exchange_for(sent.request_id)
    assert exchange.complete
    return bytes(exchange.response_body)


def assert_leg(leg: dict[str, Any], name: str, body: bytes) -> None:
    assert leg["method"] == "POST"
    assert leg["path"] == CHAT_PATH
    assert leg["status"] == 200
    assert leg["file"] == name
    assert leg["bytes"] == len(body)
    assert leg["sha256"] == sha256(body)
    assert leg["ended"] == "complete"
    started, first_byte, finished = (
        datetime.fromisoformat(leg[key]) for key in ("started_at", "first_byte_at", "finished_at")
    )
    assert started <= first_byte <= finished


def assert_no_secret_on_disk(topology) -> None:
    for path in topology.calltap.recordings.rglob("*"):
        if path.is_file():
            assert topology.secret.encode() not in path.read_bytes(), path
    assert topology.secret not in topology.log.getvalue()


@pytest.mark.parametrize(
    ("request_", "extension"),
    [(TEXT_REQUEST, "sse"), (TOOLS_REQUEST, "sse"), ({**TOOLS_REQUEST, "stream": False}, "json")],
    ids=["text-stream", "tool-call-stream", "json-body"],
)
async def test_a_faithful_gateway_delivers_the_providers_exact_bytes(
    topology, request_: dict[str, Any], extension: str
):
    sent = await topology.send(request_, request_id="faithful-1")
    upstream = provider_bytes(topology, sent, FAITHFUL)

    assert sent.status == 200
    assert sent.request_id == "faithful-1"
    assert sha256(sent.body) == sha256(upstream)
    assert sent.file(f"downstream.{extension}") == sent.body
    assert sent.file(f"upstream.{extension}") == upstream
    assert sent.file("downstream.request") == orjson.dumps(request_)
    assert sent.file("upstream.request") == orjson.dumps(request_)

    pair = sent.pair
    assert (pair["request_id"], pair["pairing"], pair["attempts"]) == ("faithful-1", "header", 1)
    assert_leg(pair["legs"]["downstream"], f"downstream.{extension}", sent.body)
    assert_leg(pair["legs"]["upstream"], f"upstream.{extension}", upstream)
    assert pair["legs"]["upstream"]["request_headers"]["x-request-id"] == "faithful-1"
    for side in ("downstream", "upstream"):
        assert pair["legs"][side]["request_headers"]["authorization"] == "[redacted]"
    assert "traceparent" in pair["legs"]["upstream"]["request_headers"]
    assert pair["comparison"]["verdict"] == "equal"
    assert pair["comparison"]["findings"] == []

    (compared,) = topology.log.lines("pair.compared", "faithful-1")
    assert compared["level"] == "info"
    assert compared["verdict"] == "equal"
    assert compared["codes"] == []
    assert (compared["pairing"], compared["attempts"]) == ("header", 1)
    assert (compared["bytes_upstream"], compared["bytes_downstream"]) == (len(upstream),) * 2
    assert compared["capture"] == str(sent.directory)
    assert topology.log.lines("divergence", "faithful-1") == []
    assert_no_secret_on_disk(topology)


@pytest.mark.parametrize("defect", STREAM_DEFECTS.values(), ids=STREAM_DEFECTS.keys())
async def test_each_injected_defect_gets_its_documented_verdict(topology, defect: Defect):
    sent = await topology.send(TOOLS_REQUEST, defect)
    upstream = provider_bytes(topology, sent, defect)
    pair = sent.pair
    comparison = pair["comparison"]
    codes = {finding["code"] for finding in comparison["findings"]}

    assert sent.status == 200
    assert comparison["verdict"] == defect.verdict
    assert defect.codes <= codes
    assert (pair["pairing"], pair["attempts"]) == (defect.pairing, defect.attempts)
    assert sent.file("downstream.sse") == sent.body
    assert sent.file("upstream.sse") == upstream
    assert sent.file("downstream.request") == orjson.dumps(TOOLS_REQUEST)
    assert sent.file("upstream.request") == orjson.dumps(TOOLS_REQUEST)
    assert_leg(pair["legs"]["downstream"], "downstream.sse", sent.body)
    assert_leg(pair["legs"]["upstream"], "upstream.sse", upstream)
    if defect.verdict == "equal":
        assert all(Code(code).severity not in BREAKING for code in codes)
    else:
        assert sha256(sent.body) != sha256(upstream)

    (compared,) = topology.log.lines("pair.compared", sent.request_id)
    assert compared["verdict"] == defect.verdict
    assert set(compared["codes"]) == codes
    divergences = topology.log.lines("divergence", sent.request_id)
    breaking = [f for f in comparison["findings"] if f["severity"] in BREAKING]
    assert [line["code"] for line in divergences] == [f["code"] for f in breaking]
    assert all(line["capture"] == str(sent.directory) for line in divergences)
    assert all(line["level"] == "warning" for line in divergences)
    assert_no_secret_on_disk(topology)


@pytest.mark.parametrize("defect", REQUEST_DEFECTS.values(), ids=REQUEST_DEFECTS.keys())
async def test_each_request_defect_reaches_the_provider_and_is_named(topology, defect: Defect):
    """The provider gets the changed request, the client the provider's answer as it came, and
    the pair diverges on the request side alone, one divergence line per breaking finding."""
    scenario = conversation(defect)
    request, path = scenario.request, scenario.path
    headers = {"Content-Type": "application/json", DEFECT_HEADER: defect.name}
    url = f"{topology.calltap.front_url}{path}"
    async with topology.client.post(url, data=orjson.dumps(request), headers=headers) as reply:
        assert reply.status == 200
        body, key = await reply.read(), reply.headers["X-Request-ID"]
    pair = await topology.calltap.wait_compared(key)
    (directory,) = topology.calltap.recordings.glob(f"*/{key}")

    assert (directory / "downstream.request").read_bytes() == orjson.dumps(request)
    assert orjson.loads((directory / "upstream.request").read_bytes()) == defect.request(request)
    assert (directory / "downstream.sse").read_bytes() == body
    assert (directory / "upstream.sse").read_bytes() == body
    findings = pair["comparison"]["findings"]
    assert pair["comparison"]["verdict"] == "diverged"
    assert {f["code"] for f in findings if f["side"] == "request"} == set(defect.codes)
    assert all(f["severity"] not in BREAKING for f in findings if f["side"] != "request")
    divergences = topology.log.lines("divergence", key)
    assert {line["code"] for line in divergences} == set(defect.codes)
    assert all(line["side"] == "request" for line in divergences)


async def test_dropped_call_is_reported_with_its_count_and_position(topology):
    sent = await topology.send(TOOLS_REQUEST, DEFECTS["drop-second-call"])
    comparison = sent.pair["comparison"]
    (dropped,) = [f for f in comparison["findings"] if f["code"] == "TOOL_CALLS_DROPPED"]
    assert (dropped["side"], dropped["choice"], dropped["count"]) == ("downstream", 0, 1)
    assert comparison["upstream"]["tool_calls"] == 2
    assert comparison["downstream"]["tool_calls"] == 1
    (line,) = [
        line
        for line in topology.log.lines("divergence", sent.request_id)
        if line["code"] == "TOOL_CALLS_DROPPED"
    ]
    assert (line["severity"], line["count"], line["choice"]) == ("fatal", 1, 0)


async def test_headerless_gateway_pairs_by_fingerprint(topology):
    sent = await topology.send(TOOLS_REQUEST, DEFECTS["strip-headers"], request_id="bare-1")
    upstream_headers = sent.pair["legs"]["upstream"]["request_headers"]
    assert sent.pair["pairing"] == "fingerprint"
    assert "x-request-id" not in upstream_headers
    assert "traceparent" not in upstream_headers
    assert "x-request-id" in sent.pair["legs"]["downstream"]["request_headers"]


async def test_retried_upstream_keeps_both_attempts_and_compares_the_last(topology):
    sent = await topology.send(TOOLS_REQUEST, DEFECTS["retry-once"], request_id="retry-1")
    first, second = topology.provider.exchanges
    attempts = sent.pair["legs"]["upstream_attempts"]
    assert [attempt["attempt"] for attempt in attempts] == [1, 2]
    assert attempts[1]["file"] == "upstream.sse"
    assert attempts[0]["file"] == "upstream.attempt-1.sse"
    assert sent.file("upstream.sse") == bytes(second.response_body)
    assert bytes(first.response_body).startswith(sent.file("upstream.attempt-1.sse"))
    assert topology.log.lines("pair.compared", "retry-1")[0]["attempts"] == 2


async def test_gateways_model_listing_is_relayed_and_never_orphaned(topology):
    models = await topology.gateway.probe_upstream()
    sent = await topology.send(TEXT_REQUEST)
    assert models["object"] == "list"
    assert topology.provider.requests_received == 2
    assert sent.pair["comparison"]["verdict"] == "equal"
    assert topology.log.lines("pair.orphaned") == []
