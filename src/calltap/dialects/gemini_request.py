"""The Gemini request side (Gemini API and Vertex AI): a `GenerateContentRequest` body to an `Ask`.

Every field is read by its JSON name or its proto name (`systemInstruction` or
`system_instruction`, `functionCall` or `function_call`: `field`), as the API accepts both; a
single part object stands for a list of one.

- the model and streaming come from the path (`…/models/{model}:streamGenerateContent` streams,
  `:generateContent` does not), the model from the body's `model` when the path names none;
- `systemInstruction`'s parts are the instructions;
- each `contents[]` item is one turn: role `model` the assistant's, `user` (or `function`, or
  none) the user's. Its parts: `text`; `inlineData{mimeType, data}` (by the digest of its bytes)
  and `fileData{mimeType, fileUri}` (by its URI) as media of the kind their type names;
  `functionCall{name, args, id?}` an assistant call; `functionResponse{name, response, id?,
  parts?}` a tool result named by its function (and linked by `id` when one is sent): its text
  is the response's `output` (or, alone, its `error`, which sets the error flag), else the whole
  response, a string as it is, an object of one string member as that string (gateways wrap a
  Chat tool message's text as `{"content": …}`), anything else as compact JSON; its own `parts`
  are its media. A part with `thought: true` is reasoning, signed when it carries a
  `thoughtSignature`; a `thoughtSignature` on any other part (a function call's, Gemini 3's) is
  a signed reasoning entry of its own, without text. Other parts (executable code, its result)
  are skipped. The name is read as given: linking a result to its call is the comparator's job
  (Portkey up to 1.15.2 names a result `gateway-tool-filler-name` when the Chat tool message
  carries no name);
- `tools[].functionDeclarations[]` by name, with `parametersJsonSchema` (full JSON Schema) or
  `parameters` (Gemini's OpenAPI subset: upper-case types and `nullable` read as JSON Schema);
  another tool (`googleSearch`, `codeExecution`, …) by its key in camelCase;
- `toolConfig.functionCallingConfig`: mode `AUTO` and `VALIDATED` are `auto`, `NONE` is `none`,
  `ANY` is `required`, or that function when `allowedFunctionNames` names exactly one;
- `generationConfig`: `temperature`, `topP`, `topK`, `seed`, `presencePenalty`,
  `frequencyPenalty`, `maxOutputTokens`, `stopSequences`; `responseMimeType` with
  `responseJsonSchema` or `responseSchema` (a schema is `json_schema`; `application/json` alone
  `json_object`; another type `text`); `thinkingConfig`: `thinkingBudget` 0 is thinking off
  (without a budget), -1 thinking on at a budget of the model's choosing, another thinking on at
  that budget; `includeThoughts: true` alone is thinking on; `thinkingLevel` (Gemini 3) is the
  effort. Usage is in every answer.

What Gemini can carry (CARRIES): no limit on parallel calls (`parallel_tool_calls: false` a
gateway drops on its way to Gemini is not a loss) and no `strict`. Its function schemas are the
`Schema` object's subset of OpenAPI 3.0 (SCHEMA_LACKS: the JSON Schema keywords that object has
no field for, `additionalProperties` first of them; Vertex AI's `Schema` has lately gained
`additionalProperties`, `ref` and `defs`, the Gemini API's has not).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import orjson

from calltap.ask import (
    SAMPLING_KEYS,
    Ask,
    HistoryCall,
    Part,
    Reasoning,
    ReasoningSettings,
    ResponseFormat,
    Role,
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

NAME = "google.gemini"
CARRIES = frozenset({
    "tool_choice.none", "tool_choice.required", "tool_choice.function",
    *(f"sampling.{key}" for key in SAMPLING_KEYS), "max_output_tokens", "stop",
    "response_format", "reasoning.effort", "reasoning.thinking", "reasoning.budget",
    "history.reasoning", "history.signature", "result.media", "result.error", "media.image",
    "media.audio", "media.video", "media.document", "media.file",
})
SCHEMA_LACKS = frozenset({
    "additionalProperties", "patternProperties", "propertyNames", "unevaluatedProperties",
    "dependentRequired", "dependentSchemas", "dependencies", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "uniqueItems", "contains", "minContains", "maxContains",
    "prefixItems", "additionalItems", "unevaluatedItems", "oneOf", "allOf", "not", "if", "then",
    "else",
})
REQUIRES: frozenset[str] = frozenset()
SAMPLING_NAMES = {"temperature": "temperature", "topP": "top_p", "topK": "top_k", "seed": "seed",
                  "frequencyPenalty": "frequency_penalty", "presencePenalty": "presence_penalty"}
MODES = {"AUTO": "auto", "VALIDATED": "auto", "NONE": "none", "ANY": "required"}
STREAMING = ":streamGenerateContent"
MODEL_SEGMENT = "/models/"


def field(value: dict[str, Any], name: str) -> Any:
    """A request field by its JSON name or its proto name (`functionCall`, `function_call`)."""
    if name in value:
        return value[name]
    return value.get("".join("_" + c.lower() if c.isupper() else c for c in name))


def ask(request: dict[str, Any], path: str = "") -> Ask:
    """A Gemini `generateContent` / `streamGenerateContent` request body, reduced to what it
    asks; `path` names the model and whether it streams."""
    route = path.split("?", 1)[0]
    result = Ask(dialect=NAME, model=_model(request, route))
    system = field(request, "systemInstruction")
    if system is not None:
        result.instructions = _turn(need(system, dict, "systemInstruction"), "user").parts
    for content in need(field(request, "contents"), list, "contents"):
        content = need(content, dict, "a content")
        role = content.get("role")
        if role not in ("user", "model", "function", "", None):
            raise RequestUnreadable(f"a content of role {role!r}")
        result.turns.append(_turn(content, "assistant" if role == "model" else "user"))
    for item in listed(field(request, "tools"), "tools"):
        result.tools += _tools(need(item, dict, "a tool"))
    config = field(request, "toolConfig")
    if config is not None:
        result.tool_choice = _tool_choice(field(need(config, dict, "toolConfig"),
                                                "functionCallingConfig"))
    generation = field(request, "generationConfig")
    if generation is not None:
        _generation(need(generation, dict, "generationConfig"), result)
    result.stream = (True if route.endswith(STREAMING)
                     else False if route.endswith(":generateContent") else None)
    result.usage_requested = True
    return result


def _model(request: dict[str, Any], route: str) -> str | None:
    if MODEL_SEGMENT in route:
        return unquote(route.rsplit(MODEL_SEGMENT, 1)[1].split(":", 1)[0]) or None
    model = request.get("model")
    return model.removeprefix("models/") if isinstance(model, str) else None


def _turn(content: dict[str, Any], role: Role) -> Turn:
    """One `Content` as a turn of `role`, its parts read in order."""
    turn = Turn(role)
    parts = content.get("parts")
    for part in [parts] if isinstance(parts, dict) else listed(parts, "parts"):
        _part(need(part, dict, "a part"), turn)
    return turn


def _part(part: dict[str, Any], turn: Turn) -> None:
    signature = bool(field(part, "thoughtSignature"))
    words = part.get("text")
    if part.get("thought") is True:
        turn.reasoning.append(Reasoning(words if isinstance(words, str) else "", signature))
        return
    call = field(part, "functionCall")
    response = field(part, "functionResponse")
    if isinstance(words, str):
        if words:
            turn.parts.append(text(words))
    elif call is not None:
        call = need(call, dict, "functionCall")
        call_id = call.get("id")
        turn.calls.append(HistoryCall(need(call.get("name"), str, "a call's name"),
                                      arguments_key(call.get("args")),
                                      call_id if isinstance(call_id, str) else None,
                                      call.get("args")))
    elif response is not None:
        turn.results.append(_result(need(response, dict, "functionResponse")))
    else:
        media = _media(part)
        if media is not None:
            turn.parts.append(media)
    if signature:
        turn.reasoning.append(Reasoning("", signed=True))


def _media(part: dict[str, Any]) -> Part | None:
    """An `inlineData` or `fileData` part as a media part; None for any other part."""
    inline = field(part, "inlineData")
    if inline is not None:
        inline = need(inline, dict, "inlineData")
        return inline_media(_kind(inline), inline.get("data"))
    file = field(part, "fileData")
    if file is not None:
        file = need(file, dict, "fileData")
        return url_media(_kind(file), field(file, "fileUri"))
    return None


def _kind(blob: dict[str, Any]) -> str:
    """The media kind an `inlineData` or `fileData` names by its `mimeType`."""
    mime = field(blob, "mimeType")
    return media_kind(None if mime is None else need(mime, str, "a mimeType"))


def _result(response: dict[str, Any]) -> ToolResult:
    """A `functionResponse`: its text (see the module docstring), its media parts, its error."""
    body = response.get("response")
    failed = isinstance(body, dict) and "error" in body and "output" not in body
    if isinstance(body, dict) and ("output" in body or failed):
        body = body["error" if failed else "output"]
    words = _response_text(body)
    parts = [text(words)] if words else []
    nested = response.get("parts")
    for part in [nested] if isinstance(nested, dict) else listed(nested, "a response's parts"):
        media = _media(need(part, dict, "a response part"))
        if media is not None:
            parts.append(media)
    call_id, name = response.get("id"), response.get("name")
    return ToolResult(call_id if isinstance(call_id, str) and call_id else None,
                      name if isinstance(name, str) else None, tuple(parts),
                      True if failed else None)


def _response_text(body: Any) -> str:
    if body is None or isinstance(body, str):
        return body or ""
    if isinstance(body, dict) and len(body) == 1:
        (value,) = body.values()
        if isinstance(value, str):
            return value
    return orjson.dumps(body).decode()


def _tools(item: dict[str, Any]) -> list[Tool]:
    """One `Tool`: its function declarations, or the built-in tool it names."""
    tools: list[Tool] = []
    for key, value in item.items():
        name = "".join(word if i == 0 else word.capitalize()
                       for i, word in enumerate(key.split("_")))
        if name != "functionDeclarations":
            tools.append(tool(name, None, None, None))
            continue
        for declaration in need(value, list, "functionDeclarations"):
            declaration = need(declaration, dict, "a function declaration")
            schema = field(declaration, "parametersJsonSchema")
            if schema is None:
                schema = declaration.get("parameters")
            tools.append(tool(declaration.get("name"), declaration.get("description"), schema,
                              None))
    return tools


def _tool_choice(config: Any) -> ToolChoice | None:
    if config is None:
        return None
    config = need(config, dict, "functionCallingConfig")
    mode = config.get("mode")
    if mode is None or mode == "MODE_UNSPECIFIED":
        return None
    mode = need(mode, str, "a function calling mode").upper()
    if mode not in MODES:
        raise RequestUnreadable(f"function calling mode {mode!r}")
    names = listed(field(config, "allowedFunctionNames"), "allowedFunctionNames")
    if mode == "ANY" and len(names) == 1:
        return choice("function", names[0])
    return choice(MODES[mode])


def _generation(config: dict[str, Any], result: Ask) -> None:
    """`generationConfig`: sampling, limits, the structured output, thinking."""
    result.sampling = sampling({name: field(config, name) for name in SAMPLING_NAMES},
                               SAMPLING_NAMES)
    result.max_output_tokens = optional_int(field(config, "maxOutputTokens"), "maxOutputTokens")
    result.stop = stop_sequences(field(config, "stopSequences"))
    schema = field(config, "responseJsonSchema")
    if schema is None:
        schema = field(config, "responseSchema")
    mime = field(config, "responseMimeType")
    if schema is not None:
        normalized = normalize(schema)
        result.response_format = ResponseFormat("json_schema", normalized, schema_key(normalized))
    elif mime is not None:
        json = need(mime, str, "responseMimeType").lower() == "application/json"
        result.response_format = ResponseFormat("json_object" if json else "text")
    thinking = field(config, "thinkingConfig")
    if thinking is not None:
        result.reasoning = _thinking(need(thinking, dict, "thinkingConfig"))


def _thinking(config: dict[str, Any]) -> ReasoningSettings:
    budget = optional_int(field(config, "thinkingBudget"), "thinkingBudget")
    level = field(config, "thinkingLevel")
    on = None
    if budget is not None:
        on = budget != 0
    elif field(config, "includeThoughts") is True:
        on = True
    return ReasoningSettings(level.lower() if isinstance(level, str) else None, on,
                             budget if budget is not None and budget > 0 else None)
