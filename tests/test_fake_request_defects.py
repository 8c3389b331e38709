"""The fake gateway's request defects: each changes exactly what its bug report says, calltap's
request comparison names it with the defect's code, and the gateway sends the changed request."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from calltap.codes import Code
from calltap.compare_requests import compare_requests
from calltap.dialects.asks import read_ask
from calltap.fakes import DEFECT_HEADER, DEFECTS, FakeGateway, FakeProvider
from calltap.fakes.conversation import (
    CONVERSATION_REQUEST,
    MESSAGES_CONVERSATION_REQUEST,
    NONE_CHOICE_CONVERSATION_REQUEST,
)
from calltap.fakes.defects import Request, defect_named
from calltap.fakes.provider import CHAT_PATH, MESSAGES_PATH
from fake_helpers import post

REQUEST_DEFECTS = [name for name, defect in DEFECTS.items() if defect.request is not None]
ON_MESSAGES = {"drop-result-image"}
"""The defects written for the Anthropic Messages conversation (an image in a tool result)."""
ON_NONE_CHOICE = {"drop-none-choice"}
"""The defects written for the conversation that says `tool_choice: "none"`."""


def sent_with(name: str) -> tuple[dict[str, Any], str]:
    """The request a defect's expectations are written for, and its path."""
    if name in ON_MESSAGES:
        return MESSAGES_CONVERSATION_REQUEST, MESSAGES_PATH
    if name in ON_NONE_CHOICE:
        return NONE_CHOICE_CONVERSATION_REQUEST, CHAT_PATH
    return CONVERSATION_REQUEST, CHAT_PATH


def codes(client: Request, provider: Request, path: str) -> tuple[str, set[str]]:
    """The request comparison's verdict and codes for the client's and the provider's bodies."""
    compared = compare_requests(read_ask(orjson.dumps(client), path),
                                read_ask(orjson.dumps(provider), path))
    return compared.verdict, {finding.code.value for finding in compared.findings}


def test_the_request_defects_are_the_six_bug_classes():
    assert REQUEST_DEFECTS == ["drop-tool", "named-choice-required", "drop-none-choice",
                               "drop-result-image", "drop-zero-temperature", "drop-schema-enum"]


@pytest.mark.parametrize("name", REQUEST_DEFECTS)
def test_the_conversation_relayed_as_it_came_compares_equal(name):
    request, path = sent_with(name)
    assert codes(request, copy.deepcopy(request), path) == ("equal", set())


@pytest.mark.parametrize("name", REQUEST_DEFECTS)
def test_a_request_defect_is_named_by_its_code_and_nothing_else(name):
    defect = DEFECTS[name]
    request, path = sent_with(name)
    before = copy.deepcopy(request)
    changed = defect.request(request)
    assert request == before, "the transform must not change the client's body"
    assert codes(request, changed, path) == ("diverged", {code.value for code in defect.codes})


def test_drop_tool_leaves_the_last_tool_out():
    changed = DEFECTS["drop-tool"].request(CONVERSATION_REQUEST)
    assert changed["tools"] == CONVERSATION_REQUEST["tools"][:1]
    assert {key: value for key, value in changed.items() if key != "tools"} == {
        key: value for key, value in CONVERSATION_REQUEST.items() if key != "tools"}


def test_named_choice_required_forgets_the_name():
    changed = DEFECTS["named-choice-required"].request(CONVERSATION_REQUEST)
    assert CONVERSATION_REQUEST["tool_choice"] == {"type": "function",
                                                   "function": {"name": "weather"}}
    assert changed == {**CONVERSATION_REQUEST, "tool_choice": "required"}


def test_named_choice_required_leaves_a_mode_alone():
    request = {**CONVERSATION_REQUEST, "tool_choice": "auto"}
    assert DEFECTS["named-choice-required"].request(request) == request


def test_drop_none_choice_leaves_the_forbidding_choice_out():
    changed = DEFECTS["drop-none-choice"].request(NONE_CHOICE_CONVERSATION_REQUEST)
    assert NONE_CHOICE_CONVERSATION_REQUEST["tool_choice"] == "none"
    assert changed == {key: value for key, value in CONVERSATION_REQUEST.items()
                       if key != "tool_choice"}


@pytest.mark.parametrize("choice", ["auto", "required", {"type": "function",
                                                          "function": {"name": "weather"}}])
def test_drop_none_choice_leaves_another_choice_alone(choice):
    request = {**CONVERSATION_REQUEST, "tool_choice": choice}
    assert DEFECTS["drop-none-choice"].request(request) == request


def test_defects_joined_by_commas_are_one_gateway_with_all_their_bugs():
    both = defect_named("named-choice-required,drop-none-choice")
    assert both.name == "named-choice-required,drop-none-choice"
    assert both.codes == {Code.TOOL_CHOICE_CHANGED} and both.verdict == "diverged"
    assert both.request(CONVERSATION_REQUEST)["tool_choice"] == "required"
    assert "tool_choice" not in both.request(NONE_CHOICE_CONVERSATION_REQUEST)
    values = defect_named("change-two-values,drop-none-choice")
    assert values.transform is DEFECTS["change-two-values"].transform
    with pytest.raises(ValueError, match="at most one"):
        defect_named("change-two-values,drop-second-call")
    with pytest.raises(KeyError):
        defect_named("drop-none-choice,no-such-defect")


def test_drop_result_image_keeps_the_results_text():
    changed = DEFECTS["drop-result-image"].request(MESSAGES_CONVERSATION_REQUEST)
    (result,) = changed["messages"][-1]["content"]
    assert result["content"] == [{"type": "text", "text": "Radar for Taipei, 12:00 UTC"}]
    assert changed["messages"][:-1] == MESSAGES_CONVERSATION_REQUEST["messages"][:-1]


def test_drop_zero_temperature_drops_zeros_only():
    request = {**CONVERSATION_REQUEST, "top_p": 0.5, "seed": 0}
    changed = DEFECTS["drop-zero-temperature"].request(request)
    assert "temperature" not in changed and "seed" not in changed
    assert changed["top_p"] == 0.5
    assert {**changed, "temperature": 0, "seed": 0} == request


def test_drop_schema_enum_keeps_the_rest_of_the_schema():
    changed = DEFECTS["drop-schema-enum"].request(CONVERSATION_REQUEST)
    weather = changed["tools"][0]["function"]["parameters"]
    assert weather["properties"]["unit"] == {"type": "string"}
    assert weather["required"] == ["city"]
    assert changed["tools"][1] == CONVERSATION_REQUEST["tools"][1]


@pytest.fixture
async def gateway(provider: FakeProvider) -> AsyncIterator[FakeGateway]:
    async with FakeGateway(provider.url) as gateway:
        yield gateway


@pytest.mark.parametrize("name", REQUEST_DEFECTS)
async def test_the_gateway_sends_the_changed_request_and_relays_the_answer(
    provider, gateway, client, name
):
    request, path = sent_with(name)
    reply, body = await post(client, gateway.url + path, request,
                             **{DEFECT_HEADER: name, "X-Request-ID": name})
    assert reply.status == 200
    exchange = provider.exchange_for(name)
    assert orjson.loads(exchange.request_body) == DEFECTS[name].request(request)
    assert body == bytes(exchange.response_body)
