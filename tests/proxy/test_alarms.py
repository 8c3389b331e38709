"""Which findings become live log lines, decided once from each finding's Severity, and the typed
findings that carry them across the worker boundary."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from calltap.codes import Code, Severity
from calltap.proxy.analysis import Judgement
from calltap.proxy.hooks import Alarm
from calltap.proxy.outcomes import alarms
from calltap.proxy.relay import Leg
from calltap.recordings import CLIENT_ABORTED, COMPLETE, SHUTDOWN, UPSTREAM_RESET
from calltap.transcript import Finding, Position

DROPPED = Finding(Code.TOOL_CALLS_DROPPED, "downstream", 0, 1, Position(4, 120), "get_weather")
COSMETIC = next(Finding(code) for code in Code if code.severity is Severity.COSMETIC)
NEGOTIABLE = next(Finding(code, "downstream") for code in Code
                  if code.severity is Severity.NEGOTIABLE)
WARNING = next(Finding(code) for code in Code if code.severity is Severity.WARNING)
FATAL_SIDE = Finding(Code.DONE_MISSING, "upstream")


def leg(ended: str = COMPLETE, side: str = "downstream") -> Leg:
    made = Leg(side, "POST", "/v1/chat/completions", [], 0.0)
    made.ended = ended
    return made


def test_a_comparison_alarms_on_its_fatal_and_negotiable_findings_only() -> None:
    judgement = Judgement("diverged", [DROPPED, COSMETIC, NEGOTIABLE, WARNING])
    assert alarms(judgement, "compare", leg(), unpartnered=False) == [
        Alarm("divergence", DROPPED, "downstream"),
        Alarm("divergence", NEGOTIABLE, "downstream"),
    ]


def test_a_side_that_could_not_be_read_leaves_only_each_sides_fatal_findings() -> None:
    judgement = Judgement("inconclusive", [DROPPED, WARNING],
                          {"upstream": [FATAL_SIDE, NEGOTIABLE], "downstream": [WARNING]},
                          readable=False)
    assert alarms(judgement, "compare", leg(), unpartnered=False) == [
        Alarm("leg.defect", FATAL_SIDE, "upstream")]


def test_a_leg_checked_alone_alarms_only_without_a_partner() -> None:
    judgement = Judgement("defective", [FATAL_SIDE, NEGOTIABLE])
    assert alarms(judgement, "check", leg(side="upstream"), unpartnered=True) == [
        Alarm("leg.defect", FATAL_SIDE, "upstream")]
    assert alarms(judgement, "check", leg(side="upstream"), unpartnered=False) == []


def test_a_stream_the_client_or_shutdown_cut_raises_nothing() -> None:
    judgement = Judgement("diverged", [DROPPED])
    for ended in (CLIENT_ABORTED, SHUTDOWN):
        assert alarms(judgement, "compare", leg(ended), unpartnered=False) == []
    assert alarms(judgement, "compare", leg(UPSTREAM_RESET), unpartnered=False) != []
    assert alarms(None, "compare", leg(), unpartnered=False) == []
    assert alarms(judgement, "record", leg(), unpartnered=True) == []


positions = st.none() | st.builds(Position, st.none() | st.integers(0, 10**6),
                                  st.none() | st.integers(0, 10**9))
findings = st.builds(Finding, st.sampled_from(list(Code)),
                     st.none() | st.sampled_from(["upstream", "downstream"]),
                     st.none() | st.integers(0, 8), st.none() | st.integers(0, 99), positions,
                     st.text(max_size=20))


@given(st.builds(Judgement, st.sampled_from(["equal", "diverged", "inconclusive"]),
                 st.lists(findings, max_size=5),
                 st.dictionaries(st.sampled_from(["upstream", "downstream"]),
                                 st.lists(findings, max_size=3)),
                 st.booleans()))
def test_a_judgement_crosses_the_worker_boundary_whole(judgement: Judgement) -> None:
    decoded = Judgement.decode(orjson.loads(orjson.dumps(judgement)))
    assert decoded == judgement
    assert all(isinstance(f.code, Code) for f in decoded.findings)
