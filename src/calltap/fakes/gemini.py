"""The fake provider's Google Gemini dialect: `generateContent` and `streamGenerateContent`, on
the Gemini API's paths (`/v1beta/models/{model}:…`) and Vertex AI's
(`/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:…`).

The request is read in Gemini terms (the `GenerateContentRequest` of Google's REST reference:
`contents` of `parts`, `tools[].functionDeclarations[]{name, description, parameters}`,
`toolConfig.functionCallingConfig{mode, allowedFunctionNames}`, `generationConfig{maxOutputTokens,
stopSequences}`; proto3 JSON also accepts the snake_case names, which LiteLLM sends) and answered
by the same fake model as Chat Completions, so the same question gets the same calls with the
same arguments. Gemini's schemas may spell types in capitals (`STRING`); they are read as JSON
Schema's.

The answer is `GenerateContentResponse` objects in the shapes `tests/fixtures/gemini/README.md`
traces to the Gemini API reference, Google's SDK types and a recorded `gemini-2.5-flash` stream:
`candidates[0]` with `content{role: "model", parts}` and `index`, a `usageMetadata` snapshot
(`promptTokenCount`, `candidatesTokenCount`, `totalTokenCount`) on every chunk, `modelVersion`
and `responseId`:
- a text answer is one chunk per piece, the last with `finishReason` (`STOP`, `MAX_TOKENS`);
- a tool answer is one chunk holding every call as a `functionCall{name, args}` part (whole
  arguments, no fragments, no id), with `finishReason: STOP` (Gemini says STOP after calls too)
  and the `finishMessage` the recorded stream has beside it.

`streamGenerateContent?alt=sse` streams each object as an SSE `data:` event ended by CRLF CRLF;
without `alt=sse` the stream is one JSON array written progressively as Google's servers frame it:
`\\n,\\r\\n` between elements and `\\n]` at the end (`[{…}\\n,\\r\\n{…}\\n]`), served as
`application/json`. Clients of the endpoint split on that separator: Portkey 1.15.2's Gemini route
splits on `\\r\\n`, then strips a trailing `,` from each piece and `\\n]` from the last
(`GoogleChatCompleteStreamChunkTransform`), and reads nothing past the first element otherwise.
`generateContent` answers one object with every part. A request without
`contents` is a 400 with Google's `{"error": {code, message, status}}` body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from calltap.fakes.model import Answer

STREAM_SUFFIX = ":streamGenerateContent"
WHOLE_SUFFIX = ":generateContent"
GEMINI_API = "/v1beta/models/{model}"
VERTEX_AI = "/v1/projects/{project}/locations/{location}/publishers/google/models/{model}"
PATHS = tuple(base + suffix for base in (GEMINI_API, VERTEX_AI)
              for suffix in (STREAM_SUFFIX, WHOLE_SUFFIX))
"""Every route, `{model}` (and Vertex AI's `{project}`, `{location}`) standing for its value."""
SSE_TYPE = "text/event-stream"
ARRAY_TYPE = "application/json; charset=UTF-8"
FINISH_REASONS = {"tool_calls": "STOP", "stop": "STOP", "length": "MAX_TOKENS"}
MODES = {"ANY": "required", "NONE": "none"}
CALLS_MESSAGE = "Model generated function call(s)."


def field(value: dict[str, Any], camel: str, snake: str) -> Any:
    """A field by its proto3 JSON name or its proto name, as the API accepts either."""
    return value[camel] if camel in value else value.get(snake)


def chat_view(request: dict[str, Any]) -> dict[str, Any]:
    """The request in the fake model's Chat Completions terms; ValueError when Gemini would
    reject it."""
    if not isinstance(request.get("contents"), list):
        raise ValueError("* GenerateContentRequest.contents: contents is not specified")
    config = field(request, "toolConfig", "tool_config")
    calling = field(config, "functionCallingConfig", "function_calling_config") if isinstance(
        config, dict) else None
    calling = calling if isinstance(calling, dict) else {}
    allowed = field(calling, "allowedFunctionNames", "allowed_function_names")
    tools = [
        {"type": "function",
         "function": {"name": declaration["name"], "parameters": _parameters(declaration)}}
        for declaration in _declarations(request.get("tools"))
        if not allowed or declaration["name"] in allowed
    ]
    view: dict[str, Any] = {"model": None, "tools": tools}
    mode = calling.get("mode")
    mode = MODES.get(mode.upper()) if isinstance(mode, str) else None
    if mode is not None:
        view["tool_choice"] = mode
    settings = field(request, "generationConfig", "generation_config")
    if isinstance(settings, dict):
        limit = field(settings, "maxOutputTokens", "max_output_tokens")
        if isinstance(limit, int):
            view["max_tokens"] = limit
        stops = field(settings, "stopSequences", "stop_sequences")
        if stops:
            view["stop"] = stops
    return view


def _declarations(tools: Any) -> list[dict[str, Any]]:
    return [
        declaration
        for tool in tools or ()
        if isinstance(tool, dict)
        for declaration in field(tool, "functionDeclarations", "function_declarations") or ()
        if isinstance(declaration, dict) and isinstance(declaration.get("name"), str)
    ]


def _parameters(declaration: dict[str, Any]) -> Any:
    schema = declaration.get("parameters")
    if schema is None:
        schema = field(declaration, "parametersJsonSchema", "parameters_json_schema")
    return _json_schema_types(schema)


def _json_schema_types(schema: Any) -> Any:
    """A Gemini schema with its types in JSON Schema's lower case (`STRING` is `string`)."""
    if isinstance(schema, list):
        return [_json_schema_types(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    typed = {name: _json_schema_types(value) for name, value in schema.items()}
    if isinstance(typed.get("type"), str):
        typed["type"] = typed["type"].lower()
    return typed


def usage(reply: Answer) -> dict[str, Any]:
    return {
        "promptTokenCount": reply.usage["prompt_tokens"],
        "candidatesTokenCount": reply.usage["completion_tokens"],
        "totalTokenCount": reply.usage["total_tokens"],
    }


def response_id(reply: Answer) -> str:
    return reply.id.removeprefix("chatcmpl-")


def chunk(reply: Answer, parts: list[dict[str, Any]], finish: bool) -> dict[str, Any]:
    """One `GenerateContentResponse`; the last of an answer carries the finish reason."""
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish:
        candidate["finishReason"] = FINISH_REASONS[reply.finish_reason]
        if reply.tool_calls:
            candidate["finishMessage"] = CALLS_MESSAGE
    candidate["index"] = 0
    return {
        "candidates": [candidate],
        "usageMetadata": usage(reply),
        "modelVersion": reply.model,
        "responseId": response_id(reply),
    }


def function_calls(reply: Answer) -> list[dict[str, Any]]:
    return [
        {"functionCall": {"name": call["function"]["name"],
                          "args": orjson.loads(call["function"]["arguments"])}}
        for call in reply.tool_calls
    ]


def chunks(reply: Answer, *, calls_apart: bool = False) -> list[dict[str, Any]]:
    """The answer as the objects a stream holds, in order; with `calls_apart`, one chunk per
    call, each call its chunk's `parts[0]`, the finish reason on the last."""
    if reply.tool_calls and calls_apart:
        calls = function_calls(reply)
        return [chunk(reply, [call], n == len(calls) - 1) for n, call in enumerate(calls)]
    if reply.tool_calls:
        return [chunk(reply, function_calls(reply), True)]
    pieces = [delta["content"] for delta in reply.deltas[1:]]
    return [chunk(reply, [{"text": piece}], n == len(pieces) - 1) for n, piece in enumerate(pieces)]


def streams_by_path(path: str) -> bool:
    return path.endswith(STREAM_SUFFIX)


def media_type(query: Mapping[str, str]) -> str:
    """SSE for `alt=sse`, else the JSON array."""
    return SSE_TYPE if query.get("alt") == "sse" else ARRAY_TYPE


def stream_events(reply: Answer, view: dict[str, Any], *,
                  calls_apart: bool = False) -> list[bytes]:
    """The answer as SSE events (`alt=sse` in the view's query) or as the pieces of a JSON array
    written progressively; each item is written at once."""
    objects = [orjson.dumps(one) for one in chunks(reply, calls_apart=calls_apart)]
    if view.get("query", {}).get("alt") == "sse":
        return [b"data: " + one + b"\r\n\r\n" for one in objects]
    return [(b"[" if n == 0 else b"\n,\r\n") + one for n, one in enumerate(objects)] + [b"\n]"]


def stream_calls_apart(reply: Answer, view: dict[str, Any]) -> list[bytes]:
    """The stream with each parallel call in a chunk of its own: how Gemini also streams them
    (NousResearch/hermes-agent #101536 captured `gemini-3.6-flash` sending three parallel calls as
    three chunks, each call its chunk's `parts[0]`; su-kaka/gcli2api #406 is the same shape)."""
    return stream_events(reply, view, calls_apart=True)


def json_body(reply: Answer, view: dict[str, Any]) -> bytes:
    """The answer as a `generateContent` body: every part in one candidate."""
    parts = function_calls(reply) if reply.tool_calls else [{"text": reply.content or ""}]
    return orjson.dumps(chunk(reply, parts, True))


def error_body(message: str) -> bytes:
    """An error body in Google's shape."""
    return orjson.dumps({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
