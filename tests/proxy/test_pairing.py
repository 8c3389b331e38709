import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.proxy.pairing import FrontLeg, Match, PairingBook

WINDOW = 30.0


def book(**kwargs) -> PairingBook:
    return PairingBook(window=WINDOW, **kwargs)


def front(key: str, trace: str | None = None, fp: str | None = None, at: float = 0.0) -> FrontLeg:
    return FrontLeg(key=key, trace_id=trace, fingerprint=fp, started=at)


def test_header_match():
    pairs = book()
    pairs.add_front(front("req-1", trace="t1", fp="f1"))
    assert pairs.match_back("req-1", None, None, now=1.0) == Match("req-1", "header", 1)
    assert pairs.attempts("req-1") == 1


def test_a_known_key_pairs_by_header_and_only_while_in_the_book():
    pairs = book(max_pending=1)
    assert not pairs.knows(None)
    pairs.add_front(front("req-1", fp="f1"))
    assert pairs.knows("req-1") and not pairs.knows("req-2")
    assert pairs.match_back("req-1", None, None, now=1.0).method == "header"
    pairs.add_front(front("req-2", fp="f2", at=2.0))
    assert not pairs.knows("req-1")
    assert pairs.match_back("req-1", None, None, now=2.5) is None
    assert pairs.knows("req-2")


def test_traceparent_match():
    pairs = book()
    pairs.add_front(front("req-1", trace="t1", fp="f1"))
    assert pairs.match_back(None, "t1", None, now=1.0) == Match("req-1", "traceparent", 1)


def test_fingerprint_match():
    pairs = book()
    pairs.add_front(front("req-1", trace="t1", fp="f1"))
    assert pairs.match_back(None, None, "f1", now=1.0) == Match("req-1", "fingerprint", 1)


def test_nothing_known_is_an_orphan_back_leg():
    pairs = book()
    pairs.add_front(front("req-1", trace="t1", fp="f1"))
    assert pairs.match_back(None, None, None, now=1.0) is None
    assert pairs.match_back("other", "t2", "f2", now=1.0) is None
    assert pairs.attempts("req-1") == 0
    assert pairs.attempts("other") == 0


def test_header_beats_traceparent_beats_fingerprint():
    pairs = book()
    pairs.add_front(front("a", trace="ta", fp="fa"))
    pairs.add_front(front("b", trace="tb", fp="fb"))
    pairs.add_front(front("c", trace="tc", fp="fc"))
    assert pairs.match_back("a", "tb", "fc", now=1.0) == Match("a", "header", 1)
    assert pairs.match_back(None, "tb", "fc", now=1.0) == Match("b", "traceparent", 1)
    assert pairs.match_back("unknown", None, "fc", now=1.0) == Match("c", "fingerprint", 1)


def test_unknown_request_id_falls_through_to_traceparent():
    pairs = book()
    pairs.add_front(front("a", trace="ta"))
    assert pairs.match_back("gateway-own-id", "ta", None, now=1.0) == Match(
        "a", "traceparent", 1
    )


def test_unknown_trace_id_falls_through_to_fingerprint():
    pairs = book()
    pairs.add_front(front("a", trace="ta", fp="f"))
    assert pairs.match_back(None, "tz", "f", now=1.0) == Match("a", "fingerprint", 1)


def test_retries_by_header_and_traceparent_count_as_attempts():
    pairs = book()
    pairs.add_front(front("a", trace="ta"))
    assert pairs.match_back("a", "ta", None, now=1.0).attempt == 1
    assert pairs.match_back("a", "ta", None, now=2.0).attempt == 2
    assert pairs.match_back(None, "ta", None, now=3.0) == Match("a", "traceparent", 3)
    assert pairs.attempts("a") == 3


def test_concurrent_identical_requests_pair_in_arrival_order():
    pairs = book()
    for key in ("first", "second", "third"):
        pairs.add_front(front(key, fp="same"))
    matched = [pairs.match_back(None, None, "same", now=1.0) for _ in range(3)]
    assert matched == [
        Match("first", "fingerprint", 1),
        Match("second", "fingerprint", 1),
        Match("third", "fingerprint", 1),
    ]


def test_fingerprint_retry_goes_to_the_most_recent_matched_leg():
    pairs = book()
    pairs.add_front(front("old", fp="same", at=0.0))
    pairs.add_front(front("new", fp="same", at=1.0))
    pairs.match_back(None, None, "same", now=1.5)
    pairs.match_back(None, None, "same", now=1.6)
    assert pairs.match_back(None, None, "same", now=2.0) == Match("new", "fingerprint", 2)


def test_fingerprint_prefers_the_next_unmatched_leg_over_a_retry():
    pairs = book()
    pairs.add_front(front("a", fp="same"))
    assert pairs.match_back(None, None, "same", now=0.5) == Match("a", "fingerprint", 1)
    pairs.add_front(front("b", fp="same", at=1.0))
    assert pairs.match_back(None, None, "same", now=1.5) == Match("b", "fingerprint", 1)


def test_an_open_leg_is_preferred_over_one_that_ended_without_upstream():
    pairs = book()
    pairs.add_front(front("cache-hit", fp="same", at=0.0))
    pairs.front_finished("cache-hit", now=0.2)
    pairs.add_front(front("live", fp="same", at=1.0))
    assert pairs.match_back(None, None, "same", now=1.1) == Match("live", "fingerprint", 1)
    assert pairs.match_back(None, None, "same", now=1.2) == Match("cache-hit", "fingerprint", 1)


def test_shared_trace_id_is_narrowed_by_fingerprint():
    pairs = book()
    pairs.add_front(front("a", trace="run", fp="fa"))
    pairs.add_front(front("b", trace="run", fp="fb"))
    assert pairs.match_back(None, "run", "fb", now=1.0) == Match("b", "traceparent", 1)
    assert pairs.match_back(None, "run", "fa", now=1.0) == Match("a", "traceparent", 1)
    assert pairs.match_back(None, "run", "fa", now=2.0) == Match("a", "traceparent", 2)


def test_shared_trace_id_without_fingerprint_pairs_in_arrival_order():
    pairs = book()
    pairs.add_front(front("a", trace="run"))
    pairs.add_front(front("b", trace="run"))
    assert pairs.match_back(None, "run", None, now=1.0).key == "a"
    assert pairs.match_back(None, "run", "unseen", now=1.0).key == "b"


def test_unmatched_leg_becomes_an_orphan_after_the_window():
    pairs = book()
    pairs.add_front(front("lonely", fp="f", at=0.0))
    assert pairs.expire(now=WINDOW) == []
    assert pairs.pending == 1
    assert pairs.expire(now=WINDOW + 0.1) == ["lonely"]
    assert pairs.pending == 0
    assert pairs.match_back("lonely", None, "f", now=WINDOW + 0.2) is None


def test_fingerprint_does_not_match_a_leg_past_its_window():
    pairs = book()
    pairs.add_front(front("stale", fp="f", at=0.0))
    assert pairs.match_back(None, None, "f", now=WINDOW + 1) is None
    assert pairs.expire(now=WINDOW + 1) == ["stale"]


def test_header_matches_until_the_entry_is_expired():
    pairs = book()
    pairs.add_front(front("slow-gateway", at=0.0))
    assert pairs.match_back("slow-gateway", None, None, now=WINDOW + 5) == Match(
        "slow-gateway", "header", 1
    )
    assert pairs.expire(now=WINDOW + 6) == []


def test_ended_leg_stays_matchable_for_the_window_then_goes_quietly():
    pairs = book()
    pairs.add_front(front("a", fp="f", at=0.0))
    pairs.match_back(None, None, "f", now=1.0)
    pairs.front_finished("a", now=100.0)
    assert pairs.expire(now=100.0 + WINDOW) == []
    assert pairs.match_back(None, None, "f", now=100.0 + WINDOW) == Match("a", "fingerprint", 2)
    assert pairs.expire(now=100.1 + WINDOW) == []
    assert pairs.pending == 0
    assert pairs.attempts("a") == 0


def test_open_matched_leg_is_kept_for_a_long_stream():
    pairs = book()
    pairs.add_front(front("long", trace="t", at=0.0))
    pairs.match_back(None, "t", None, now=0.5)
    assert pairs.expire(now=10 * WINDOW) == []
    assert pairs.match_back(None, "t", None, now=10 * WINDOW) == Match("long", "traceparent", 2)


def test_ended_unmatched_leg_is_an_orphan_a_window_after_it_ended():
    pairs = book()
    pairs.add_front(front("a", at=0.0))
    pairs.front_finished("a", now=20.0)
    assert pairs.expire(now=20.0 + WINDOW) == []
    assert pairs.expire(now=20.1 + WINDOW) == ["a"]


def test_front_finished_for_an_unknown_key_is_ignored():
    pairs = book()
    pairs.front_finished("never-seen", now=1.0)
    assert pairs.pending == 0


def test_size_is_bounded_and_evicted_unmatched_legs_are_orphans():
    pairs = book(max_pending=3)
    pairs.add_front(front("k0", fp="f0"))
    pairs.match_back("k0", None, None, now=0.1)
    for index in range(1, 6):
        pairs.add_front(front(f"k{index}", fp=f"f{index}", at=index * 0.1))
        assert pairs.pending <= 3
    assert pairs.pending == 3
    assert pairs.expire(now=1.0) == ["k1", "k2"]
    assert pairs.match_back(None, None, "f1", now=1.0) is None
    assert pairs.match_back("k5", None, None, now=1.0) == Match("k5", "header", 1)


def test_a_reused_key_replaces_the_older_entry():
    pairs = book()
    pairs.add_front(front("same-id", trace="day1", at=0.0))
    pairs.add_front(front("same-id", trace="day2", at=1.0))
    assert pairs.pending == 1
    assert pairs.match_back(None, "day1", None, now=1.5) is None
    assert pairs.match_back(None, "day2", None, now=1.5) == Match("same-id", "traceparent", 1)
    assert pairs.expire(now=2.0) == ["same-id"]


def test_bad_limits_are_refused():
    with pytest.raises(ValueError):
        PairingBook(window=0)
    with pytest.raises(ValueError):
        PairingBook(max_pending=0)


@st.composite
def interleavings(draw):
    """Events of N identical requests: fronts in order, back k never before front k, backs
    in order, and each front ending at some point after its own back."""
    count = draw(st.integers(min_value=1, max_value=8))
    events: list[tuple[str, int]] = []
    fronts = backs = 0
    finishable: list[int] = []
    while backs < count or finishable:
        options = []
        if fronts < count:
            options.append("front")
        if backs < fronts:
            options.append("back")
        if finishable:
            options.append("finish")
        kind = draw(st.sampled_from(options))
        if kind == "front":
            events.append(("front", fronts))
            fronts += 1
        elif kind == "back":
            events.append(("back", backs))
            finishable.append(backs)
            backs += 1
        else:
            events.append(("finish", finishable.pop(draw(st.integers(0, len(finishable) - 1)))))
    return events


@examples(200)
@given(interleavings())
def test_kth_back_leg_pairs_with_kth_front_for_identical_requests(events):
    pairs = book()
    now = 0.0
    paired: list[Match | None] = []
    for kind, index in events:
        now += 0.01
        if kind == "front":
            pairs.add_front(front(f"req-{index}", fp="identical", at=now))
        elif kind == "back":
            paired.append(pairs.match_back(None, None, "identical", now=now))
        else:
            pairs.front_finished(f"req-{index}", now=now)
    assert paired == [Match(f"req-{k}", "fingerprint", 1) for k in range(len(paired))]
