"""Chat Completions to Google Gemini and back, as LiteLLM's `gemini/` route does.

The request (LiteLLM's `litellm/llms/vertex_ai/gemini/transformation.py` builds the same shape):
system messages become `system_instruction.parts`; the other turns become `contents` with role
`user` or `model` and text parts; an assistant's tool calls become `functionCall{name, args}`
parts and a tool message a `functionResponse{name, response: {content}}` part of a user turn (the
name found from the call's id); `tools[].function` become one `{"function_declarations": […]}`
tool; `tool_choice` becomes `toolConfig.functionCallingConfig.mode` (AUTO, ANY, NONE, or ANY with
`allowedFunctionNames` for a named function); `max_tokens`, `stop`, `temperature` and `top_p`
become `generationConfig.max_output_tokens`, `stop_sequences`, `temperature` and `top_p` (the
proto names, as LiteLLM writes them; a 0 is sent). The path is
`/v1beta/models/{model}:streamGenerateContent?alt=sse` for a stream, `:generateContent` else; the
client's bearer token travels as `x-goog-api-key`.

The answer: each `GenerateContentResponse` of candidate 0 is read in order; the first opens the
Chat answer (the `responseId` makes the chunk id, `modelVersion` the model), each `text` part
(not a `thought`) becomes a text chunk, each `functionCall` part a whole call (a new `call_…` id
when Gemini gave none, the name, then the `args` object as JSON text), numbered from 0 across the
stream. The chunk that carries `finishReason` closes it: STOP is `tool_calls` after calls and
`stop` otherwise, MAX_TOKENS `length`, the safety reasons `content_filter`; its `usageMetadata`
(prompt tokens, candidates plus thoughts tokens) is the usage chunk; then `[DONE]`. A stream cut
before a finish reason gets no `[DONE]`. An `{"error": …}` payload is passed on as an error.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import orjson

from calltap.fakes.chat_answer import ChatTranslation, completion, keep_calls, usage
from calltap.fakes.defects import Payload
from calltap.fakes.translate_request import (
    SAMPLING,
    decoded,
    functions,
    numbers,
    text_parts,
    tool_calls,
)

FILTERED = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)
MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}


def gemini_path(chat: dict[str, Any]) -> str:
    """The Gemini API's route for the client's model, streamed over SSE when the client streams."""
    model = quote(str(chat.get("model")), safe="")
    if chat.get("stream") is True:
        return f"/v1beta/models/{model}:streamGenerateContent?alt=sse"
    return f"/v1beta/models/{model}:generateContent"


def gemini_headers(client: Mapping[str, str], forwarded: bool) -> dict[str, str]:
    """The client's bearer token as Gemini's API key header."""
    bearer = client.get("Authorization", "")
    return {"x-goog-api-key": bearer.removeprefix("Bearer ")} if forwarded and bearer else {}


def to_gemini(chat: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request as a Gemini `GenerateContentRequest`."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[Any, Any] = {}
    for message in chat.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        texts = text_parts(message.get("content"))
        parts: list[dict[str, Any]] = [{"text": text} for text in texts]
        if role in ("system", "developer"):
            system += parts
            continue
        if role == "assistant":
            for id_, name, arguments in tool_calls(message):
                names[id_] = name
                parts.append({"functionCall": {"name": name, "args": decoded(arguments)}})
        elif role == "tool":
            name = names.get(message.get("tool_call_id"))
            response = {"content": "".join(texts)}
            parts = [{"functionResponse": {"name": name, "response": response}}]
        _add_turn(contents, "model" if role == "assistant" else "user", parts)
    request: dict[str, Any] = {"contents": contents}
    if system:
        request["system_instruction"] = {"parts": system}
    declarations = [
        {key: function[key] for key in ("name", "description", "parameters") if key in function}
        for function in functions(chat)
    ]
    if declarations:
        request["tools"] = [{"function_declarations": declarations}]
        request.update(_tool_config(chat.get("tool_choice")))
    settings = _generation_config(chat)
    if settings:
        request["generationConfig"] = settings
    return request


def _add_turn(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    """Add parts as a turn, merged into the last one of the same role (Gemini's turns alternate)."""
    if not parts:
        return
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})


def _tool_config(choice: Any) -> dict[str, Any]:
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        config = {"mode": "ANY", "allowedFunctionNames": [choice["function"].get("name")]}
    elif choice in MODES:
        config = {"mode": MODES[choice]}
    else:
        return {}
    return {"toolConfig": {"functionCallingConfig": config}}


def _generation_config(chat: dict[str, Any]) -> dict[str, Any]:
    settings: dict[str, Any] = numbers(chat, SAMPLING)
    limit = chat.get("max_completion_tokens") or chat.get("max_tokens")
    if limit:
        settings["max_output_tokens"] = limit
    stop = chat.get("stop")
    if stop:
        settings["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    return settings


def finish_reason(raw: Any, has_calls: bool) -> str:
    if raw == "MAX_TOKENS":
        return "length"
    if raw in FILTERED:
        return "content_filter"
    return "tool_calls" if has_calls else "stop"


def gemini_usage(counts: Any) -> dict[str, Any]:
    counts = counts if isinstance(counts, dict) else {}
    completion_tokens = (counts.get("candidatesTokenCount") or 0) + (
        counts.get("thoughtsTokenCount") or 0
    )
    cached = counts.get("cachedContentTokenCount") or 0
    return usage(counts.get("promptTokenCount") or 0, completion_tokens, cached)


def first_candidate(payload: dict[str, Any]) -> dict[str, Any]:
    candidates = payload.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
        return candidates[0]
    return {}


def parts_of(candidate: dict[str, Any]) -> list[dict[str, Any]]:
    content = candidate.get("content") if isinstance(candidate.get("content"), dict) else {}
    return [part for part in content.get("parts") or () if isinstance(part, dict)]


def call_id(response_id: Any, number: int) -> str:
    """A new call id, LiteLLM style; derived from the response so that it is reproducible."""
    return "call_" + uuid.uuid5(uuid.NAMESPACE_URL, f"{response_id}:{number}").hex[:24]


class FromGemini(ChatTranslation):
    """A Gemini stream, one `GenerateContentResponse` at a time, as Chat Completions chunks."""

    def feed(self, payload: Payload) -> list[Payload]:
        if not isinstance(payload, dict) or self.closed:
            return []
        if payload.get("error"):
            return [{"error": payload["error"]}]
        out = [] if self.opened else self.open(payload.get("responseId"),
                                                payload.get("modelVersion"))
        candidate = first_candidate(payload)
        for part in parts_of(candidate):
            call = part.get("functionCall")
            if isinstance(call, dict):
                key = self.started
                id_ = call.get("id") or call_id(payload.get("responseId"), key)
                out += self.call_start(key, id_, call.get("name"))
                out += self.arguments(key, orjson.dumps(call.get("args") or {}).decode())
            elif not part.get("thought"):
                out += self.text(part.get("text"))
        reason = candidate.get("finishReason")
        if reason is not None:
            has_calls = self.started > 0
            out += self.close(finish_reason(reason, has_calls),
                              gemini_usage(payload.get("usageMetadata")))
        return out


def gemini_as_completion(
    body: dict[str, Any], *, lose_second_call: bool = False, model: Any = None
) -> Payload:
    """A whole `generateContent` body as a `chat.completion` body."""
    if body.get("error"):
        return {"error": body["error"]}
    candidate = first_candidate(body)
    parts = parts_of(candidate)
    text = "".join(part.get("text") or "" for part in parts if not part.get("thought"))
    calls = [
        (call.get("id") or call_id(body.get("responseId"), number), call.get("name"),
         orjson.dumps(call.get("args") or {}).decode())
        for number, call in enumerate(
            part["functionCall"] for part in parts if isinstance(part.get("functionCall"), dict)
        )
    ]
    reason = finish_reason(candidate.get("finishReason"), bool(calls))
    calls = keep_calls(calls, lose_second_call)
    counts = gemini_usage(body.get("usageMetadata"))
    return completion(body.get("responseId"), body.get("modelVersion") or model, text, calls,
                      reason, counts)
