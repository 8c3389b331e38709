"""rows.row_of: a row for any pair.json it is given, and one that fits the segment schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from calltap.index.parquet import decode, encode_rows
from calltap.index.rows import COLUMNS, FORMAT, route_of, row_of

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12)
TIMES = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1)).map(
    lambda moment: moment.isoformat()) | JSON
FINDING = st.fixed_dictionaries({}, optional={
    "code": st.sampled_from(["TOOL_CALL_DROPPED", "DONE_MISSING"]) | JSON,
    "severity": st.sampled_from(["fatal", "negotiable", "cosmetic", "odd"]) | JSON,
    "side": st.sampled_from(["downstream", "upstream"]) | JSON})
LEG = st.fixed_dictionaries({}, optional={
    "path": st.sampled_from(["/v1/chat/completions", "/v1/models/m:generate?x=1"]) | JSON,
    "started_at": TIMES, "finished_at": TIMES, "bytes": JSON})
REPORT = st.fixed_dictionaries({}, optional={
    "verdict": st.sampled_from(["equal", "diverged"]) | JSON,
    "findings": st.lists(FINDING, max_size=6) | JSON,
    "requests": JSON, "downstream": JSON, "upstream": JSON})
DOCUMENTS = st.fixed_dictionaries({}, optional={
    "request_id": JSON, "pairing": JSON, "attempts": JSON, "capture_id": JSON,
    "legs": st.fixed_dictionaries({}, optional={"downstream": LEG, "upstream": LEG,
                                                "upstream_attempts": st.lists(LEG) | JSON})
    | JSON,
    "comparison": REPORT, "check": REPORT, "skipped": JSON}) | st.dictionaries(st.text(), JSON)


@given(DOCUMENTS, st.none() | st.binary(max_size=64))
def test_row_of_never_raises_and_its_lists_run_in_parallel(document: dict[str, Any],
                                                           request: bytes | None) -> None:
    row = row_of(document, request, day="2026-11-30", stored_as="k", replica="r")
    assert list(row) == list(COLUMNS)
    assert len(row["codes"]) == len(row["severities"]) == len(row["sides"])
    assert row["stored_as"] == "k" and row["day"] == "2026-11-30" and row["format"] == FORMAT
    assert row["verdict"] is not None


@given(st.lists(DOCUMENTS, min_size=1, max_size=4))
def test_every_row_fits_a_segment_and_reads_back(documents: list[dict[str, Any]]) -> None:
    """A row the schema cannot hold would stop its writer's segments for good."""
    rows = [row_of(doc, None, day="2026-11-30", stored_as=f"k{n}", replica="r")
            for n, doc in enumerate(documents)]
    back = {row["stored_as"]: row for row in decode(encode_rows(rows))}
    assert sorted(back) == sorted(row["stored_as"] for row in rows)
    for row in rows:
        assert back[row["stored_as"]]["codes"] == row["codes"]
        assert back[row["stored_as"]]["verdict"] == row["verdict"]


def test_findings_are_one_per_code_and_side_most_severe_first() -> None:
    document = {"comparison": {"verdict": "diverged", "findings": [
        {"code": "B", "severity": "cosmetic", "side": "upstream"},
        {"code": "A", "severity": "fatal", "side": "downstream"},
        {"code": "B", "severity": "fatal", "side": "upstream"},
        {"code": "A", "severity": "negotiable", "side": "upstream"}]}}
    row = row_of(document, None, day="2026-11-30", stored_as="k", replica="r")
    assert list(zip(row["codes"], row["severities"], row["sides"], strict=True)) == [
        ("A", "fatal", "downstream"), ("B", "fatal", "upstream"),
        ("A", "negotiable", "upstream")]


def test_a_route_names_its_endpoint_not_its_model_or_query() -> None:
    assert route_of("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse") == (
        "/v1beta/models/{model}:streamGenerateContent")
    assert route_of("/v1/chat/completions") == "/v1/chat/completions"


def test_an_integer_its_column_cannot_hold_is_null_and_the_row_still_fits() -> None:
    document = {"attempts": 2**40, "legs": {"downstream": {"bytes": 2**70},
                                            "upstream": {"bytes": -(2**63)}}}
    row = row_of(document, None, day="2026-11-30", stored_as="k", replica="r")
    assert (row["attempts"], row["bytes_downstream"], row["bytes_upstream"]) == (
        None, None, -(2**63))
    (back,) = decode(encode_rows([row]))
    assert back["bytes_upstream"] == -(2**63)
