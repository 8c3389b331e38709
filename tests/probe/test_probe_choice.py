"""The tool-choice probes: each dialect says `none` and a named function in its own terms, the
fake provider obeys them on every route that can say them, and a gateway that drops `none` or
turns a named choice into "required" fails the probe that asks for what the choice ruled out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from probe_helpers import by_name, gateway, probe

from calltap.fakes import (
    anthropic_messages,
    bedrock_anthropic,
    bedrock_converse,
    gemini,
    ollama_chat,
    openai_responses,
)
from calltap.fakes.model import answer
from calltap.fakes.translate import TARGETS
from calltap.probe.probes import PROBES
from calltap.probe.requests import SHAPES

CHOICES = ["choice-none", "choice-named"]
SAYS_NONE = {
    "openai.chat": "none",
    "anthropic.messages": {"type": "none"},
    "openai.responses": "none",
}
SAYS_NAMED = {
    "openai.chat": {"type": "function", "function": {"name": "probe_named"}},
    "anthropic.messages": {"type": "tool", "name": "probe_named"},
    "openai.responses": {"type": "function", "name": "probe_named"},
}
VIEWS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "anthropic": anthropic_messages.chat_view,
    "responses": openai_responses.chat_view,
    "ollama": ollama_chat.chat_view,
    "converse": bedrock_converse.chat_view,
    "gemini": gemini.chat_view,
    "bedrock-invoke": bedrock_anthropic.chat_view,
}
"""How the fake provider reads each dialect the fake gateway translates into."""
CANNOT_SAY_NONE = {"ollama", "converse"}
CANNOT_NAME = {"ollama"}
"""Ollama has no tool choice at all; Bedrock Converse has no "none"."""


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [tool.get("name") or tool["function"]["name"] for tool in body["tools"]]


def _called(request: dict[str, Any]) -> list[str]:
    """The functions the fake model calls for a request in Chat Completions terms."""
    reply = answer(orjson.dumps(request), request, text_events=8)
    return [call["function"]["name"] for call in reply.tool_calls]


@pytest.mark.parametrize("dialect", list(SHAPES))
def test_each_dialect_says_none_and_a_named_function_in_its_own_terms(dialect: str) -> None:
    shape = SHAPES[dialect]
    none = shape.first(PROBES["choice-none"], "gpt-4o-mini")
    named = shape.first(PROBES["choice-named"], "gpt-4o-mini")
    assert none["tool_choice"] == SAYS_NONE[dialect]
    assert _tool_names(none) == ["probe_note"]
    assert named["tool_choice"] == SAYS_NAMED[dialect]
    assert _tool_names(named) == ["probe_asked", "probe_named"]
    assert not none.get("parallel_tool_calls") and not named.get("parallel_tool_calls")


def test_the_prompts_ask_for_what_the_choice_rules_out() -> None:
    assert "Call the function probe_note with" in PROBES["choice-none"].prompt
    named = PROBES["choice-named"].prompt
    assert "Call the function probe_asked with" in named
    assert "probe_named" not in named


def test_the_fake_model_calls_only_the_function_a_named_choice_names() -> None:
    request = SHAPES["openai.chat"].first(PROBES["choice-named"], "gpt-4o-mini")
    assert _called(request) == ["probe_named"]
    assert _called({**request, "tool_choice": "required"}) == ["probe_asked", "probe_named"]
    assert _called({**request, "tool_choice": "none"}) == []
    unknown = {"type": "function", "function": {"name": "probe_missing"}}
    assert _called({**request, "tool_choice": unknown}) == []


@pytest.mark.parametrize("route", list(VIEWS))
def test_every_fake_dialect_obeys_the_choice_it_can_say(route: str) -> None:
    """The probes' Chat requests translated as the fake gateway does, read by the fake provider:
    `none` is obeyed where the dialect can say it, the named function alone is called where it
    can name one."""
    calls = {}
    for name in CHOICES:
        chat = SHAPES["openai.chat"].first(PROBES[name], "gpt-4o-mini")
        calls[name] = _called(VIEWS[route](TARGETS[route].request(chat)))
    assert calls["choice-none"] == (["probe_note"] if route in CANNOT_SAY_NONE else [])
    assert calls["choice-named"] == (
        ["probe_asked", "probe_named"] if route in CANNOT_NAME else ["probe_named"]
    )


@pytest.mark.parametrize("dialect", list(SHAPES))
async def test_the_choice_probes_pass_through_a_faithful_gateway(dialect: str) -> None:
    async with gateway() as url:
        outcomes = by_name(await probe(url, CHOICES, dialect=dialect))
    assert {name: o.reason for name, o in outcomes.items() if not o.passed} == {}
    assert outcomes["choice-none"].received["text"]
    assert "calls" not in outcomes["choice-none"].received
    assert [call["name"] for call in outcomes["choice-named"].received] == ["probe_named"]


@pytest.mark.parametrize("dialect", ["openai.chat", "openai.responses"])
async def test_a_dropped_none_choice_fails_choice_none_only(dialect: str) -> None:
    async with gateway("drop-none-choice") as url:
        outcomes = by_name(await probe(url, dialect=dialect))
    failed = {name: o.reason for name, o in outcomes.items() if not o.passed}
    assert set(failed) == {"choice-none", "round-trip"}, failed
    assert "1 tool call(s) (probe_note) instead of an answer" in failed["choice-none"]
    assert ", not stop" in failed["choice-none"]  # Responses says 'completed' after calls
    assert [call["name"] for call in outcomes["choice-none"].received["calls"]] == ["probe_note"]
    assert "1 tool call(s) (probe_lookup) instead of an answer" in failed["round-trip"]


@pytest.mark.parametrize("dialect", ["openai.chat", "openai.responses"])
async def test_a_named_choice_sent_as_required_fails_choice_named_only(dialect: str) -> None:
    async with gateway("named-choice-required") as url:
        outcomes = by_name(await probe(url, dialect=dialect))
    failed = {name: o.reason for name, o in outcomes.items() if not o.passed}
    assert list(failed) == ["choice-named"]
    assert failed["choice-named"] == (
        "2 call(s), expected 1; a call of 'probe_asked', not the function the tool choice named"
    )
