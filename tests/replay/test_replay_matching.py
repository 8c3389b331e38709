"""The cassette matches a gateway's requests by meaning, attempt by attempt, and says why when it
cannot."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from calltap.fakes.provider import TOOLS_REQUEST
from calltap.replay.cassette import Answer, Timing
from calltap.replay.matching import Miss, Player

CHAT = "/v1/chat/completions"


def attempt(number: int, request: dict[str, Any] | None = TOOLS_REQUEST, path: str = CHAT,
            method: str = "POST") -> Answer:
    body = None if request is None else orjson.dumps(request)
    return Answer(number, method, path, body, 200, (), b"data: [DONE]\n\n", Timing(),
                  "complete", None)


def reordered(value: Any, reverse: bool) -> Any:
    if isinstance(value, dict):
        items = sorted(value.items(), reverse=reverse)
        return {key: reordered(item, reverse) for key, item in items}
    if isinstance(value, list):
        return [reordered(item, reverse) for item in value]
    return value


EXTRA_FIELDS = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda key: key not in TOOLS_REQUEST),
    st.one_of(st.none(), st.integers(-(2**53), 2**53), st.text(max_size=8), st.booleans()),
    max_size=4)


@given(extra=EXTRA_FIELDS, reverse=st.booleans(), indent=st.booleans())
def test_a_request_matches_whatever_fields_a_gateway_adds_and_however_it_orders_keys(
        extra, reverse, indent):
    player = Player((attempt(1),))
    request = reordered({**TOOLS_REQUEST, **extra}, reverse)
    body = orjson.dumps(request, option=orjson.OPT_INDENT_2 if indent else 0)
    assert player.answer("POST", CHAT, body) == attempt(1)
    assert player.misses == [] and player.unplayed == 0


def test_attempts_are_served_in_the_order_the_gateway_made_them():
    player = Player((attempt(1), attempt(2)))
    body = orjson.dumps(TOOLS_REQUEST)
    assert [player.answer("POST", CHAT, body).attempt for _ in range(2)] == [1, 2]
    assert player.answer("POST", CHAT, body) == Miss(
        "POST", CHAT, "request 3, but the cassette holds 2 attempts")


def test_another_conversation_is_a_miss():
    player = Player((attempt(1),))
    other = {**TOOLS_REQUEST, "messages": [{"role": "user", "content": "Something else"}]}
    found = player.answer("POST", CHAT, orjson.dumps(other))
    assert found == Miss("POST", CHAT, "the conversation's last turn differs from attempt 1's")
    assert player.misses == [found] and player.unplayed == 1


OFFERS = st.fixed_dictionaries({}, optional={
    "tools": st.lists(st.sampled_from(TOOLS_REQUEST["tools"]), unique_by=lambda tool: tool[
        "function"]["name"]),
    "tool_choice": st.sampled_from(["auto", "none", "required"]),
    "temperature": st.sampled_from([0, 0.5, 1]),
    "top_p": st.floats(0, 1),
})


@given(offers=OFFERS)
def test_what_a_request_offers_and_how_it_samples_does_not_change_the_question(offers):
    """A request-side divergence fixed (a tool no longer dropped, the tool choice or temperature
    sent as asked) still asks the recorded question, so the recorded answer is served."""
    player = Player((attempt(1),))
    request = {key: value for key, value in TOOLS_REQUEST.items()
               if key not in ("tools", "tool_choice", "temperature", "top_p")}
    assert player.answer("POST", CHAT, orjson.dumps({**request, **offers})) == attempt(1)


def test_an_earlier_turn_dropped_or_added_still_asks_the_last_turn():
    player = Player((attempt(1),))
    earlier = [{"role": "user", "content": "Earlier"}, {"role": "assistant", "content": "Yes"}]
    longer = {**TOOLS_REQUEST, "messages": [*earlier, *TOOLS_REQUEST["messages"]]}
    assert player.answer("POST", CHAT, orjson.dumps(longer)) == attempt(1)


def test_another_last_turn_after_the_same_history_is_a_miss():
    player = Player((attempt(1),))
    more = {**TOOLS_REQUEST, "messages": [*TOOLS_REQUEST["messages"],
                                          {"role": "assistant", "content": "Sure"},
                                          {"role": "user", "content": "And tomorrow?"}]}
    assert isinstance(player.answer("POST", CHAT, orjson.dumps(more)), Miss)


def test_another_chat_endpoint_is_a_miss_that_names_the_recorded_one():
    player = Player((attempt(1),))
    found = player.answer("POST", "/v1/messages", orjson.dumps(TOOLS_REQUEST))
    assert str(found) == ("POST /v1/messages: attempt 1 was recorded as POST"
                          " /v1/chat/completions")


def test_side_requests_are_not_misses_and_leave_the_cassette_where_it_was():
    player = Player((attempt(1),))
    assert player.answer("GET", "/v1/models", b"") is None
    assert player.answer("POST", CHAT, orjson.dumps(TOOLS_REQUEST)) == attempt(1)
    assert player.answer("GET", "/health", b"") is None
    assert player.side_requests == ["GET /v1/models", "GET /health"]
    assert player.misses == []


def test_an_attempt_recorded_without_its_request_body_matches_by_method_and_path():
    player = Player((attempt(1, request=None),))
    assert player.answer("POST", CHAT, b"not even json") == attempt(1, request=None)
