"""The list row of a pair.json: every column read from the document and the request, through
the pair's index row."""

from __future__ import annotations

from pathlib import Path

from view_helpers import CLOCK, WEATHER, two_calls, write_pair

from calltap import recordings
from calltap.index.gaps import row_for
from calltap.index.rows import model_of, row_of
from calltap.view.listing import PairList
from calltap.view.query import Filters
from calltap.view.summary import Summary


def summarize(day: str, key: str, document: dict, request: bytes | None) -> Summary:
    """The list row of `document`, as the list reads it back from its index row."""
    row = row_of(document, request, day=day, stored_as=key, replica="r1")
    return _listed(row)


def _listed(row: dict, tmp: Path = Path("/nonexistent-tree")) -> Summary:
    """The row as the list shows it, once loaded into a list of its own."""
    pairs = PairList(tmp)
    pairs.catalog._insert_rows([row])
    return pairs.page(Filters(), limit=1)[0]


def read_summary(root: Path, day: str, key: str) -> Summary:
    return _listed(row_for(root, day, key))


def test_a_dropped_call_pair_is_summarized_column_by_column(tmp_path: Path) -> None:
    write_pair(tmp_path, "req-1", two_calls(), two_calls(keep=1))
    assert read_summary(tmp_path, "2026-11-30", "req-1") == Summary(
        day="2026-11-30", key="req-1", request_id="req-1",
        started_at="2026-11-30T04:11:50.123000Z", endpoint="/v1/chat/completions",
        model="gpt-4o", dialect_up="openai.chat", dialect_down="openai.chat",
        pairing="header", attempts=1, verdict="diverged",
        codes=("TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED"),
        bytes_up=len(two_calls()), bytes_down=len(two_calls(keep=1)), duration_ms=250.0)


def test_a_single_leg_check_names_its_one_dialect_and_its_verdict() -> None:
    document = {
        "request_id": "only-down",
        "legs": {"downstream": {"path": "/v1/messages", "bytes": 10,
                                "started_at": "2026-11-30T00:00:00Z",
                                "finished_at": "2026-11-30T00:00:01.5Z"}},
        "check": {"verdict": "defective", "capture": {"dialect": "anthropic.messages"},
                  "findings": [{"code": "DONE_MISSING"}, {"code": "DONE_MISSING"}]},
    }
    row = summarize("2026-11-30", "only-down", document, None)
    assert (row.dialect_up, row.dialect_down, row.verdict, row.codes, row.bytes_up,
            row.bytes_down, row.duration_ms, row.endpoint, row.attempts) == (
        None, "anthropic.messages", "defective", ("DONE_MISSING",), None, 10, 1500.0,
        "/v1/messages", None)
    assert row.started_at == "2026-11-30T00:00:00.000000Z"


def test_a_capture_neither_compared_nor_checked_is_recorded_and_odd_fields_are_none() -> None:
    document = {"legs": {"upstream_attempts": [{"bytes": True, "path": 7}, {"bytes": 3}]},
                "attempts": "two", "pairing": None}
    row = summarize("2026-11-30", "k", document, b"not json")
    assert (row.request_id, row.verdict, row.codes, row.bytes_up, row.endpoint, row.attempts,
            row.model, row.started_at, row.duration_ms) == (
        "k", "recorded", (), 3, None, None, None, None, None)


def test_the_model_comes_from_the_request_else_from_the_path() -> None:
    assert model_of(b'{"model": "claude-3-5-sonnet"}', "/v1/messages") == "claude-3-5-sonnet"
    assert model_of(b'{"model": 5}', "/model/anthropic.claude-v2/invoke") == "anthropic.claude-v2"
    assert model_of(None, "/v1beta/models/gemini-1.5-pro:streamGenerateContent?alt=sse") == (
        "gemini-1.5-pro")
    assert model_of(b"[]", "/v1/chat/completions") is None


def test_helpers_write_what_the_recordings_module_reads(tmp_path: Path) -> None:
    directory = write_pair(tmp_path, "req-2", two_calls(names=(WEATHER, CLOCK)), two_calls())
    assert recordings.read_pair(directory)["comparison"]["verdict"] == "equal"


def test_a_pair_the_backlog_shed_is_listed_as_skipped_with_its_recorded_sizes() -> None:
    document = {"request_id": "shed", "legs": {
        "downstream": {"path": "/v1/chat/completions", "bytes": 12},
        "upstream": {"path": "/v1/chat/completions", "bytes": 10}},
        "skipped": {"reason": "deadline", "waited": 61.2}}
    row = summarize("2026-11-30", "shed", document, None)
    assert (row.verdict, row.codes, row.bytes_up, row.bytes_down, row.dialect_up) == (
        "skipped", (), 10, 12, None)
