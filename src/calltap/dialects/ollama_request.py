"""The Ollama request side: an `/api/chat` body to an `Ask`.

- `system` messages are the instructions, wherever they stand (Ollama lower-cases a role, so
  `System` is one too);
- a `user` message is a user turn: its `content` text, then its `images` (base64, compared by
  the digest of their bytes);
- an `assistant` message is an assistant turn: its text and images, its `tool_calls` (whole
  calls, `function.arguments` an object; the call's `id`, which newer releases send), and its
  `thinking`, reasoning without a signature;
- a `tool` message is a tool result in a user turn, linked by `tool_call_id` when the client sent
  one (newer releases) and named by `tool_name`; Ollama has no error flag;
- `tools` in the Chat Completions shape (Ollama has no `strict`: none is read); `format`
  (`"json"` or a JSON schema); `options`: `temperature`, `top_p`, `top_k`, `seed`,
  `frequency_penalty`, `presence_penalty`, `num_predict` (a negative one is no limit: absent),
  `stop`; `think` (a boolean, or a level: thinking on at that effort); `stream`, which is true
  when absent (Ollama streams by default). Usage counts are in every answer.

What Ollama can carry (CARRIES): no tool choice at all, no limit on parallel calls, no `strict`,
no thinking budget, no signature on thinking, images only (no audio, document or file), nothing
but text in a tool result. Its tool schemas are what its `api.ToolFunctionParameters` and
`api.ToolProperty` hold (`type`, `properties`, `required`, `items`, `enum`, `anyOf`,
`description`, `$defs`): Ollama drops every other keyword as it reads the request (SCHEMA_LACKS;
`const` is left out, since a gateway may write it as the one-value `enum` Ollama keeps).
"""

from __future__ import annotations

from typing import Any

from calltap.ask import (
    SAMPLING_KEYS,
    Ask,
    HistoryCall,
    Reasoning,
    ReasoningSettings,
    ResponseFormat,
    Tool,
    ToolResult,
    Turn,
)
from calltap.dialects.request_common import (
    RequestUnreadable,
    arguments_key,
    inline_media,
    listed,
    need,
    optional_int,
    sampling,
    stop_sequences,
    text,
    tool,
)
from calltap.schemas import normalize, schema_key

NAME = "ollama.chat"
CARRIES = frozenset({
    *(f"sampling.{key}" for key in SAMPLING_KEYS), "max_output_tokens", "stop",
    "response_format", "reasoning.effort", "reasoning.thinking", "history.reasoning",
    "media.image",
})
SCHEMA_LACKS = frozenset({
    "additionalProperties", "patternProperties", "propertyNames", "unevaluatedProperties",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
    "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems", "contains",
    "minContains", "maxContains", "prefixItems", "additionalItems", "unevaluatedItems", "oneOf",
    "allOf", "not", "if", "then", "else",
})
REQUIRES: frozenset[str] = frozenset()
SAMPLING_NAMES = {key: key for key in SAMPLING_KEYS}


def ask(request: dict[str, Any], path: str = "") -> Ask:
    """An Ollama `/api/chat` request body, reduced to what it asks."""
    model = request.get("model")
    result = Ask(dialect=NAME, model=model if isinstance(model, str) else None)
    for message in need(request.get("messages"), list, "messages"):
        _message(need(message, dict, "a message"), result)
    result.tools = [_tool(need(item, dict, "a tool")) for item in listed(request.get("tools"),
                                                                           "tools")]
    result.response_format = _format(request.get("format"))
    options = request.get("options")
    options = {} if options is None else need(options, dict, "options")
    result.sampling = sampling(options, SAMPLING_NAMES)
    limit = optional_int(options.get("num_predict"), "num_predict")
    result.max_output_tokens = None if limit is None or limit < 0 else limit
    result.stop = stop_sequences(options.get("stop"))
    result.reasoning = _think(request.get("think"))
    stream = request.get("stream")
    result.stream = True if stream is None else need(stream, bool, "stream")
    result.usage_requested = True
    return result


def _message(message: dict[str, Any], result: Ask) -> None:
    role = need(message.get("role"), str, "a message's role").lower()
    content = message.get("content")
    parts = [] if content is None or content == "" else [text(need(content, str, "content"))]
    parts += [inline_media("image", image) for image in listed(message.get("images"), "images")]
    if role == "system":
        result.instructions.extend(parts)
    elif role == "user":
        result.turns.append(Turn("user", parts=parts))
    elif role == "assistant":
        turn = Turn("assistant", parts=parts)
        for call in listed(message.get("tool_calls"), "tool_calls"):
            turn.calls.append(_call(need(call, dict, "a tool call")))
        thinking = message.get("thinking")
        if isinstance(thinking, str) and thinking:
            turn.reasoning.append(Reasoning(thinking, signed=False))
        result.turns.append(turn)
    elif role == "tool":
        call_id, name = message.get("tool_call_id"), message.get("tool_name")
        outcome = ToolResult(call_id if isinstance(call_id, str) and call_id else None,
                             name if isinstance(name, str) and name else None, tuple(parts), None)
        result.turns.append(Turn("user", results=[outcome]))
    else:
        raise RequestUnreadable(f"a message of role {role!r}")


def _call(call: dict[str, Any]) -> HistoryCall:
    function = need(call.get("function"), dict, "a call's function")
    arguments = function.get("arguments")
    call_id = call.get("id")
    return HistoryCall(need(function.get("name"), str, "a call's name"), arguments_key(arguments),
                       call_id if isinstance(call_id, str) and call_id else None, arguments)


def _tool(item: dict[str, Any]) -> Tool:
    function = item.get("function")
    if not isinstance(function, dict):
        return tool(str(item.get("type")), None, None, None)
    return tool(function.get("name"), function.get("description"), function.get("parameters"),
                None)


def _format(value: Any) -> ResponseFormat | None:
    """`format`: `"json"` for any JSON, or a JSON schema the answer must follow."""
    if value is None or value == "":
        return None
    if value == "json":
        return ResponseFormat("json_object")
    normalized = normalize(need(value, dict, "format"))
    return ResponseFormat("json_schema", normalized, schema_key(normalized))


def _think(value: Any) -> ReasoningSettings:
    """`think`: thinking on or off, or a level (`low`, `medium`, `high`, `max`), which turns it
    on."""
    if value is None:
        return ReasoningSettings()
    if isinstance(value, bool):
        return ReasoningSettings(thinking=value)
    return ReasoningSettings(effort=need(value, str, "think"), thinking=True)
