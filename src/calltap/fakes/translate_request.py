"""The request half of a translating gateway: Chat Completions in, Messages or Responses out.

System messages become the top-level `system` (Messages) or stay `system` input items
(Responses); `tools[].function` becomes `{name, description, input_schema}` (Messages) or
`{type: "function", name, description, parameters}` (Responses); content becomes blocks;
`max_tokens` is added when the client set none (Messages requires it); an assistant's tool calls
become `tool_use` blocks or `function_call` items, tool messages `tool_result` blocks (merged into
one user message) or `function_call_output` items; `stop` becomes `stop_sequences`.
"""

from __future__ import annotations

from typing import Any

import orjson

DEFAULT_MAX_TOKENS = 4096
"""The `max_tokens` a Messages request gets when the client set none."""
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def _texts(content: Any) -> list[str]:
    """The text of a message's content: a string, or its text parts."""
    if isinstance(content, str):
        return [content] if content else []
    if not isinstance(content, list):
        return []
    return [
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") in TEXT_PARTS
        and isinstance(part.get("text"), str)
    ]


def _functions(chat: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        tool["function"]
        for tool in chat.get("tools") or ()
        if isinstance(tool, dict)
        and isinstance(tool.get("function"), dict)
        and isinstance(tool["function"].get("name"), str)
    ]


def _tool_calls(message: dict[str, Any]) -> list[tuple[Any, Any, str]]:
    """An assistant message's tool calls as (id, name, arguments text)."""
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            text = arguments if isinstance(arguments, str) and arguments else "{}"
            calls.append((call.get("id"), function.get("name"), text))
    return calls


def _decoded(arguments: str) -> Any:
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {}


def _append(messages: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add blocks as a message, merged into the last one when it has the same role (Messages
    requires user and assistant turns to alternate)."""
    if not blocks:
        return
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].extend(blocks)
    else:
        messages.append({"role": role, "content": blocks})


def to_messages(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request as an Anthropic Messages request."""
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for message in chat.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        blocks = [{"type": "text", "text": text} for text in _texts(message.get("content"))]
        if role in ("system", "developer"):
            system += blocks
        elif role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id"),
                "content": "".join(_texts(message.get("content"))),
            }
            _append(messages, "user", [result])
        elif role == "assistant":
            blocks += [
                {"type": "tool_use", "id": id_, "name": name, "input": _decoded(arguments)}
                for id_, name, arguments in _tool_calls(message)
            ]
            _append(messages, "assistant", blocks)
        else:
            _append(messages, "user", blocks)
    limit = chat.get("max_completion_tokens") or chat.get("max_tokens") or DEFAULT_MAX_TOKENS
    request: dict[str, Any] = {"model": chat.get("model"), "messages": messages}
    request["max_tokens"] = limit
    if system:
        request["system"] = system
    tools = [
        {
            "name": function["name"],
            "description": function.get("description", ""),
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
        }
        for function in _functions(chat)
    ]
    if tools:
        request["tools"] = tools
    choice = _messages_tool_choice(chat.get("tool_choice"))
    if choice is not None:
        request["tool_choice"] = choice
    stop = chat.get("stop")
    if stop:
        request["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    if chat.get("stream") is True:
        request["stream"] = True
    return request


def _messages_tool_choice(choice: Any) -> dict[str, Any] | None:
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "tool", "name": choice["function"].get("name")}
    return None


def to_responses(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request as an OpenAI Responses request."""
    items: list[dict[str, Any]] = []
    for message in chat.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        texts = _texts(message.get("content"))
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": "".join(texts),
                }
            )
        elif role == "assistant":
            if texts:
                content = [{"type": "output_text", "text": text} for text in texts]
                items.append({"type": "message", "role": "assistant", "content": content})
            items += [
                {"type": "function_call", "call_id": id_, "name": name, "arguments": arguments}
                for id_, name, arguments in _tool_calls(message)
            ]
        elif isinstance(role, str):
            content = [{"type": "input_text", "text": text} for text in texts]
            items.append({"type": "message", "role": role, "content": content})
    request: dict[str, Any] = {"model": chat.get("model"), "input": items}
    tools = [
        {
            "type": "function",
            "name": function["name"],
            "description": function.get("description", ""),
            "parameters": function.get("parameters") or {"type": "object", "properties": {}},
        }
        for function in _functions(chat)
    ]
    if tools:
        request["tools"] = tools
    choice = chat.get("tool_choice")
    if choice in ("auto", "none", "required"):
        request["tool_choice"] = choice
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        request["tool_choice"] = {"type": "function", "name": choice["function"].get("name")}
    limit = chat.get("max_completion_tokens") or chat.get("max_tokens")
    if limit:
        request["max_output_tokens"] = limit
    if chat.get("stream") is True:
        request["stream"] = True
    return request
