"""Every probe passes through a faithful gateway in each dialect, and fails with the right reason
through each gateway defect that breaks what it checks (and only those)."""

from __future__ import annotations

import pytest
from probe_helpers import by_name, gateway, probe

from calltap.probe.probes import PROBES

STREAMED = ["stream-echo", "stream-nested", "parallel"]
WHOLE = ["forced-echo", "forced-nested", "round-trip"]


@pytest.mark.parametrize("dialect", ["openai.chat", "anthropic.messages", "openai.responses"])
async def test_every_probe_passes_through_a_faithful_gateway(dialect: str) -> None:
    async with gateway() as url:
        run = await probe(url, dialect=dialect)
    outcomes = by_name(run)
    assert list(outcomes) == list(PROBES)
    assert {name: o.reason for name, o in outcomes.items() if not o.passed} == {}
    assert outcomes["round-trip"].received["answer"]["text"].endswith("calltap-result-5d2c91 ok")
    assert [call["name"] for call in outcomes["parallel"].received] == [
        "probe_weather",
        "probe_clock",
    ]


@pytest.mark.parametrize("defect", ["rewrite-ids", "rechunk-arguments", "strip-headers"])
async def test_cosmetic_gateway_rewrites_fail_no_probe(defect: str) -> None:
    async with gateway(defect) as url:
        run = await probe(url)
    assert [o.name for o in run.outcomes if not o.passed] == []


async def test_a_dropped_second_call_fails_parallel_only() -> None:
    async with gateway("drop-second-call") as url:
        outcomes = by_name(await probe(url))
    assert [name for name, o in outcomes.items() if not o.passed] == ["parallel"]
    assert "1 call(s), expected 2" in outcomes["parallel"].reason
    assert "no call of probe_clock" in outcomes["parallel"].reason


async def test_merged_indexes_fail_parallel_only() -> None:
    async with gateway("merge-indexes") as url:
        outcomes = by_name(await probe(url))
    assert [name for name, o in outcomes.items() if not o.passed] == ["parallel"]
    assert "TOOL_CALL_ID_CONFLICT" in outcomes["parallel"].reason


async def test_changed_types_fail_forced_nested_with_the_path_and_both_values() -> None:
    async with gateway("change-two-values") as url:
        outcomes = by_name(await probe(url, ["forced-nested", "stream-nested"]))
    for name in ("forced-nested", "stream-nested"):
        reason = outcomes[name].reason
        assert "at /flags/enabled expected true (boolean), received 1 (integer)" in reason
        assert 'at /flags/retries expected 1 (integer), received "1" (string)' in reason
    received = outcomes["forced-nested"].received[0]["arguments"]
    assert received["flags"] == {"enabled": 1, "retries": "1"}
    assert outcomes["forced-nested"].expected[0]["arguments"]["flags"] == {
        "enabled": True,
        "retries": 1,
    }


async def test_a_missing_terminal_marker_fails_the_stream_probes_only() -> None:
    async with gateway("strip-done") as url:
        outcomes = by_name(await probe(url))
    assert sorted(name for name, o in outcomes.items() if not o.passed) == sorted(STREAMED)
    for name in STREAMED:
        assert "DONE_MISSING" in outcomes[name].reason


async def test_a_null_finish_reason_fails_the_stream_probes_only() -> None:
    async with gateway("null-finish-reason") as url:
        outcomes = by_name(await probe(url))
    assert sorted(name for name, o in outcomes.items() if not o.passed) == sorted(STREAMED)
    for name in STREAMED:
        assert "finish reason None, not tool_calls" in outcomes[name].reason
        assert "FINISH_REASON_MISSING" in outcomes[name].reason


async def test_an_error_after_200_fails_the_stream_probes() -> None:
    async with gateway("error-after-200") as url:
        outcomes = by_name(await probe(url, STREAMED))
    for name in STREAMED:
        assert not outcomes[name].passed
        assert "ERROR_IN_STREAM" in outcomes[name].reason


async def test_a_masked_eof_fails_the_stream_probes() -> None:
    async with gateway("mask-eof") as url:
        outcomes = by_name(await probe(url, STREAMED))
    for name in STREAMED:
        assert "finish reason 'stop', not tool_calls" in outcomes[name].reason


async def test_a_provider_ignoring_const_fails_every_probe_that_expects_a_call() -> None:
    async with gateway(follow_const=False) as url:
        outcomes = by_name(await probe(url))
    assert [name for name, o in outcomes.items() if o.passed] == ["choice-none"]
    assert 'at /city expected "Zürich" (string), received "Taipei"' in outcomes["parallel"].reason


async def test_the_second_turn_of_round_trip_replays_the_validated_call() -> None:
    async with gateway() as url:
        run = await probe(url, ["round-trip"])
    (call, answer) = [entry for entry in run.trace if entry["label"].startswith("round-trip")]
    assert call["label"].endswith("call") and answer["label"].endswith("answer")
    assert '"role":"tool"' in answer["request"]["body"]
    assert "calltap-result-5d2c91 ok" in answer["request"]["body"]
    assert run.outcomes[0].passed
