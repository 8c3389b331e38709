"""The Chat Completions request side: a `/v1/chat/completions` body to an `Ask`.

- `system` and `developer` messages are the instructions, wherever they stand;
- a `user` message is a user turn: text parts, `image_url`, `input_audio` and `file` parts;
- an `assistant` message is an assistant turn: its text (and `refusal`), its `tool_calls` (and
  the legacy `function_call`), and the reasoning OpenAI-compatible servers and gateways accept
  back in history: `reasoning_content` (unsigned text) and LiteLLM's `thinking_blocks`
  (`thinking` with its `signature`, `redacted_thinking`);
- a `tool` message is a tool result in a user turn, linked by `tool_call_id`; a legacy
  `function` message one linked by `name` (an id or a name that is not a string links nothing);
- `tools[].function` and the legacy `functions`; `tool_choice` (and the legacy
  `function_call`) on the Ask's scale; `parallel_tool_calls`; `response_format`;
  `max_completion_tokens` (else `max_tokens`); `stop`; sampling, with the `top_k` that
  OpenAI-compatible servers take; `reasoning_effort`, and the `thinking` object gateways such as
  LiteLLM accept for Anthropic models; `stream` and `stream_options.include_usage`.

What Chat Completions can carry to a provider (CARRIES): no reasoning in history, no media or
error flag inside a tool result (a tool message's content is text).
"""

from __future__ import annotations

from typing import Any

from calltap.ask import (
    Ask,
    HistoryCall,
    Part,
    Reasoning,
    ReasoningSettings,
    ResponseFormat,
    ToolChoice,
    ToolResult,
    Turn,
)
from calltap.dialects.request_common import (
    OPENAI_SAMPLING,
    RequestUnreadable,
    arguments_key,
    choice,
    inline_media,
    listed,
    media_kind,
    need,
    optional_int,
    sampling,
    stop_sequences,
    text,
    tool,
    url_media,
)
from calltap.schemas import normalize, schema_key

NAME = "openai.chat"
CARRIES = frozenset({
    "tool_choice.none", "tool_choice.required", "tool_choice.function", "parallel_tool_calls",
    "strict", "sampling.temperature", "sampling.top_p", "sampling.seed",
    "sampling.frequency_penalty", "sampling.presence_penalty", "max_output_tokens", "stop",
    "response_format", "reasoning.effort", "media.image", "media.audio", "media.document",
    "media.file",
})
SCHEMA_LACKS: frozenset[str] = frozenset()
REQUIRES: frozenset[str] = frozenset()
SAMPLING_NAMES = {**OPENAI_SAMPLING, "top_k": "top_k"}


def ask(request: dict[str, Any], path: str = "") -> Ask:
    """A Chat Completions request body, reduced to what it asks."""
    result = Ask(dialect=NAME, model=request.get("model") if isinstance(
        request.get("model"), str) else None)
    messages = need(request.get("messages"), list, "messages")
    for message in messages:
        _message(need(message, dict, "a message"), result)
    result.tools = [_tool(item) for item in listed(request.get("tools"), "tools")]
    result.tools += [tool(item.get("name"), item.get("description"), item.get("parameters"), None)
                     for item in listed(request.get("functions"), "functions")]
    result.tool_choice = _tool_choice(request.get("tool_choice", request.get("function_call")))
    parallel = request.get("parallel_tool_calls")
    result.parallel_tool_calls = parallel if isinstance(parallel, bool) else None
    result.response_format = response_format(request.get("response_format"))
    result.max_output_tokens = optional_int(
        request.get("max_completion_tokens", request.get("max_tokens")), "max_tokens")
    result.stop = stop_sequences(request.get("stop"))
    result.sampling = sampling(request, SAMPLING_NAMES)
    result.reasoning = _reasoning(request)
    result.stream = request.get("stream") is True
    options = request.get("stream_options")
    result.usage_requested = not result.stream or (
        isinstance(options, dict) and options.get("include_usage") is True)
    return result


def _message(message: dict[str, Any], result: Ask) -> None:
    role = message.get("role")
    content = message.get("content")
    if role in ("system", "developer"):
        result.instructions.extend(content_parts(content))
    elif role == "user":
        result.turns.append(Turn("user", parts=content_parts(content)))
    elif role == "assistant":
        result.turns.append(_assistant(message))
    elif role in ("tool", "function"):
        call_id = _string(message.get("tool_call_id")) if role == "tool" else None
        name = _string(message.get("name")) if role == "function" else None
        outcome = ToolResult(call_id, name, tuple(content_parts(content)), None)
        result.turns.append(Turn("user", results=[outcome]))
    else:
        raise RequestUnreadable(f"a message of role {role!r}")


def _assistant(message: dict[str, Any]) -> Turn:
    turn = Turn("assistant", parts=content_parts(message.get("content")))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        turn.parts.append(text(refusal))
    for call in listed(message.get("tool_calls"), "tool_calls"):
        function = need(need(call, dict, "a tool call").get("function"), dict, "a call's function")
        turn.calls.append(HistoryCall(need(function.get("name"), str, "a call's name"),
                                      arguments_key(function.get("arguments")),
                                      _string(call.get("id")), function.get("arguments")))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        turn.calls.append(HistoryCall(need(legacy.get("name"), str, "a call's name"),
                                      arguments_key(legacy.get("arguments")), None,
                                      legacy.get("arguments")))
    reasoning = message.get("reasoning_content")
    blocks = listed(message.get("thinking_blocks"), "thinking_blocks")
    if isinstance(reasoning, str) and reasoning and not blocks:
        turn.reasoning.append(Reasoning(reasoning, signed=False))
    for block in blocks:
        block = need(block, dict, "a thinking block")
        if block.get("type") == "redacted_thinking":
            turn.reasoning.append(Reasoning("", signed=bool(block.get("data")), redacted=True))
        else:
            turn.reasoning.append(Reasoning(str(block.get("thinking") or ""),
                                            signed=bool(block.get("signature"))))
    return turn


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def content_parts(content: Any) -> list[Part]:
    """A message's `content`: a string, null, or a list of typed parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [text(content)] if content else []
    parts: list[Part] = []
    for part in need(content, list, "content"):
        part = need(part, dict, "a content part")
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            parts.append(text(need(part.get("text"), str, "a text part")))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            parts.append(url_media("image", url))
        elif kind == "input_audio":
            audio = need(part.get("input_audio"), dict, "input_audio")
            parts.append(inline_media("audio", audio.get("data")))
        elif kind == "file":
            parts.append(file_part(need(part.get("file"), dict, "a file part")))
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append(text(part["refusal"]))
    return parts


def file_part(file: dict[str, Any]) -> Part:
    """A file given inline (`file_data`: a data URL or bare base64) or by `file_id`: Chat's `file`
    object, and a Responses `input_file` part, which has the same fields."""
    data = file.get("file_data")
    if isinstance(data, str):
        if data.startswith("data:"):
            return url_media("document", data)
        return inline_media(media_kind(None, "document"), data)
    return Part("document", digest="file:" + str(file.get("file_id") or file.get("filename")))


def _tool(item: Any) -> Any:
    item = need(item, dict, "a tool")
    function = item.get("function")
    if not isinstance(function, dict):
        return tool(str(item.get("type")), None, None, None)
    return tool(function.get("name"), function.get("description"), function.get("parameters"),
                function.get("strict"))


def _tool_choice(value: Any) -> ToolChoice | None:
    if value is None:
        return None
    if value in ("none", "auto", "required"):
        return choice(value)
    if isinstance(value, dict):
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else value.get("name")
        return choice("function", name)
    raise RequestUnreadable(f"tool_choice {value!r}")


def response_format(value: Any) -> ResponseFormat | None:
    """`response_format` (Chat Completions) or a Responses `text.format`: `json_schema` with
    its schema (nested under `json_schema`, or flat), `json_object`, `text`."""
    if value is None:
        return None
    value = need(value, dict, "response_format")
    kind = value.get("type")
    if kind == "json_schema":
        spec = value.get("json_schema", value)
        spec = need(spec, dict, "json_schema")
        normalized = normalize(spec.get("schema"))
        strict = spec.get("strict")
        return ResponseFormat("json_schema", normalized, schema_key(normalized),
                              strict if isinstance(strict, bool) else None)
    if kind in ("json_object", "text"):
        return ResponseFormat(kind)
    raise RequestUnreadable(f"response_format of type {kind!r}")


def _reasoning(request: dict[str, Any]) -> ReasoningSettings:
    effort = request.get("reasoning_effort")
    thinking = request.get("thinking")
    on = budget = None
    if isinstance(thinking, dict):
        on = thinking.get("type") == "enabled"
        budget = optional_int(thinking.get("budget_tokens"), "budget_tokens")
    return ReasoningSettings(effort if isinstance(effort, str) else None, on, budget)
