"""`calltap replay`'s command line: what a pair directory gives a replay, and the usage errors
(exit 2, one line, nothing replayed)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from replay_helpers import replay
from tests.e2e.conftest import open_topology

from calltap import recordings
from calltap.cli import main
from calltap.fakes.provider import TOOLS_REQUEST
from calltap.replay.cassette import CassetteError, load

GATEWAY = "http://127.0.0.1:9"
"""Never contacted: every command line here is refused before anything is sent."""


def test_a_pair_loads_as_the_clients_request_and_the_providers_answers_in_order(demo_pairs):
    recorded = load(demo_pairs["retry-once"])
    names = {name for name, _ in recorded.client.headers}
    assert recorded.client.method == "POST" and recorded.client.path == "/v1/chat/completions"
    assert recorded.client.redacted == ("authorization",)
    assert names.isdisjoint({"authorization", "host", "content-length", "x-request-id"})
    assert ("x-fake-gateway-defect", "retry-once") in recorded.client.headers
    assert [answer.attempt for answer in recorded.cassette] == [1, 2]
    assert [answer.path for answer in recorded.cassette] == ["/v1/chat/completions"] * 2
    assert all(answer.status == 200 and answer.body.endswith(b"data: [DONE]\n\n")
               for answer in recorded.cassette)
    assert all(answer.timing.first_byte >= 0 and answer.timing.rest >= 0
               for answer in recorded.cassette)
    assert recorded.verdict == "equal" and recorded.codes == ()


def test_a_pair_without_its_request_body_cannot_be_replayed(demo_pairs, tmp_path: Path):
    copy = tmp_path / "pair"
    copy.mkdir()
    for source in demo_pairs["none"].iterdir():
        if source.name != "downstream.request":
            (copy / source.name).write_bytes(source.read_bytes())
    with pytest.raises(CassetteError, match="the client's request body was not recorded"):
        load(copy)


def refused(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    """Run the command; it must exit 2 with one line on stderr, which is returned."""
    assert main(["replay", *map(str, argv)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("calltap replay: ")
    return captured.err


def test_usage_errors_exit_2_with_one_line(demo_pairs, demo_tree, tmp_path, capsys):
    pair = demo_pairs["drop-second-call"]
    assert "--gateway URL is required" in refused(capsys, pair)
    assert "give one PAIR_DIR or --case DIR" in refused(capsys, "--gateway", GATEWAY)
    assert "give one PAIR_DIR or --case DIR" in refused(capsys, pair, "--case", pair)
    assert "no such directory" in refused(capsys, tmp_path / "absent", "--gateway", GATEWAY)
    assert "unknown finding code 'DROPPED'" in refused(capsys, demo_tree, "--code", "DROPPED")
    assert "no compared pair with CHOICE_ADDED" in refused(
        capsys, demo_tree, "--code", "CHOICE_ADDED", "--gateway", GATEWAY)
    assert 'expected "Name: value"' in refused(capsys, pair, "--gateway", GATEWAY,
                                               "--header", "Authorization Bearer x")
    assert "expected NAME=VALUE, got 'key'" in refused(capsys, pair, "--gateway", GATEWAY,
                                                       "--query", "key")
    assert "expected NAME=VALUE" in refused(capsys, pair, "--gateway", GATEWAY,
                                            "--query", "=value")
    assert "'key' given twice" in refused(capsys, pair, "--gateway", GATEWAY,
                                          "--query", "key=a", "--query", "key=b")
    assert "unparseable URL" in refused(capsys, pair, "--gateway", "http://a b")
    assert "expected HOST:PORT" in refused(capsys, pair, "--gateway", GATEWAY, "--back", "8701")
    assert "not a loopback address" in refused(capsys, pair, "--gateway", GATEWAY,
                                               "--back", "0.0.0.0:8701")


def test_an_unreadable_pair_json_is_a_usage_error(tmp_path, capsys):
    (tmp_path / recordings.PAIR_JSON).write_text("{not json")
    assert "pair.json" in refused(capsys, tmp_path, "--gateway", GATEWAY)


def test_a_busy_back_port_is_a_usage_error(demo_pairs, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = refused(capsys, demo_pairs["none"], "--gateway", GATEWAY,
                      "--back", f"127.0.0.1:{port}")
    assert "address already in use" in err.lower()


async def test_the_recorded_requests_identity_is_not_sent_again(tmp_path: Path):
    async with open_topology(tmp_path / "recordings") as topology:
        sent = await topology.send(TOOLS_REQUEST, request_id="client-chosen-id")
    recorded = load(sent.directory)
    assert recorded.request_id == "client-chosen-id"
    names = {name for name, _ in recorded.client.headers}
    assert names.isdisjoint({"x-request-id", "traceparent", "authorization"})
    assert recorded.client.redacted == ("authorization",)


def orphan_copy(pair: Path, target: Path) -> Path:
    """A copy of a pair whose pair.json lost its downstream leg, as an orphaned upstream leg's."""
    target.mkdir(parents=True)
    for source in pair.iterdir():
        (target / source.name).write_bytes(source.read_bytes())
    document = recordings.read_pair(target)
    del document["legs"]["downstream"]
    (target / recordings.PAIR_JSON).write_bytes(recordings.encode_pair(document))
    return target


async def test_a_pair_of_a_tree_that_cannot_be_replayed_is_skipped_and_named(demo_pairs,
                                                                             tmp_path):
    tree = tmp_path / "tree"
    orphan = orphan_copy(demo_pairs["drop-second-call"], tree / "2026-12-01" / "orphan")
    for name in ("merge-indexes", "none"):
        source = demo_pairs[name]
        (tree / "2026-12-01" / source.name).mkdir()
        for path in source.iterdir():
            (tree / "2026-12-01" / source.name / path.name).write_bytes(path.read_bytes())
    replayed = await replay(tree, "--code", "TOOL_CALLS_DROPPED", "--pace", "none", "--json")
    assert replayed.exit == 0, replayed
    assert [result["request_id"] for result in replayed.results] == [
        demo_pairs["merge-indexes"].name]
    assert replayed.json["skipped"] == [f"{orphan}: pair.json has no downstream leg to replay"]


def test_a_single_pair_that_cannot_be_replayed_is_a_usage_error(demo_pairs, tmp_path, capsys):
    orphan = orphan_copy(demo_pairs["none"], tmp_path / "orphan")
    assert "has no downstream leg" in refused(capsys, orphan, "--gateway", GATEWAY)
