"""layout: segment names list newest first, parse back, and hold any replica name safely."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from calltap.index import layout

DAYS = st.dates().map(lambda day: day.isoformat()).filter(lambda day: len(day) == 10)
MILLIS = st.integers(0, layout.HORIZON_MS - 1)
TAGS = st.from_regex(r"[a-z0-9]{1,32}", fullmatch=True)


@given(DAYS, MILLIS, MILLIS, st.text(min_size=1), st.text(min_size=1), TAGS, TAGS)
def test_of_two_segments_of_a_day_the_later_sealed_lists_first(
        day: str, first: int, second: int, replica_a: str, replica_b: str, tag_a: str,
        tag_b: str) -> None:
    a = layout.segment(day, replica_a, first, tag_a)
    b = layout.segment(day, replica_b, second, tag_b)
    if first > second:
        assert a.key < b.key
    elif second > first:
        assert b.key < a.key


@given(DAYS, MILLIS, st.text(), TAGS)
def test_a_segment_key_parses_back_to_itself(day: str, sealed: int, replica: str,
                                             tag: str) -> None:
    segment = layout.segment(day, replica, sealed, tag)
    assert layout.parse(segment.key) == segment
    assert segment.sealed_ms == sealed
    assert segment.key.startswith(layout.day_prefix(day))


@given(st.text())
def test_any_replica_name_becomes_a_safe_one(name: str) -> None:
    safe = layout.replica_name(name)
    assert layout.REPLICA_NAME.fullmatch(safe)
    assert layout.parse(layout.segment("2026-11-30", name, 0, "t").key) is not None


def test_a_pod_name_is_kept_and_hostile_names_are_tamed() -> None:
    assert layout.replica_name("litellm-7d9f8c6b5-x2x4q") == "litellm-7d9f8c6b5-x2x4q"
    assert layout.replica_name("../../etc") == ".._.._etc"
    assert layout.replica_name("") == "replica"
    assert len(layout.replica_name("x" * 500)) == 63


@given(st.text())
def test_parse_takes_only_segment_keys(key: str) -> None:
    segment = layout.parse(key)
    assert segment is None or segment.key == key


def test_parse_refuses_what_is_not_a_segment() -> None:
    good = layout.segment("2026-11-30", "r1", 1_764_000_000_000, "ab12").key
    assert layout.parse(good) is not None
    for key in (good.replace("_index", "index"), good.replace(".parquet", ".json"),
                "_index/pending/current.jsonl", "_index/day=30-11-2026/" + good.split("/")[2],
                "2026-11-30/req-1/pair.json", good + "/x"):
        assert layout.parse(key) is None, key
