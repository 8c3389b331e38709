"""`calltap replay` through a real gateway on loopback: each recorded defect reproduced through
the same gateway, gone through a faithful one, and the requests a cassette cannot answer."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from aiohttp import web
from replay_helpers import replay

from calltap import recordings
from calltap.demo import SCENARIOS
from calltap.fakes import DEFECTS, FakeGateway
from calltap.fakes.gateway import DEFECT_HEADER, TRANSLATE_HEADER
from calltap.fakes.translate import LOSE_SECOND_TOOL_USE

LOSSY = [name for name, defect in DEFECTS.items() if defect.verdict == "diverged"]
"""Every defect that diverges, the request defects among them: a faithful gateway sends the tool
the buggy one dropped, and still asks the recorded question (the cassette matches by the last
turn, not by the tools), so its replay is answered and comes out equal."""
TRANSLATED_LOSSY = [f"{LOSE_SECOND_TOOL_USE.name}+{scenario.translate}" for scenario in SCENARIOS
                    if scenario.defect is LOSE_SECOND_TOOL_USE]
"""The demo's translated routes losing the second call: every route it translates to."""
TRANSLATED_FAITHFUL = ["none+responses", "none+gemini", "none+bedrock-invoke"]
EXPECTED_CODES = {**{name: {"TOOL_CALLS_DROPPED"} for name in TRANSLATED_LOSSY},
                  **{name: set() for name in TRANSLATED_FAITHFUL}}
FAITHFUL_GATEWAY = f"{DEFECT_HEADER}: none"
"""Sent with the replayed request, the header turns the fake gateway faithful: a fixed gateway."""


@pytest.mark.parametrize("name", [*DEFECTS, *TRANSLATED_LOSSY, *TRANSLATED_FAITHFUL])
async def test_a_recorded_pair_replays_to_the_same_verdict_and_codes(demo_pairs, name):
    replayed = await replay(demo_pairs[name], "--pace", "none", "--json")
    (result,) = replayed.results
    assert replayed.exit == 0, replayed
    assert result["result"] == "reproduced"
    assert result["replayed"]["verdict"] == result["recorded"]["verdict"]
    assert set(result["replayed"]["codes"]) == set(result["recorded"]["codes"])
    expected = DEFECTS[name].codes if name in DEFECTS else EXPECTED_CODES[name]
    assert expected <= set(result["replayed"]["codes"])
    assert result["misses"] == [] and result["notes"] == []


@pytest.mark.parametrize("name", [*LOSSY, *TRANSLATED_LOSSY])
async def test_a_divergence_replayed_through_a_faithful_gateway_differs(demo_pairs, name):
    replayed = await replay(demo_pairs[name], "--pace", "none", "--json",
                            "--header", FAITHFUL_GATEWAY)
    (result,) = replayed.results
    assert replayed.exit == 1, replayed
    assert result["result"] == "different"
    assert result["recorded"]["verdict"] == "diverged"
    assert result["replayed"]["verdict"] == "equal"


async def test_a_retried_pair_replays_both_attempts_in_order(demo_pairs):
    replayed = await replay(demo_pairs["retry-once"], "--pace", "none", "--json")
    (result,) = replayed.results
    assert replayed.exit == 0, replayed
    assert result["recorded"]["attempts"] == result["replayed"]["attempts"] == 2
    assert result["notes"] == []


async def test_a_gateway_asking_another_path_cannot_be_answered(demo_pairs):
    replayed = await replay(demo_pairs["drop-second-call"], "--pace", "none",
                            "--header", f"{TRANSLATE_HEADER}: anthropic")
    assert replayed.exit == 3, replayed
    assert ("cassette miss: POST /v1/messages: attempt 1 was recorded as POST"
            " /v1/chat/completions") in replayed.stdout
    assert "0 reproduced, 0 different, 1 cannot" in replayed.stdout


async def test_a_gateway_asking_more_attempts_than_recorded_cannot_be_answered(demo_pairs):
    replayed = await replay(demo_pairs["none"], "--pace", "none", "--json",
                            "--header", f"{DEFECT_HEADER}: retry-once")
    (result,) = replayed.results
    assert replayed.exit == 3, replayed
    assert result["result"] == "cannot"
    assert result["misses"] == [
        "POST /v1/chat/completions: request 2, but the cassette holds 1 attempt"]


async def test_a_tree_replays_every_pair_with_the_code_and_sums_them_up(demo_tree, demo_pairs):
    replayed = await replay(demo_tree, "--code", "TOOL_CALLS_DROPPED", "--pace", "none")
    assert replayed.exit == 0, replayed
    dropped = ["drop-second-call", "merge-indexes", *TRANSLATED_LOSSY]
    for name in dropped:
        assert demo_pairs[name].name in replayed.stdout
    assert demo_pairs["strip-done"].name not in replayed.stdout
    assert f"{len(dropped)} reproduced, 0 different, 0 cannot" in replayed.stdout


async def test_a_tree_through_a_fixed_gateway_exits_1_and_says_which_differ(demo_tree):
    replayed = await replay(demo_tree, "--code", "DONE_MISSING", "--pace", "none", "--json",
                            "--header", FAITHFUL_GATEWAY)
    assert replayed.exit == 1, replayed
    assert {result["result"] for result in replayed.results} == {"different"}
    assert len(replayed.results) == 2  # strip-done and error-after-200


async def test_the_replayed_pair_is_kept_with_recordings_and_no_secret_reaches_it(
        demo_pairs, tmp_path: Path):
    secret = "sk-replay-planted-secret-77aa"
    kept = tmp_path / "replayed"
    replayed = await replay(demo_pairs["drop-second-call"], "--pace", "none",
                            "--recordings", kept, "--header", f"Authorization: Bearer {secret}")
    assert replayed.exit == 0, replayed
    files = [path for path in kept.rglob("*") if path.is_file()]
    assert any(path.name == "pair.json" for path in files)
    assert all(secret.encode() not in path.read_bytes() for path in files)
    assert secret not in replayed.stdout + replayed.stderr


class WitnessGateway(FakeGateway):
    """The fake gateway, noting the Authorization and the query string each request brought it;
    refusing with 401 a request without a key where `require_key` (the header) or
    `require_query_key` (a `key` parameter other than the redacted marker) says so."""

    def __init__(self, *, require_key: bool = False, require_query_key: bool = False) -> None:
        super().__init__()
        self.require_key = require_key
        self.require_query_key = require_query_key
        self.authorizations: list[str | None] = []
        self.queries: list[str] = []

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        key = request.headers.get("Authorization")
        self.authorizations.append(key)
        self.queries.append(request.query_string)
        no_query_key = request.query.get("key") in (None, "[redacted]")
        if (self.require_key and key is None) or (self.require_query_key and no_query_key):
            return web.json_response({"error": {"message": "no key"}}, status=401)
        return await super()._relay(request)


async def test_the_gateway_receives_the_header_given_for_a_redacted_secret(demo_pairs):
    async with WitnessGateway() as gateway:
        replayed = await replay(demo_pairs["none"], "--pace", "none",
                                "--header", "Authorization: Bearer sk-given", gateway=gateway)
    assert replayed.exit == 0, replayed
    assert gateway.authorizations == ["Bearer sk-given"]


async def test_a_gateway_refusing_the_request_without_its_redacted_key_is_explained(
        demo_pairs):
    async with WitnessGateway(require_key=True) as gateway:
        replayed = await replay(demo_pairs["none"], "--pace", "none", gateway=gateway)
    assert replayed.exit == 1, replayed
    assert gateway.authorizations == [None]
    assert "the gateway answered 401 without calling the provider" in replayed.stdout
    assert "the recording redacted authorization: pass --header 'authorization: …'" in (
        replayed.stdout)


async def test_the_client_query_string_is_replayed(demo_pairs, tmp_path: Path):
    """An Azure-style client sends its `api-version` in the query; the replay sends it again."""
    query = "api-version=2024-10-21"
    pair = with_query(demo_pairs["none"], query, tmp_path / "pair")
    kept = tmp_path / "replayed"
    replayed = await replay(pair, "--pace", "none", "--json", "--recordings", kept)
    assert replayed.exit == 0, replayed
    (directory,) = recordings.capture_directories(kept)
    legs = orjson.loads((directory / recordings.PAIR_JSON).read_bytes())["legs"]
    assert legs["downstream"]["query"] == legs["upstream"]["query"] == query


def with_query(pair: Path, query: str, into: Path) -> Path:
    """A copy of `pair` whose client request was sent with `query`."""
    shutil.copytree(pair, into)
    document = orjson.loads((into / recordings.PAIR_JSON).read_bytes())
    document["legs"]["downstream"]["query"] = query
    (into / recordings.PAIR_JSON).write_bytes(orjson.dumps(document))
    return into


async def test_a_query_key_the_recording_redacted_is_given_back_and_never_kept(
        demo_pairs, tmp_path: Path):
    """Gemini-style: the key rode in the query, and pair.json holds it `[redacted]`."""
    secret = "AIza-replay-given-key-31"
    pair = with_query(demo_pairs["none"], "api-version=1&key=[redacted]&alt=sse",
                      tmp_path / "pair")
    kept = tmp_path / "replayed"
    async with WitnessGateway(require_query_key=True) as gateway:
        replayed = await replay(pair, "--pace", "none", "--json", "--recordings", kept,
                                "--query", f"key={secret}", gateway=gateway)
    assert replayed.exit == 0, replayed
    assert gateway.queries == [f"api-version=1&key={secret}&alt=sse"]
    (directory,) = recordings.capture_directories(kept)
    legs = orjson.loads((directory / recordings.PAIR_JSON).read_bytes())["legs"]
    assert legs["downstream"]["query"] == "api-version=1&key=[redacted]&alt=sse"
    assert all(secret.encode() not in path.read_bytes() for path in kept.rglob("*")
               if path.is_file())
    assert secret not in replayed.stdout + replayed.stderr


async def test_a_gateway_refusing_the_request_without_its_redacted_query_key_is_explained(
        demo_pairs, tmp_path: Path):
    pair = with_query(demo_pairs["none"], "key=[redacted]", tmp_path / "pair")
    async with WitnessGateway(require_query_key=True) as gateway:
        replayed = await replay(pair, "--pace", "none", gateway=gateway)
    assert replayed.exit == 1, replayed
    assert gateway.queries == ["key=[redacted]"]
    assert "the recording redacted the query parameter key: pass --query 'key=…'" in (
        replayed.stdout)
