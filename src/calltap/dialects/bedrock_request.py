"""The Bedrock Converse request side: a `/model/{id}/converse` or `/converse-stream` body to an
`Ask`.

A Converse body names neither its model nor whether it streams: both are in its path (the model
id percent-decoded, `converse-stream` streaming). Without a path the model and `stream` are None.

- `system[]`: `{text}` blocks (and a guardrail's `guardContent` text) are the instructions;
- `messages[]` of role `user` or `assistant`, their `content[]` blocks keyed by kind, not typed:
  `text`; `image`, `document`, `video`, `audio` with a `source` of `bytes` (base64 on the wire,
  digested decoded), `s3Location` (by its URI), or for a document `text` or `content`;
  `toolUse{toolUseId, name, input}` a call (its `input` object the arguments);
  `toolResult{toolUseId, content[], status}` a result linked by `toolUseId`, its content
  `{text}`, `{json}` (as its JSON text), `{image}`, `{document}`, `{video}`, and its `status`
  the error flag (`error` true, `success` false, absent None); `reasoningContent` with
  `reasoningText{text, signature}` (signed by its signature) or `redactedContent`;
  `citationsContent` its generated text; `guardContent` its text or image. A `toolUse` of
  `type` `server_tool_use` (a system tool Bedrock runs), `cachePoint`, `searchResult` and
  other blocks are not compared;
- `toolConfig.tools[]`: `toolSpec{name, description, inputSchema{json}, strict}`, and a
  `systemTool{name}` by its name; `toolConfig.toolChoice` `{auto}`, `{any}` (`required`) or
  `{tool{name}}`. Converse has no "none" choice and no parallel flag (CARRIES);
- `inferenceConfig{maxTokens, temperature, topP, stopSequences}`;
- `additionalModelRequestFields`, the model's own fields: for Claude (where LiteLLM puts them)
  Anthropic's `top_k`, `thinking` and `output_config` (read as `anthropic_request` reads them);
  Nova's `inferenceConfig.topK` and `reasoningConfig{type, maxReasoningEffort}`; and a
  `reasoning_effort` (OpenAI's open-weight models);
- `outputConfig.textFormat{type: "json_schema", structure{jsonSchema{schema}}}` (the schema a
  JSON string) the structured output, `outputConfig.effort` an effort level;
- usage is always in the answer.

A history is read as sent, never repaired: two `toolResult` blocks naming one `toolUseId` in one
turn (LiteLLM #20047, after it merged consecutive tool messages) are two results of that call,
and two `toolUse` blocks of one id two calls. LiteLLM's structured-output stand-in (the schema as
a tool, forced by `toolChoice.tool`) reads as the tool and the choice it is; the comparator
recognizes it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from calltap.ask import (
    Ask,
    Part,
    Reasoning,
    ReasoningSettings,
    ResponseFormat,
    Tool,
    ToolChoice,
    ToolResult,
    Turn,
)
from calltap.dialects.anthropic_request import (
    bedrock_model,
    call,
    output_settings,
    route,
    thinking_settings,
)
from calltap.dialects.request_common import (
    RequestUnreadable,
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

NAME = "bedrock.converse"
CARRIES = frozenset({
    "tool_choice.required", "tool_choice.function", "strict", "sampling.temperature",
    "sampling.top_p", "sampling.top_k", "max_output_tokens", "stop", "response_format",
    "reasoning.effort", "reasoning.thinking", "reasoning.budget", "history.reasoning",
    "history.signature", "result.media", "result.error", "media.image", "media.document",
    "media.video", "media.audio",
})
SCHEMA_LACKS: frozenset[str] = frozenset()
REQUIRES: frozenset[str] = frozenset()
SAMPLING_NAMES = {"temperature": "temperature", "topP": "top_p"}
PATHS = ("/converse", "/converse-stream")
"""Converse's operations, the second streaming."""
MEDIA = ("image", "document", "video", "audio")
STATUS_ERROR = {"error": True, "success": False}


def ask(request: dict[str, Any], path: str = "") -> Ask:
    """A Converse request body, reduced to what it asks; its path names the model and whether
    it streams."""
    result = Ask(dialect=NAME, model=bedrock_model(path), usage_requested=True)
    operation = route(path)
    if operation.endswith(PATHS):
        result.stream = operation.endswith(PATHS[1])
    result.instructions = [part for block in listed(request.get("system"), "system")
                           if (part := _system(need(block, dict, "a system block"))) is not None]
    for message in listed(request.get("messages"), "messages"):
        result.turns.append(_turn(need(message, dict, "a message")))
    config = _object(request.get("toolConfig"), "toolConfig")
    result.tools = [item for entry in listed(config.get("tools"), "toolConfig.tools")
                    if (item := _tool(need(entry, dict, "a tool"))) is not None]
    result.tool_choice = _tool_choice(config.get("toolChoice"))
    inference = _object(request.get("inferenceConfig"), "inferenceConfig")
    result.max_output_tokens = optional_int(inference.get("maxTokens"), "maxTokens")
    result.stop = stop_sequences(inference.get("stopSequences"))
    result.sampling = sampling(inference, SAMPLING_NAMES)
    extra = _object(request.get("additionalModelRequestFields"), "additionalModelRequestFields")
    top_k = _top_k(extra)
    if top_k is not None:
        result.sampling["top_k"] = top_k
    output = _object(request.get("outputConfig"), "outputConfig")
    anthropic_output = output_settings(extra.get("output_config"))
    result.reasoning = _reasoning(extra, output, anthropic_output.effort)
    result.response_format = (_text_format(output.get("textFormat"))
                              or anthropic_output.response_format)
    return result


def _object(value: Any, what: str) -> dict[str, Any]:
    """An object field that may be absent (an empty one then)."""
    return {} if value is None else need(value, dict, what)


def _system(block: dict[str, Any]) -> Part | None:
    if "text" in block:
        return text(need(block["text"], str, "a system text block"))
    guarded = block.get("guardContent")
    if isinstance(guarded, dict) and isinstance(guarded.get("text"), dict):
        return text(need(guarded["text"].get("text"), str, "a guarded text"))
    return None


def _turn(message: dict[str, Any]) -> Turn:
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise RequestUnreadable(f"a message of role {role!r}")
    turn = Turn(role)
    for block in need(message.get("content"), list, "content"):
        _block(need(block, dict, "a content block"), turn)
    return turn


def _block(block: dict[str, Any], turn: Turn) -> None:
    if "toolUse" in block:
        use = need(block["toolUse"], dict, "toolUse")
        if use.get("type") != "server_tool_use":
            turn.calls.append(call(use.get("name"), use.get("input"), use.get("toolUseId")))
    elif "toolResult" in block:
        turn.results.append(_tool_result(need(block["toolResult"], dict, "toolResult")))
    elif "reasoningContent" in block:
        turn.reasoning.append(_reasoning_block(need(block["reasoningContent"], dict,
                                                    "reasoningContent")))
    elif "citationsContent" in block:
        cited = need(block["citationsContent"], dict, "citationsContent")
        turn.parts.extend(text(need(item.get("text"), str, "a cited text"))
                          for item in listed(cited.get("content"), "citationsContent.content")
                          if isinstance(item, dict) and "text" in item)
    elif "guardContent" in block:
        guarded = need(block["guardContent"], dict, "guardContent")
        if isinstance(guarded.get("text"), dict):
            turn.parts.append(text(need(guarded["text"].get("text"), str, "a guarded text")))
        elif "image" in guarded:
            turn.parts.append(_media("image", guarded["image"]))
    else:
        part = _content_part(block)
        if part is not None:
            turn.parts.append(part)


def _content_part(block: dict[str, Any]) -> Part | None:
    """A `text`, `image`, `document`, `video` or `audio` block as a part; None for another."""
    if "text" in block:
        return text(need(block["text"], str, "a text block"))
    kind = next((kind for kind in MEDIA if kind in block), None)
    return None if kind is None else _media(kind, block[kind])


def _media(kind: str, block: Any) -> Part:
    source = need(need(block, dict, kind).get("source"), dict, f"{kind}'s source")
    if "bytes" in source:
        return inline_media(kind, source["bytes"])
    if "s3Location" in source:
        location = need(source["s3Location"], dict, "s3Location")
        return url_media(kind, location.get("uri"))
    if "text" in source:
        return _text_digest(kind, need(source["text"], str, f"{kind}'s text"))
    if "content" in source:
        return _text_digest(kind, "".join(
            need(item.get("text"), str, "a document content block")
            for item in need(source["content"], list, f"{kind}'s content")
            if isinstance(item, dict) and "text" in item))
    raise RequestUnreadable(f"{kind} source with none of bytes, s3Location, text, content")


def _text_digest(kind: str, value: str) -> Part:
    return Part(kind, digest="sha256:" + hashlib.sha256(value.encode()).hexdigest())


def _tool_result(result: dict[str, Any]) -> ToolResult:
    parts: list[Part] = []
    for item in listed(result.get("content"), "toolResult.content"):
        item = need(item, dict, "a tool result block")
        if "json" in item:
            parts.append(text(json.dumps(item["json"], ensure_ascii=False)))
        else:
            part = _content_part(item)
            if part is not None:
                parts.append(part)
    status = result.get("status")
    return ToolResult(need(result.get("toolUseId"), str, "a toolResult's toolUseId"), None,
                      tuple(parts), STATUS_ERROR.get(status) if isinstance(status, str) else None)


def _reasoning_block(block: dict[str, Any]) -> Reasoning:
    if "redactedContent" in block:
        return Reasoning("", signed=bool(block["redactedContent"]), redacted=True)
    reasoning = need(block.get("reasoningText"), dict, "reasoningText")
    return Reasoning(need(reasoning.get("text"), str, "reasoningText's text"),
                     signed=bool(reasoning.get("signature")))


def _tool(entry: dict[str, Any]) -> Tool | None:
    if "toolSpec" in entry:
        spec = need(entry["toolSpec"], dict, "toolSpec")
        schema = need(spec.get("inputSchema"), dict, "inputSchema")
        return tool(spec.get("name"), spec.get("description"),
                    need(schema.get("json"), dict, "inputSchema.json"), spec.get("strict"))
    if "systemTool" in entry:
        return tool(need(entry["systemTool"], dict, "systemTool").get("name"), None, None, None)
    return None


def _tool_choice(value: Any) -> ToolChoice | None:
    if value is None:
        return None
    value = need(value, dict, "toolChoice")
    if "tool" in value:
        return choice("function", need(value["tool"], dict, "toolChoice.tool").get("name"))
    if "any" in value:
        return choice("required")
    if "auto" in value:
        return choice("auto")
    raise RequestUnreadable(f"toolChoice {sorted(value)!r}")


def _top_k(extra: dict[str, Any]) -> Any:
    """`top_k` where the model takes it: Anthropic's `top_k`, Nova's `inferenceConfig.topK`."""
    value = extra.get("top_k")
    nova = extra.get("inferenceConfig")
    if value is None and isinstance(nova, dict):
        value = nova.get("topK")
    return sampling({"top_k": value}, {"top_k": "top_k"}).get("top_k")


def _reasoning(extra: dict[str, Any], output: dict[str, Any],
               anthropic_effort: str | None) -> ReasoningSettings:
    """Anthropic's `thinking`, Nova's `reasoningConfig`, and an effort wherever it is said."""
    thinking = thinking_settings(extra.get("thinking"))
    on = thinking.thinking
    effort = output.get("effort") if isinstance(output.get("effort"), str) else anthropic_effort
    nova = extra.get("reasoningConfig")
    if isinstance(nova, dict):
        if on is None and isinstance(nova.get("type"), str):
            on = nova["type"] != "disabled"
        if effort is None and isinstance(nova.get("maxReasoningEffort"), str):
            effort = nova["maxReasoningEffort"]
    if effort is None and isinstance(extra.get("reasoning_effort"), str):
        effort = extra["reasoning_effort"]
    return ReasoningSettings(effort, on, thinking.budget)


def _text_format(value: Any) -> ResponseFormat | None:
    """`outputConfig.textFormat`: a JSON schema, sent as a JSON string."""
    if value is None:
        return None
    value = need(value, dict, "textFormat")
    if value.get("type") != "json_schema":
        raise RequestUnreadable(f"textFormat of type {value.get('type')!r}")
    structure = need(value.get("structure"), dict, "textFormat.structure")
    definition = need(structure.get("jsonSchema"), dict, "textFormat.structure.jsonSchema")
    schema = definition.get("schema")
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as error:
            raise RequestUnreadable(f"textFormat's schema is not JSON: {error}") from error
    normalized = normalize(need(schema, dict, "textFormat's schema"))
    return ResponseFormat("json_schema", normalized, schema_key(normalized))
