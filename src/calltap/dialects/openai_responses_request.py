"""The Responses request side: a `/v1/responses` body to an `Ask`.

- `instructions`, and `system` and `developer` messages wherever they stand in `input`, are the
  instructions;
- `input` is a string (one user turn) or a list of items, each its own turn (the comparator
  merges consecutive turns of one role):
  - a message (with or without `"type": "message"`): `user` or `assistant`, its content a string
    or parts (`input_text`, `output_text`, `refusal`, `input_image` by `image_url` or `file_id`,
    `input_file` by `file_data`, `file_url` or `file_id`, `input_audio`);
  - `function_call` (and `custom_tool_call`, a freeform tool's call: its `input` is the
    arguments) is an assistant call whose id is its `call_id`;
  - `function_call_output` (and `custom_tool_call_output`) is a tool result in a user turn,
    linked by `call_id`, its `output` a string or a list of content parts (images included);
  - `reasoning` is reasoning carried in history: its summary's text (its `content` text when it
    has no summary), signed when `encrypted_content` came along;
  - other items (hosted tools' calls, item references) are skipped;
- `tools[]`: a `function` tool by its name, strict when `strict` is absent (in the Responses API a
  function tool without `strict` is strict) or true; `strict: null` is not strict (LiteLLM's
  Chat-to-Responses bridge sends it for every non-strict Chat tool, and OpenAI takes those
  schemas, which strict mode would refuse); a `custom` tool by its name; an `mcp` tool as
  `mcp:<server_label>`; any other (web_search, file_search, …) by its type;
- `tool_choice`: `none`, `auto`, `required`; `{"type": "function" | "custom", "name"}` that
  tool; a hosted tool's `{"type": …}` (and `mcp`) that tool, named as in `tools`;
  `allowed_tools` by its mode (`required` with exactly one tool is that tool);
- `parallel_tool_calls`; `text.format` (`json_schema` flat, `json_object`, `text`);
  `max_output_tokens`; `temperature`, `top_p`; `reasoning.effort`; `stream`. Usage is always in
  the answer.

What Responses can carry to a provider (CARRIES): no stop sequences, seed, top_k or penalties
(the API has no field for them), no thinking switch or budget (only an effort), no error flag on
a tool result; `previous_response_id` and `conversation` keep history on OpenAI's side, which no
request body shows.
"""

from __future__ import annotations

from typing import Any

from calltap.ask import (
    Ask,
    HistoryCall,
    Part,
    Reasoning,
    ReasoningSettings,
    Tool,
    ToolChoice,
    ToolResult,
    Turn,
)
from calltap.dialects.openai_chat_request import content_parts as chat_parts
from calltap.dialects.openai_chat_request import file_part, response_format
from calltap.dialects.request_common import (
    RequestUnreadable,
    arguments_key,
    choice,
    listed,
    need,
    optional_int,
    sampling,
    text,
    tool,
    url_media,
)

NAME = "openai.responses"
CARRIES = frozenset({
    "tool_choice.none", "tool_choice.required", "tool_choice.function", "parallel_tool_calls",
    "strict", "sampling.temperature", "sampling.top_p", "max_output_tokens", "response_format",
    "reasoning.effort", "history.reasoning", "history.signature", "result.media", "media.image",
    "media.audio", "media.document", "media.file",
})
SCHEMA_LACKS: frozenset[str] = frozenset()
REQUIRES: frozenset[str] = frozenset()
SAMPLING_NAMES = {"temperature": "temperature", "top_p": "top_p"}
CALLS = ("function_call", "custom_tool_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")
MODES = ("none", "auto", "required")


def ask(request: dict[str, Any], path: str = "") -> Ask:
    """A Responses request body, reduced to what it asks."""
    model = request.get("model")
    result = Ask(dialect=NAME, model=model if isinstance(model, str) else None)
    instructions = request.get("instructions")
    if instructions is not None and need(instructions, str, "instructions"):
        result.instructions.append(text(instructions))
    entries = request.get("input")
    if isinstance(entries, str):
        entries = [{"role": "user", "content": entries}]
    for item in listed(entries, "input"):
        _item(need(item, dict, "an input item"), result)
    result.tools = [_tool(need(item, dict, "a tool")) for item in listed(request.get("tools"),
                                                                           "tools")]
    result.tool_choice = _tool_choice(request.get("tool_choice"))
    parallel = request.get("parallel_tool_calls")
    result.parallel_tool_calls = parallel if isinstance(parallel, bool) else None
    settings = request.get("text")
    if settings is not None:
        result.response_format = response_format(need(settings, dict, "text").get("format"))
    result.max_output_tokens = optional_int(request.get("max_output_tokens"), "max_output_tokens")
    result.sampling = sampling(request, SAMPLING_NAMES)
    reasoning = request.get("reasoning")
    if reasoning is not None:
        effort = need(reasoning, dict, "reasoning").get("effort")
        result.reasoning = ReasoningSettings(effort if isinstance(effort, str) else None)
    result.stream = request.get("stream") is True
    result.usage_requested = True
    return result


def _item(item: dict[str, Any], result: Ask) -> None:
    """One input item as its turn (or as instructions)."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role = item.get("role")
        parts = content_parts(item.get("content"))
        if role in ("system", "developer"):
            result.instructions.extend(parts)
        elif role in ("user", "assistant"):
            result.turns.append(Turn(role, parts=parts))
        else:
            raise RequestUnreadable(f"a message of role {role!r}")
    elif kind in CALLS:
        name = need(item.get("name"), str, "a call's name")
        arguments = item.get("arguments" if kind == "function_call" else "input")
        call = HistoryCall(name, arguments_key(arguments), item.get("call_id"), arguments)
        result.turns.append(Turn("assistant", calls=[call]))
    elif kind in OUTPUTS:
        output = ToolResult(item.get("call_id"), None, tuple(content_parts(item.get("output"))),
                            None)
        result.turns.append(Turn("user", results=[output]))
    elif kind == "reasoning":
        result.turns.append(Turn("assistant", reasoning=[_reasoning(item)]))
    elif kind is None:
        raise RequestUnreadable("an input item with neither a type nor a role")


def _reasoning(item: dict[str, Any]) -> Reasoning:
    """A reasoning item: its summary's text, else its content's; signed by `encrypted_content`."""
    texts = [need(need(part, dict, "a summary part").get("text"), str, "a summary's text")
             for part in listed(item.get("summary"), "summary")]
    if not texts:
        texts = [need(part, dict, "a reasoning part").get("text") or ""
                 for part in listed(item.get("content"), "reasoning content")]
    return Reasoning("\n\n".join(texts), signed=bool(item.get("encrypted_content")))


def content_parts(content: Any) -> list[Part]:
    """A message's content or a tool output: a string, or a list of typed parts."""
    if not isinstance(content, list):
        return chat_parts(content)
    parts: list[Part] = []
    for part in content:
        kind = need(part, dict, "a content part").get("type")
        if kind == "input_image":
            parts.append(_image(part))
        elif kind == "input_file":
            url = part.get("file_url")
            has_url = isinstance(url, str) and not isinstance(part.get("file_data"), str)
            parts.append(url_media("document", url) if has_url else file_part(part))
        else:
            parts.extend(chat_parts([part]))
    return parts


def _image(part: dict[str, Any]) -> Part:
    url = part.get("image_url")
    if isinstance(url, str):
        return url_media("image", url)
    file_id = part.get("file_id")
    if isinstance(file_id, str):
        return Part("image", digest="file:" + file_id)
    raise RequestUnreadable("an input_image with neither image_url nor file_id")


def _tool(item: dict[str, Any]) -> Tool:
    kind = item.get("type")
    if kind == "function":
        strict = item.get("strict", True)
        return tool(item.get("name"), item.get("description"), item.get("parameters"), strict)
    if kind == "custom":
        return tool(item.get("name"), item.get("description"), None, None)
    return tool(_hosted_name(item), None, None, None)


def _hosted_name(item: dict[str, Any]) -> str:
    """A hosted tool's name in an Ask: its type; an MCP server's `mcp:<server_label>`."""
    kind = need(item.get("type"), str, "a tool's type")
    label = item.get("server_label")
    return f"mcp:{label}" if kind == "mcp" and isinstance(label, str) else kind


def _tool_choice(value: Any) -> ToolChoice | None:
    if value is None:
        return None
    if value in MODES:
        return choice(value)
    kind = need(value, dict, "tool_choice").get("type")
    if kind in MODES:
        return choice(kind)
    if kind in ("function", "custom"):
        return choice("function", value.get("name"))
    if kind == "allowed_tools":
        mode = value.get("mode")
        if mode not in ("auto", "required"):
            raise RequestUnreadable(f"allowed_tools of mode {mode!r}")
        allowed = listed(value.get("tools"), "allowed tools")
        if mode == "required" and len(allowed) == 1:
            only = need(allowed[0], dict, "an allowed tool")
            return choice("function", only.get("name") if only.get("type") in (
                "function", "custom") else _hosted_name(only))
        return choice(mode)
    return choice("function", _hosted_name(value))
