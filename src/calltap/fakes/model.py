"""What the fake model says to a request, before any dialect frames it as a stream or a body.

The answer depends on the request body and the options alone, so the same request always gets the
same bytes:
- `tools` offered (and `tool_choice` not "none"): one parallel call per tool, arguments built from
  each tool's parameter schema (`city` -> "Taipei", `zone` -> "UTC", ...) and split into fragments
  the way a tokenizer would cut them; finish_reason `tool_calls`. A `tool_choice` naming a function
  (`{"type": "function", "function": {"name": …}}`) gets one call of that function alone, as a real
  provider forces it.
- otherwise a plain text answer in `text_events` pieces; finish_reason `stop`, cut short by a
  `stop` sequence (the sequence itself is never sent), or `length` when `max_tokens` is smaller.

The request is read in Chat Completions terms (`tools[].function`, `stop`, `max_tokens`); the other
dialects of the fake provider first map their request onto those terms, so the same question asked
in any dialect gets the same tool calls with the same arguments. Ids derive from the body's sha256.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import orjson

CREATED = 1764460800
"""A fixed `created` (2025-11-30T00:00:00Z): the same request always gets the same bytes."""
DEFAULT_MODEL = "gpt-4o-mini"
WORDS = (
    "calltap", "records", "both", "legs", "of", "every", "request", "and", "compares", "them",
    "by", "meaning:", "tool", "calls,", "arguments,", "finish", "reasons,", "text", "and", "usage.",
)  # fmt: skip
SAMPLE_STRINGS = {
    "city": "Taipei",
    "location": "Taipei, Taiwan",
    "zone": "UTC",
    "timezone": "UTC",
    "unit": "celsius",
    "query": "parallel tool calls",
    "language": "en",
}
SAMPLE_BY_TYPE: dict[str, Any] = {
    "integer": 3,
    "number": 21.5,
    "boolean": True,
    "array": [],
    "object": {},
    "null": None,
}
_TOKEN = re.compile(r"\w+|\W+")


@dataclass(frozen=True, slots=True)
class Answer:
    """What the fake model says to one request, before it is framed as a stream or a body."""

    id: str
    model: str
    deltas: list[dict[str, Any]]
    """Streamed deltas in order; the first carries the role."""
    content: str | None
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    usage: dict[str, Any]


def sample_arguments(parameters: Any, *, follow_const: bool = True) -> dict[str, Any]:
    """Plausible arguments for a JSON-schema `parameters` object: one value per property, the
    schema's own value where it states one with `const` (unless `follow_const` is False)."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    if not isinstance(properties, dict):
        return {}
    arguments: dict[str, Any] = {}
    for name, schema in properties.items():
        schema = schema if isinstance(schema, dict) else {}
        enum = schema.get("enum")
        if follow_const and states_const(schema):
            arguments[name] = schema_value(schema)
        elif isinstance(enum, list) and enum:
            arguments[name] = enum[0]
        elif schema.get("type", "string") == "string":
            arguments[name] = SAMPLE_STRINGS.get(name, f"{name}-1")
        else:
            arguments[name] = SAMPLE_BY_TYPE.get(schema.get("type"))
    return arguments


def states_const(schema: Any) -> bool:
    """Whether a schema, or a property of it at any depth, states its value with `const`."""
    if not isinstance(schema, dict):
        return False
    if "const" in schema:
        return True
    properties = schema.get("properties")
    return isinstance(properties, dict) and any(map(states_const, properties.values()))


def schema_value(schema: dict[str, Any]) -> Any:
    """The value a schema-following model writes for a schema that states (part of) it: `const`
    itself, an object built property by property, the sample value for the rest."""
    if "const" in schema:
        return schema["const"]
    return sample_arguments(schema)


def fragments(text: str) -> list[str]:
    """Cut argument text where a tokenizer would: words and runs of punctuation apart."""
    return _TOKEN.findall(text) or [text]


def offered_functions(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The `function` objects the model may call: the request's tools, none when `tool_choice`
    is "none", only the named one when it names a function (none if no tool has that name)."""
    tools = request.get("tools")
    choice = request.get("tool_choice")
    if not isinstance(tools, list) or choice == "none":
        return []
    named = named_function(choice)
    return [
        tool["function"]
        for tool in tools
        if isinstance(tool, dict)
        and isinstance(tool.get("function"), dict)
        and isinstance(tool["function"].get("name"), str)
        and named in (None, tool["function"]["name"])
    ]


def named_function(choice: Any) -> str | None:
    """The function a Chat Completions `tool_choice` names; None for a mode or anything else."""
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _tool_answer(
    digest: str, functions: list[dict[str, Any]], follow_const: bool
) -> tuple[list, list, int]:
    """Interleaved deltas of one parallel call per function, the whole calls, the token count."""
    calls: list[dict[str, Any]] = []
    pieces: list[list[str]] = []
    for index, function in enumerate(functions):
        values = sample_arguments(function.get("parameters"), follow_const=follow_const)
        arguments = orjson.dumps(values).decode()
        call_id = "call_" + hashlib.sha256(f"{digest}:{index}".encode()).hexdigest()[:24]
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
        pieces.append(fragments(arguments))
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        header = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        deltas.append({"tool_calls": [header]})
    for round_ in range(max(len(parts) for parts in pieces)):
        for index, parts in enumerate(pieces):
            if round_ < len(parts):
                fragment = {"index": index, "function": {"arguments": parts[round_]}}
                deltas.append({"tool_calls": [fragment]})
    deltas[0] = {"role": "assistant", "content": None, **deltas[0], "refusal": None}
    return deltas, calls, sum(len(parts) for parts in pieces)


def _text_answer(digest: str, request: dict[str, Any], text_events: int) -> tuple[list, str, str]:
    """Text deltas, the whole text and the finish reason, honouring `stop` and `max_tokens`."""
    count, finish_reason = text_events, "stop"
    limit = request.get("max_completion_tokens", request.get("max_tokens"))
    if request.get("stop"):
        count = max(1, text_events // 2)
    elif isinstance(limit, int) and 0 < limit < text_events:
        count, finish_reason = limit, "length"
    start = int(digest[:8], 16) % len(WORDS)
    tokens = [WORDS[(start + n) % len(WORDS)] for n in range(count)]
    result = tool_result(request)
    if result is not None:
        tokens, finish_reason = ["The", "tool", "answered:", *result.split(" ")], "stop"
    tokens = [tokens[0], *(" " + token for token in tokens[1:])]
    deltas = [{"role": "assistant", "content": "", "refusal": None}]
    deltas += [{"content": token} for token in tokens]
    return deltas, "".join(tokens), finish_reason


def tool_result(request: dict[str, Any]) -> str | None:
    """The content of the conversation's last message when it is a tool result, in Chat
    Completions terms (`{"role": "tool", "content": "..."}`); None otherwise."""
    messages = request.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if isinstance(last, dict) and last.get("role") == "tool":
        content = last.get("content")
        return content if isinstance(content, str) and content else None
    return None


def answer(
    body: bytes, request: dict[str, Any], *, text_events: int, follow_const: bool = True
) -> Answer:
    """The deterministic answer to one request body (already decoded as `request`)."""
    digest = hashlib.sha256(body).hexdigest()
    model = request.get("model") if isinstance(request.get("model"), str) else DEFAULT_MODEL
    prompt_tokens = max(1, len(body) // 4)
    functions = offered_functions(request)
    if functions:
        deltas, calls, completion_tokens = _tool_answer(digest, functions, follow_const)
        content, finish_reason = None, "tool_calls"
    else:
        deltas, content, finish_reason = _text_answer(digest, request, text_events)
        calls, completion_tokens = [], len(deltas) - 1
    return Answer(
        id="chatcmpl-" + digest[:24],
        model=model,
        deltas=deltas,
        content=content,
        tool_calls=calls,
        finish_reason=finish_reason,
        usage=_usage(prompt_tokens, completion_tokens),
    )
