"""The Anthropic Messages request side: a `/v1/messages` body, or the same body on Bedrock's
InvokeModel, to an `Ask`.

- `system` (a string, or text blocks) is the instructions;
- each message is a turn of its role (`user` or `assistant`; any other role is not a Messages
  request). Its `content` is a string or blocks: `text`; `image` and `document` with a `base64`,
  `url`, `file`, `text` (plain text, its UTF-8 bytes digested) or `content` source; `tool_use`
  (its `input` object the arguments, its `id` the link); `tool_result` in a user turn, linked by
  `tool_use_id`, its `content` a string or blocks (text, images, documents) and its `is_error`;
  `thinking` (signed by its `signature`) and `redacted_thinking` (its `data`) as reasoning.
  Blocks of tools the provider runs itself (`server_tool_use`, `web_search_tool_result`, `mcp_*`,
  …), citations and cache markers are not compared: a Chat client cannot send them;
- `tools`: a custom tool's `name`, `description`, `input_schema` and `strict`; a server tool
  (`{"type": "web_search_20250305", "name": "web_search"}`) by its name, with no schema;
- `tool_choice` `{"type": "auto"|"any"|"tool"|"none"}` on the Ask's scale (`any` is `required`),
  its `disable_parallel_tool_use` the parallel limit (true: no parallel calls; false: allowed;
  absent: nothing said);
- `max_tokens`, `stop_sequences`, `temperature`, `top_p`, `top_k`; `thinking`
  (`enabled` with its `budget_tokens`, `adaptive`, `disabled`); `output_config.effort`;
  structured output as `output_config.format` or the beta's `output_format`
  (`{"type": "json_schema", "schema"}`);
- `stream`; usage is always in the answer.

On Bedrock (`/model/{id}/invoke`, `/model/{id}/invoke-with-response-stream`) the body carries
`anthropic_version` and no `model`: the model is the path's (percent-decoded) and whether it
streams is which of the two paths it is (`bedrock_model`, which Converse shares).

A history is read as sent, never repaired: two `tool_result` blocks naming one `tool_use_id`
are two results of that call, and thinking blocks stay in history whatever `thinking` says, so
the comparison sees a request whose `thinking` was removed while its history still holds
thinking blocks (LiteLLM #18926). LiteLLM's structured-output stand-in (the schema as a tool
named `json_tool_call`, forced) reads as the tool and the choice it is; the comparator
recognizes it.

`thinking_settings` and `output_settings` read Anthropic's `thinking` and `output_config` wherever
they travel: Bedrock Converse carries them in `additionalModelRequestFields` for Claude models.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from calltap.ask import (
    Ask,
    HistoryCall,
    Part,
    Reasoning,
    ReasoningSettings,
    ResponseFormat,
    Tool,
    ToolChoice,
    ToolResult,
    Turn,
)
from calltap.dialects.request_common import (
    RequestUnreadable,
    arguments_key,
    choice,
    inline_media,
    listed,
    need,
    optional_int,
    sampling,
    stop_sequences,
    text,
    tool,
    url_media,
)
from calltap.schemas import normalize, schema_key

NAME = "anthropic.messages"
CARRIES = frozenset({
    "tool_choice.none", "tool_choice.required", "tool_choice.function", "parallel_tool_calls",
    "strict", "sampling.temperature", "sampling.top_p", "sampling.top_k", "max_output_tokens",
    "stop", "response_format", "reasoning.effort", "reasoning.thinking", "reasoning.budget",
    "history.reasoning", "history.signature", "result.media", "result.error", "media.image",
    "media.document",
})
SCHEMA_LACKS: frozenset[str] = frozenset()
REQUIRES = frozenset({"max_output_tokens"})
SAMPLING_NAMES = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}
CHOICES = {"auto": "auto", "any": "required", "none": "none"}
INVOKE_PATHS = ("/invoke", "/invoke-with-response-stream")
"""Bedrock InvokeModel's operations, the second streaming."""


def ask(request: dict[str, Any], path: str = "") -> Ask:
    """A Messages request body (on `/v1/messages` or Bedrock's InvokeModel), reduced to what it
    asks."""
    model = request.get("model")
    result = Ask(dialect=NAME, model=model if isinstance(model, str) else None)
    operation = route(path)
    if operation.endswith(INVOKE_PATHS):
        result.model = bedrock_model(path) or result.model
        result.stream = operation.endswith(INVOKE_PATHS[1])
    else:
        result.stream = request.get("stream") is True
    result.usage_requested = True
    result.instructions = _system(request.get("system"))
    for message in need(request.get("messages"), list, "messages"):
        result.turns.append(_turn(need(message, dict, "a message")))
    result.tools = [_tool(item) for item in listed(request.get("tools"), "tools")]
    result.tool_choice, result.parallel_tool_calls = tool_choice(request.get("tool_choice"))
    result.max_output_tokens = optional_int(request.get("max_tokens"), "max_tokens")
    result.stop = stop_sequences(request.get("stop_sequences"))
    result.sampling = sampling(request, SAMPLING_NAMES)
    config = output_settings(request.get("output_config"))
    thinking = thinking_settings(request.get("thinking"))
    result.reasoning = ReasoningSettings(config.effort, thinking.thinking, thinking.budget)
    result.response_format = config.response_format or json_schema_format(
        request.get("output_format"), "output_format")
    return result


def route(path: str) -> str:
    """A request path without its query string or a trailing slash."""
    return path.split("?", 1)[0].rstrip("/")


def bedrock_model(path: str) -> str | None:
    """The model id of a Bedrock runtime path, `…/model/{id}/<operation>`, percent-decoded (an
    inference profile's ARN travels encoded); None for a path with no `/model/` segment."""
    head, slash, _operation = route(path).rpartition("/")
    start = head.find("/model/")
    if not slash or start < 0 or len(head) <= start + len("/model/"):
        return None
    return unquote(head[start + len("/model/"):])


def _system(value: Any) -> list[Part]:
    if value is None:
        return []
    if isinstance(value, str):
        return [text(value)] if value else []
    return [text(need(block.get("text"), str, "a system text block"))
            for block in need(value, list, "system")
            if need(block, dict, "a system block").get("type") == "text"]


def _turn(message: dict[str, Any]) -> Turn:
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise RequestUnreadable(f"a message of role {role!r}")
    turn = Turn(role)
    content = message.get("content")
    if isinstance(content, str):
        turn.parts = [text(content)] if content else []
        return turn
    for block in need(content, list, "content"):
        _block(need(block, dict, "a content block"), turn)
    return turn


def _block(block: dict[str, Any], turn: Turn) -> None:
    kind = block.get("type")
    if kind == "tool_use":
        turn.calls.append(call(block.get("name"), block.get("input"), block.get("id")))
    elif kind == "tool_result":
        turn.results.append(tool_result(block))
    elif kind == "thinking":
        turn.reasoning.append(Reasoning(str(block.get("thinking") or ""),
                                        signed=bool(block.get("signature"))))
    elif kind == "redacted_thinking":
        turn.reasoning.append(Reasoning("", signed=bool(block.get("data")), redacted=True))
    else:
        part = content_part(block)
        if part is not None:
            turn.parts.append(part)


def call(name: Any, arguments: Any, call_id: Any) -> HistoryCall:
    """A tool call in history: its `input` must be an object (absent is `{}`)."""
    if arguments is not None:
        need(arguments, dict, "a tool call's input")
    return HistoryCall(need(name, str, "a tool call's name"), arguments_key(arguments),
                       call_id if isinstance(call_id, str) else None, arguments)


def tool_result(block: dict[str, Any]) -> ToolResult:
    """A `tool_result` block: its content a string or blocks, its error flag as sent."""
    content = block.get("content")
    if content is None or isinstance(content, str):
        parts = [text(content)] if content else []
    else:
        parts = [part for item in need(content, list, "a tool result's content")
                 if (part := content_part(need(item, dict, "a tool result block"))) is not None]
    error = block.get("is_error")
    return ToolResult(need(block.get("tool_use_id"), str, "a tool result's tool_use_id"), None,
                      tuple(parts), error if isinstance(error, bool) else None)


def content_part(block: dict[str, Any]) -> Part | None:
    """A text, image or document block as a part; None for any other block."""
    kind = block.get("type")
    if kind == "text":
        return text(need(block.get("text"), str, "a text block"))
    if kind in ("image", "document"):
        return _source(kind, need(block.get("source"), dict, f"an {kind}'s source"))
    return None


def _source(kind: str, source: dict[str, Any]) -> Part:
    """A media source: inline data by the digest of its bytes, a URL or a file by reference."""
    shape = source.get("type")
    if shape == "base64":
        return inline_media(kind, source.get("data"))
    if shape == "url":
        return url_media(kind, source.get("url"))
    if shape == "file":
        return Part(kind, digest="file:" + need(source.get("file_id"), str, "a file_id"))
    if shape == "text":
        return _text_digest(kind, need(source.get("data"), str, "a text source"))
    if shape == "content":
        content = source.get("content")
        if not isinstance(content, str):
            content = "".join(
                need(item.get("text"), str, "a content source's text")
                for item in need(content, list, "a content source")
                if need(item, dict, "a content source block").get("type") == "text")
        return _text_digest(kind, content)
    raise RequestUnreadable(f"an {kind} source of type {shape!r}")


def _text_digest(kind: str, value: str) -> Part:
    """Plain text sent as a document: the digest of its UTF-8 bytes, as inline data of that
    text would have."""
    return Part(kind, digest="sha256:" + hashlib.sha256(value.encode()).hexdigest())


def _tool(item: Any) -> Tool:
    item = need(item, dict, "a tool")
    schema = item.get("input_schema")
    if schema is None and item.get("type") not in (None, "custom"):
        name = item.get("name") if isinstance(item.get("name"), str) else item.get("type")
        return tool(name, None, None, None)
    return tool(item.get("name"), item.get("description"), need(schema, dict, "input_schema"),
                item.get("strict"))


def tool_choice(value: Any) -> tuple[ToolChoice | None, bool | None]:
    """`tool_choice` on the Ask's scale, and its parallel limit as `parallel_tool_calls`."""
    if value is None:
        return None, None
    value = need(value, dict, "tool_choice")
    kind = value.get("type")
    if kind == "tool":
        chosen = choice("function", value.get("name"))
    elif kind in CHOICES:
        chosen = choice(CHOICES[kind])
    else:
        raise RequestUnreadable(f"tool_choice of type {kind!r}")
    disable = value.get("disable_parallel_tool_use")
    return chosen, (not disable) if isinstance(disable, bool) else None


def thinking_settings(value: Any) -> ReasoningSettings:
    """Anthropic's `thinking`: `disabled` is off, `enabled` (with `budget_tokens`), `adaptive`
    and any later kind on."""
    if value is None:
        return ReasoningSettings()
    value = need(value, dict, "thinking")
    kind = need(value.get("type"), str, "thinking's type")
    if kind == "disabled":
        return ReasoningSettings(thinking=False)
    return ReasoningSettings(thinking=True,
                             budget=optional_int(value.get("budget_tokens"), "budget_tokens"))


@dataclass(frozen=True, slots=True)
class OutputSettings:
    """What `output_config` says: an effort level and a structured-output format."""

    effort: str | None = None
    response_format: ResponseFormat | None = None


def output_settings(value: Any) -> OutputSettings:
    """Anthropic's `output_config`: `effort`, and `format` (a JSON schema)."""
    if value is None:
        return OutputSettings()
    value = need(value, dict, "output_config")
    effort = value.get("effort")
    return OutputSettings(effort if isinstance(effort, str) else None,
                          json_schema_format(value.get("format"), "output_config.format"))


def json_schema_format(value: Any, what: str) -> ResponseFormat | None:
    """`{"type": "json_schema", "schema": {...}}`, the one format Anthropic documents."""
    if value is None:
        return None
    value = need(value, dict, what)
    if value.get("type") != "json_schema":
        raise RequestUnreadable(f"{what} of type {value.get('type')!r}")
    normalized = normalize(need(value.get("schema"), dict, f"{what}'s schema"))
    return ResponseFormat("json_schema", normalized, schema_key(normalized))
