"""When a recording is finalized: the pair lifecycle as a pure state machine.

No I/O, no clock, no asyncio: the pairing addon (`proxy/pairs.py`) tells it what happened to a
capture's legs and executes the actions it answers with, so every interleaving of legs starting,
ending, expiring and shutting down can be tested without a socket.

A capture is finalized (`Finalize`) exactly once, when nothing more can arrive for it:
- a `pair` once its front (downstream) leg has ended and no upstream attempt is in flight, and
  either an attempt has ended or the pairing book gave up waiting for one (then it is an orphan);
- a `single` or `other` recording as soon as its one leg has ended;
- on shutdown, every capture as it stands (a pair without any attempt as an orphan); a capture
  none of whose legs ended is dropped (`Discard`): nothing of it was recorded whole.
An attempt is accepted only by an open pair that is neither being finalized nor given up on
(expired): a late retry becomes a capture of its own, as the pairing book, which forgets an
expired front leg, would have it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["pair", "single", "other"]
"""A `pair`: a compared front leg and its upstream attempts. A `single`: one leg checked on its
own (single-leg mode, an orphaned back attempt, a front leg whose body was refused). An `other`
request is recorded and never compared."""


@dataclass(frozen=True, slots=True)
class Finalize:
    key: str
    orphan: bool


@dataclass(frozen=True, slots=True)
class Discard:
    key: str


Action = Finalize | Discard


@dataclass(slots=True)
class _State:
    kind: Kind
    orphan: bool
    front_done: bool = False
    in_flight: int = 0
    attempt_ended: bool = False
    leg_ended: bool = False
    closing: bool = field(default=False)


class Lifecycle:
    """Every open capture's state, by key."""

    def __init__(self) -> None:
        self._states: dict[str, _State] = {}

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: str) -> bool:
        return key in self._states

    def open(self, key: str, kind: Kind, *, orphan: bool = False) -> None:
        """A capture starts with its first leg (a front leg, or a back attempt of its own)."""
        self._states[key] = _State(kind, orphan)

    def attempt_matched(self, key: str) -> bool:
        """Whether the open pair `key` takes one more upstream attempt (then in flight)."""
        state = self._states.get(key)
        if state is None or state.closing or state.orphan or state.kind != "pair":
            return False
        state.in_flight += 1
        return True

    def front_ended(self, key: str) -> list[Action]:
        state = self._states.get(key)
        if state is None:
            return []
        state.front_done = True
        state.leg_ended = True
        return self._maybe_finalize(key, state)

    def attempt_ended(self, key: str) -> list[Action]:
        state = self._states.get(key)
        if state is None:
            return []
        state.in_flight -= 1
        state.attempt_ended = state.leg_ended = True
        return self._maybe_finalize(key, state)

    def single_ended(self, key: str) -> list[Action]:
        """The one leg of a capture checked alone ended."""
        state = self._states.get(key)
        if state is None or state.closing:
            return []
        return self._finalize(key, state)

    def expired(self, key: str) -> list[Action]:
        """The pairing book gave up on front leg `key`: no attempt came within the window."""
        state = self._states.get(key)
        if state is None or state.closing or state.attempt_ended or state.in_flight:
            return []
        state.orphan = True
        return self._finalize(key, state) if state.front_done else []

    def shutdown(self) -> list[Action]:
        """Once no leg is in flight: finalize every capture as it stands."""
        actions: list[Action] = []
        for key, state in list(self._states.items()):
            if state.closing:
                continue
            if state.kind == "pair" and not state.attempt_ended:
                state.orphan = True
            if state.leg_ended:
                actions.extend(self._finalize(key, state))
            else:
                del self._states[key]
                actions.append(Discard(key))
        return actions

    def finalized(self, key: str) -> None:
        """The capture's finalization is over: forget it."""
        self._states.pop(key, None)

    def _maybe_finalize(self, key: str, state: _State) -> list[Action]:
        if state.closing or not state.front_done or state.in_flight:
            return []
        if state.kind != "pair" or state.attempt_ended or state.orphan:
            return self._finalize(key, state)
        return []

    @staticmethod
    def _finalize(key: str, state: _State) -> list[Action]:
        state.closing = True
        return [Finalize(key, state.orphan)]
