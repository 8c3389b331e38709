"""The pair lifecycle as a pure state machine: no sockets, no clock, every interleaving."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from tests.support.properties import examples

from calltap.proxy.lifecycle import Discard, Finalize, Lifecycle


def test_a_pair_is_finalized_once_its_front_and_every_attempt_ended() -> None:
    life = Lifecycle()
    life.open("a", "pair")
    assert life.attempt_matched("a")
    assert life.attempt_matched("a")
    assert life.front_ended("a") == []
    assert life.attempt_ended("a") == []
    assert life.attempt_ended("a") == [Finalize("a", orphan=False)]
    assert not life.attempt_matched("a"), "a pair being finalized takes no more attempts"


def test_a_front_that_ends_first_waits_for_its_attempt_then_for_expiry() -> None:
    life = Lifecycle()
    life.open("a", "pair")
    assert life.front_ended("a") == []
    assert life.expired("a") == [Finalize("a", orphan=True)]
    life.finalized("a")
    assert "a" not in life and len(life) == 0


def test_expiry_before_the_front_ended_finalizes_it_as_an_orphan_when_it_ends() -> None:
    life = Lifecycle()
    life.open("a", "pair")
    assert life.expired("a") == []
    assert life.front_ended("a") == [Finalize("a", orphan=True)]


def test_expiry_spares_a_pair_with_an_attempt() -> None:
    life = Lifecycle()
    life.open("a", "pair")
    life.attempt_matched("a")
    assert life.expired("a") == []
    assert life.front_ended("a") == []
    assert life.attempt_ended("a") == [Finalize("a", orphan=False)]


def test_single_and_other_captures_are_finalized_when_their_leg_ends() -> None:
    life = Lifecycle()
    life.open("s", "single", orphan=True)
    life.open("o", "other")
    assert not life.attempt_matched("s") and not life.attempt_matched("o")
    assert life.single_ended("s") == [Finalize("s", orphan=True)]
    assert life.single_ended("o") == [Finalize("o", orphan=False)]
    assert life.single_ended("o") == []


def test_shutdown_finalizes_what_ended_and_discards_what_never_did() -> None:
    life = Lifecycle()
    life.open("waiting", "pair")
    life.front_ended("waiting")
    life.open("answered", "pair")
    life.attempt_matched("answered")
    life.attempt_ended("answered")
    life.open("nothing", "pair")
    assert sorted(life.shutdown(), key=repr) == sorted(
        [Finalize("waiting", orphan=True), Finalize("answered", orphan=False),
         Discard("nothing")], key=repr)
    assert life.shutdown() == []


def test_events_for_unknown_keys_do_nothing() -> None:
    life = Lifecycle()
    assert life.front_ended("x") == life.attempt_ended("x") == life.single_ended("x") == []
    assert life.expired("x") == [] and not life.attempt_matched("x")


def test_a_capture_forgotten_twice_or_never_known_is_no_error() -> None:
    life = Lifecycle()
    life.open("a", "single")
    assert life.single_ended("a") == [Finalize("a", orphan=False)]
    life.finalized("a")
    life.finalized("a")
    life.finalized("never")
    assert len(life) == 0


@dataclass
class _Capture:
    kind: str
    front_done: bool = False
    in_flight: int = 0
    ended_attempts: int = 0
    expired: bool = False
    actions: list[Finalize | Discard] = field(default_factory=list)


class LifecycleMachine(RuleBasedStateMachine):
    """Any interleaving of legs starting, ending and expiring, then shutdown: every capture
    is finalized exactly once, never while a leg of it is in flight (but at shutdown, which
    comes once nothing is), never before its front leg ended, and as an orphan exactly when
    no attempt ever ended."""

    def __init__(self) -> None:
        super().__init__()
        self.life = Lifecycle()
        self.captures: dict[str, _Capture] = {}
        self.shut = False

    def _take(self, key: str, actions: list[Finalize | Discard]) -> None:
        capture = self.captures[key]
        for action in actions:
            assert action.key == key
            if isinstance(action, Finalize):
                assert capture.in_flight == 0, "finalized with an attempt in flight"
                if capture.kind == "pair" and not self.shut:
                    assert capture.front_done
                    assert action.orphan == (capture.ended_attempts == 0)
            capture.actions.append(action)

    def _open_pairs(self) -> list[str]:
        return [key for key, capture in self.captures.items()
                if capture.kind == "pair" and not capture.actions]

    @rule(kind=st.sampled_from(["pair", "pair", "single", "other"]))
    def open(self, kind: str) -> None:
        key = f"k{len(self.captures)}"
        self.captures[key] = _Capture(kind)
        self.life.open(key, kind)  # type: ignore[arg-type]

    @precondition(lambda self: any(not c.front_done for c in self.captures.values()))
    @rule(data=st.data())
    def leg_ends(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(
            [k for k, c in self.captures.items() if not c.front_done]))
        capture = self.captures[key]
        capture.front_done = True
        if capture.kind == "pair":
            self._take(key, self.life.front_ended(key))
        else:
            self._take(key, self.life.single_ended(key))

    @precondition(lambda self: bool(self._open_pairs()))
    @rule(data=st.data())
    def attempt_arrives(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(self._open_pairs()))
        if self.life.attempt_matched(key):
            self.captures[key].in_flight += 1

    @precondition(lambda self: any(c.in_flight for c in self.captures.values()))
    @rule(data=st.data())
    def attempt_ends(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from([k for k, c in self.captures.items() if c.in_flight]))
        capture = self.captures[key]
        capture.in_flight -= 1
        capture.ended_attempts += 1
        self._take(key, self.life.attempt_ended(key))

    @precondition(lambda self: bool(self.captures))
    @rule(data=st.data())
    def window_passes(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.captures)))
        if self.captures[key].kind == "pair" and not self.captures[key].ended_attempts:
            self.captures[key].expired = True
        self._take(key, self.life.expired(key))

    @invariant()
    def finalized_at_most_once(self) -> None:
        for capture in self.captures.values():
            assert len(capture.actions) <= 1

    def teardown(self) -> None:
        for key, capture in self.captures.items():
            while capture.in_flight:
                capture.in_flight -= 1
                capture.ended_attempts += 1
                self._take(key, self.life.attempt_ended(key))
        self.shut = True
        for action in self.life.shutdown():
            self._take(action.key, [action])
        for capture in self.captures.values():
            assert len(capture.actions) == 1, capture
            action = capture.actions[0]
            ended = capture.front_done or capture.ended_attempts
            assert isinstance(action, Finalize) == bool(ended)


LifecycleMachine.TestCase.settings = examples(300, stateful_step_count=30, deadline=None)
TestLifecycle = LifecycleMachine.TestCase


def test_a_pair_given_up_on_takes_no_late_attempt() -> None:
    life = Lifecycle()
    life.open("a", "pair")
    assert life.expired("a") == []
    assert not life.attempt_matched("a")
    assert life.front_ended("a") == [Finalize("a", orphan=True)]
