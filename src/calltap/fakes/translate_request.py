"""The request half of a translating gateway: Chat Completions in, Messages, Responses, Ollama
or Bedrock Converse out, as LiteLLM builds each.

System messages become the top-level `system` (Messages, Converse) or stay `system` input items
(Responses) or messages (Ollama); `tools[].function` becomes `{name, description, input_schema}`
(Messages), `{type: "function", name, description, parameters}` (Responses), stays as it is
(Ollama) or becomes `toolConfig.tools[].toolSpec{name, description, inputSchema.json}` (Converse);
content becomes blocks (Messages, Responses, Converse) or one string (Ollama); `max_tokens` is added
when the client set none (Messages requires it); an assistant's tool calls become `tool_use`
blocks, `function_call` items, Ollama calls with argument objects or `toolUse` blocks; tool
messages become `tool_result` blocks (merged into one user message), `function_call_output`
items, `tool` messages or `toolResult` blocks (merged too); `stop` becomes `stop_sequences`,
`options.stop` or `inferenceConfig.stopSequences`; `temperature` and `top_p` travel as they are
(top level, `options` with `seed`, `inferenceConfig.temperature`/`topP`), a 0 included. Ollama
is told `stream` either way (it streams by default); a Converse request says nothing of it, nor
of the model: both are in its path.

Two places where LiteLLM 1.108.7 is not faithful and these translations are:
- a Responses function tool gets `strict` as the client set it, else `false`. LiteLLM copies
  the client's value, `null` when unset, and the Responses API treats a function tool without
  `strict` as strict wherever its schema allows (Chat Completions does not), so a loose Chat tool
  becomes a strict one;
- an Ollama tool message carries the function's name (`tool_name`, found from the call's id)
  beside the `tool_call_id` LiteLLM sends. LiteLLM sends the calls without ids, so its result's
  id names no call Ollama was shown, and nothing else links the result to its call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson

DEFAULT_MAX_TOKENS = 4096
"""The `max_tokens` a Messages request gets when the client set none."""
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def text_parts(content: Any) -> list[str]:
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


def functions(chat: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        tool["function"]
        for tool in chat.get("tools") or ()
        if isinstance(tool, dict)
        and isinstance(tool.get("function"), dict)
        and isinstance(tool["function"].get("name"), str)
    ]


def tool_calls(message: dict[str, Any]) -> list[tuple[Any, Any, str]]:
    """An assistant message's tool calls as (id, name, arguments text)."""
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            text = arguments if isinstance(arguments, str) and arguments else "{}"
            calls.append((call.get("id"), function.get("name"), text))
    return calls


def numbers(chat: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """The client's numeric parameters under the target's names (`names`: Chat name -> target
    name); a 0 is a value, and is kept."""
    return {
        key: chat[name]
        for name, key in names.items()
        if isinstance(chat.get(name), int | float) and not isinstance(chat.get(name), bool)
    }


SAMPLING = {"temperature": "temperature", "top_p": "top_p"}
"""Chat Completions' sampling parameters every target takes, by the names most give them."""


def decoded(arguments: str) -> Any:
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


@dataclass(frozen=True, slots=True)
class BlockShapes:
    """How a dialect of content blocks writes text, a tool call and a tool result."""

    text: Callable[[str], dict[str, Any]]
    tool_use: Callable[[Any, Any, Any], dict[str, Any]]
    """A block for (id, name, decoded arguments)."""
    tool_result: Callable[[Any, str], dict[str, Any]]
    """A block for (the call's id, the result's text)."""


MESSAGES_BLOCKS = BlockShapes(
    lambda text: {"type": "text", "text": text},
    lambda id_, name, arguments: {"type": "tool_use", "id": id_, "name": name, "input": arguments},
    lambda id_, text: {"type": "tool_result", "tool_use_id": id_, "content": text},
)
CONVERSE_BLOCKS = BlockShapes(
    lambda text: {"text": text},
    lambda id_, name, arguments: {"toolUse": {"toolUseId": id_, "name": name, "input": arguments}},
    lambda id_, text: {"toolResult": {"toolUseId": id_, "content": [{"text": text}]}},
)


def _in_blocks(
    chat: dict[str, Any], shapes: BlockShapes
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The system blocks apart, and the turns as alternating user and assistant messages of
    blocks (tool results merged into the user's turn), as Messages and Converse both want."""
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for message in chat.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        texts = text_parts(message.get("content"))
        blocks = [shapes.text(text) for text in texts]
        if role in ("system", "developer"):
            system += blocks
        elif role == "tool":
            _append(
                messages, "user", [shapes.tool_result(message.get("tool_call_id"), "".join(texts))]
            )
        elif role == "assistant":
            blocks += [
                shapes.tool_use(id_, name, decoded(arguments))
                for id_, name, arguments in tool_calls(message)
            ]
            _append(messages, "assistant", blocks)
        else:
            _append(messages, "user", blocks)
    return system, messages


def to_messages(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request as an Anthropic Messages request."""
    system, messages = _in_blocks(chat, MESSAGES_BLOCKS)
    limit = chat.get("max_completion_tokens") or chat.get("max_tokens") or DEFAULT_MAX_TOKENS
    request: dict[str, Any] = {"model": chat.get("model"), "messages": messages}
    request["max_tokens"] = limit
    request.update(numbers(chat, SAMPLING))
    if system:
        request["system"] = system
    tools = [
        {
            "name": function["name"],
            "description": function.get("description", ""),
            "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
        }
        for function in functions(chat)
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
        texts = text_parts(message.get("content"))
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
                for id_, name, arguments in tool_calls(message)
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
            "strict": function.get("strict") is True,
        }
        for function in functions(chat)
    ]
    if tools:
        request["tools"] = tools
    request.update(numbers(chat, SAMPLING))
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


def to_ollama(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request as an Ollama `/api/chat` request."""
    messages: list[dict[str, Any]] = []
    names: dict[Any, Any] = {}
    for message in chat.get("messages") or ():
        if isinstance(message, dict) and isinstance(message.get("role"), str):
            messages.append(_ollama_message(message, names))
    request: dict[str, Any] = {"model": chat.get("model"), "messages": messages}
    request["stream"] = chat.get("stream") is True
    tools = [{"type": "function", "function": function} for function in functions(chat)]
    if tools:
        request["tools"] = tools
    options: dict[str, Any] = numbers(chat, {**SAMPLING, "seed": "seed"})
    limit = chat.get("max_completion_tokens") or chat.get("max_tokens")
    if limit:
        options["num_predict"] = limit
    stop = chat.get("stop")
    if stop:
        options["stop"] = [stop] if isinstance(stop, str) else stop
    if options:
        request["options"] = options
    return request


def _ollama_message(message: dict[str, Any], names: dict[Any, Any]) -> dict[str, Any]:
    """One Chat message as an Ollama message: text in one string, calls with argument objects
    (and no ids, as LiteLLM sends them), a tool result with its call's id and function name
    (`names` maps the ids of the calls seen so far to their names)."""
    role = "system" if message["role"] == "developer" else message["role"]
    entry: dict[str, Any] = {"role": role, "content": "".join(text_parts(message.get("content")))}
    calls = tool_calls(message) if role == "assistant" else []
    if calls:
        names.update((id_, name) for id_, name, _ in calls)
        entry["tool_calls"] = [
            {"function": {"name": name, "arguments": decoded(arguments)}}
            for _, name, arguments in calls
        ]
    if role == "tool" and message.get("tool_call_id") is not None:
        entry["tool_call_id"] = message["tool_call_id"]
        if names.get(message["tool_call_id"]) is not None:
            entry["tool_name"] = names[message["tool_call_id"]]
    return entry


def to_converse(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request as a Bedrock Converse request."""
    system, messages = _in_blocks(chat, CONVERSE_BLOCKS)
    request: dict[str, Any] = {"messages": messages}
    if system:
        request["system"] = system
    settings = _inference_config(chat)
    if settings:
        request["inferenceConfig"] = settings
    config = _tool_config(chat)
    if config:
        request["toolConfig"] = config
    return request


def converse_path(chat: dict[str, Any]) -> str:
    """`converse-stream` or `converse` by the client's `stream`, the model id quoted in the path."""
    model = quote(str(chat.get("model")), safe="")
    return (
        f"/model/{model}/converse-stream"
        if chat.get("stream") is True
        else f"/model/{model}/converse"
    )


def _inference_config(chat: dict[str, Any]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    limit = chat.get("max_completion_tokens") or chat.get("max_tokens")
    if limit:
        settings["maxTokens"] = limit
    for name, key in (("temperature", "temperature"), ("top_p", "topP")):
        if isinstance(chat.get(name), int | float):
            settings[key] = chat[name]
    stop = chat.get("stop")
    if stop:
        settings["stopSequences"] = [stop] if isinstance(stop, str) else stop
    return settings


def _tool_config(chat: dict[str, Any]) -> dict[str, Any]:
    """`toolConfig`: the tool specs and the tool choice (Converse has no "none"; it is left out)."""
    tools = [
        {
            "toolSpec": {
                "name": function["name"],
                "description": function.get("description") or function["name"],
                "inputSchema": {
                    "json": function.get("parameters") or {"type": "object", "properties": {}}
                },
            }
        }
        for function in functions(chat)
    ]
    if not tools:
        return {}
    config: dict[str, Any] = {"tools": tools}
    choice = chat.get("tool_choice")
    if choice == "auto":
        config["toolChoice"] = {"auto": {}}
    elif choice == "required":
        config["toolChoice"] = {"any": {}}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        config["toolChoice"] = {"tool": {"name": choice["function"].get("name")}}
    return config
