"""An Ollama `/api/chat` answer back into Chat Completions, as LiteLLM's `ollama_chat` route does.

Each line's `message.content` becomes a text chunk; each call in `message.tool_calls` arrives whole
and becomes a call of its own (a first fragment with a new `call_…` id, since Ollama gives none,
and the name, then the arguments object as JSON text), numbered from 0 across lines; the
`done: true` line becomes the finish chunk (`length` for `done_reason` length, else tool_calls
when calls were made, else stop), the usage chunk (`prompt_eval_count`, `eval_count`) and
`[DONE]`. A line with an `error` becomes an `{"error": …}` payload. A whole body (the final line
holding the whole message) becomes a `chat.completion`.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from calltap.fakes.chat_answer import ChatTranslation, completion, keep_calls, usage
from calltap.fakes.defects import Payload


def call_id(created_at: Any, number: int) -> str:
    """A new call id, LiteLLM style; derived from the line so that it is reproducible."""
    return "call_" + uuid.uuid5(uuid.NAMESPACE_URL, f"{created_at}:{number}").hex[:24]


def arguments_text(arguments: Any) -> str:
    """Ollama's arguments object as the JSON text a Chat Completions call carries."""
    return arguments if isinstance(arguments, str) else orjson.dumps(arguments or {}).decode()


def finish_reason(line: dict[str, Any], has_calls: bool) -> str:
    if line.get("done_reason") == "length":
        return "length"
    return "tool_calls" if has_calls else "stop"


def line_usage(line: dict[str, Any]) -> dict[str, Any]:
    return usage(line.get("prompt_eval_count") or 0, line.get("eval_count") or 0)


def whole_calls(line: dict[str, Any]) -> list[dict[str, Any]]:
    message = line.get("message")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return [call for call in calls or () if isinstance(call, dict)]


class FromOllama(ChatTranslation):
    """An Ollama NDJSON stream, one decoded line at a time, as Chat Completions chunks."""

    def feed(self, payload: Payload) -> list[Payload]:
        if not isinstance(payload, dict) or self.closed:
            return []
        if payload.get("error"):
            return [{"error": {"message": payload["error"]}}]
        out = [] if self.opened else self.open(payload.get("created_at"), payload.get("model"))
        message = payload.get("message")
        if isinstance(message, dict):
            out += self.text(message.get("content"))
        for call in whole_calls(payload):
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            key = self.started
            id_ = call.get("id") or call_id(payload.get("created_at"), key)
            out += self.call_start(key, id_, function.get("name"))
            out += self.arguments(key, arguments_text(function.get("arguments")))
        if payload.get("done") is True:
            out += self.close(finish_reason(payload, self.started > 0), line_usage(payload))
        return out


def ollama_as_completion(
    body: dict[str, Any], *, lose_second_call: bool = False, model: Any = None
) -> Payload:
    """A whole `/api/chat` body as a `chat.completion` body."""
    if body.get("error"):
        return {"error": {"message": body["error"]}}
    message = body.get("message") if isinstance(body.get("message"), dict) else {}
    text = message.get("content") or ""
    calls = []
    for number, call in enumerate(whole_calls(body)):
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        id_ = call.get("id") or call_id(body.get("created_at"), number)
        calls.append((id_, function.get("name"), arguments_text(function.get("arguments"))))
    reason = finish_reason(body, bool(calls))
    calls = keep_calls(calls, lose_second_call)
    upstream_id = body.get("created_at")
    return completion(
        upstream_id, body.get("model") or model, text, calls, reason, line_usage(body)
    )
