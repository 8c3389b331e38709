"""The bodies a probe sends, in each dialect a gateway may serve: Chat Completions (the default),
Anthropic Messages and OpenAI Responses.

Sans-IO: a probe and a model in, a path and a JSON body out. The first turn offers the probe's
functions with their strict `const` schemas and forces the one named function (several functions:
any call is required, in parallel); `choice-none` says `none` and `choice-named` names its last
function, each in the dialect's own terms (Chat `"none"` and `{"type": "function", "function":
{"name": …}}`, Messages `{"type": "none"}` and `{"type": "tool", "name": …}`, Responses `"none"`
and `{"type": "function", "name": …}`). The second turn of `round-trip` replays the validated call
as the assistant's turn, answers it with the fixed local result, and asks for text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from calltap.probe.probes import ROUND_TRIP_RESULT, Function, Probe

MAX_TOKENS = 1024


@dataclass(frozen=True, slots=True)
class Call:
    """The validated call `round-trip` replays: its id, name and argument text as received."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Shape:
    """How one dialect asks: its endpoint, the first turn and the turn after a call."""

    name: str
    path: str
    first: Callable[[Probe, str], dict[str, Any]]
    second: Callable[[Probe, str, Call], dict[str, Any]]


def _chat_tool(function: Function) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": function.name,
            "description": function.description,
            "parameters": function.parameters,
            "strict": True,
        },
    }


def _chat_choice(probe: Probe) -> Any:
    forced = probe.forced
    if probe.forbids:
        return "none"
    return {"type": "function", "function": {"name": forced.name}} if forced else "required"


def _chat_first(probe: Probe, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": probe.prompt}],
        "tools": [_chat_tool(function) for function in probe.functions],
        "tool_choice": _chat_choice(probe),
        "parallel_tool_calls": probe.parallel,
        "temperature": 0,
        "stream": probe.stream,
    }
    return body


def _chat_second(probe: Probe, model: str, call: Call) -> dict[str, Any]:
    body = _chat_first(probe, model)
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": call.id, "content": ROUND_TRIP_RESULT}
    body["messages"] = [*body["messages"], assistant, result]
    body["tool_choice"] = "none"
    return body


def _messages_choice(probe: Probe) -> dict[str, Any]:
    forced = probe.forced
    if probe.forbids:
        return {"type": "none"}
    if forced:
        return {"type": "tool", "name": forced.name}
    return {"type": "any", "disable_parallel_tool_use": False}


def _messages_first(probe: Probe, model: str) -> dict[str, Any]:
    tools = [
        {
            "name": function.name,
            "description": function.description,
            "input_schema": function.parameters,
            "strict": True,
        }
        for function in probe.functions
    ]
    return {
        "model": model,
        "max_tokens": MAX_TOKENS,
        "messages": [{"role": "user", "content": probe.prompt}],
        "tools": tools,
        "tool_choice": _messages_choice(probe),
        "temperature": 0,
        "stream": probe.stream,
    }


def _messages_second(probe: Probe, model: str, call: Call) -> dict[str, Any]:
    body = _messages_first(probe, model)
    use = {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)}
    result = {"type": "tool_result", "tool_use_id": call.id, "content": ROUND_TRIP_RESULT}
    body["messages"] = [
        *body["messages"],
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]
    body["tool_choice"] = {"type": "none"}
    return body


def _input(call: Call) -> Any:
    """A validated call's arguments as the object Messages wants (they decoded strictly)."""
    return orjson.loads(call.arguments) if call.arguments.strip() else {}


def _responses_choice(probe: Probe) -> Any:
    forced = probe.forced
    if probe.forbids:
        return "none"
    return {"type": "function", "name": forced.name} if forced else "required"


def _responses_first(probe: Probe, model: str) -> dict[str, Any]:
    tools = [
        {
            "type": "function",
            "name": function.name,
            "description": function.description,
            "parameters": function.parameters,
            "strict": True,
        }
        for function in probe.functions
    ]
    return {
        "model": model,
        "input": [{"role": "user", "content": probe.prompt}],
        "tools": tools,
        "tool_choice": _responses_choice(probe),
        "parallel_tool_calls": probe.parallel,
        "temperature": 0,
        "stream": probe.stream,
    }


def _responses_second(probe: Probe, model: str, call: Call) -> dict[str, Any]:
    body = _responses_first(probe, model)
    replayed = {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    }
    output = {"type": "function_call_output", "call_id": call.id, "output": ROUND_TRIP_RESULT}
    body["input"] = [*body["input"], replayed, output]
    body["tool_choice"] = "none"
    return body


SHAPES: dict[str, Shape] = {
    shape.name: shape
    for shape in (
        Shape("openai.chat", "/v1/chat/completions", _chat_first, _chat_second),
        Shape("anthropic.messages", "/v1/messages", _messages_first, _messages_second),
        Shape("openai.responses", "/v1/responses", _responses_first, _responses_second),
    )
}
"""The dialects a probe can speak, by calltap's dialect name."""


def endpoint(base_url: str, shape: Shape) -> str:
    """The URL of a dialect's endpoint under a base URL given with or without its `/v1`."""
    base = base_url.rstrip("/")
    path = shape.path.removeprefix("/v1") if base.endswith("/v1") else shape.path
    return base + path
