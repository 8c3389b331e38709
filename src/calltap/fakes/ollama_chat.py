"""The fake provider's Ollama dialect: `POST /api/chat`, streamed (NDJSON) or whole.

The request is read in Ollama's terms (`model`, `messages`, `tools[].function` as in Chat
Completions, `options.num_predict`, `options.stop`) and answered by the same fake model as Chat
Completions, so the same question gets the same tool calls with the same arguments. Ollama streams
unless the request says `"stream": false`. The answer is framed the way Ollama's API docs show it
(`docs/api.md` in ollama/ollama), one compact JSON object per line, `application/x-ndjson`:

- a text answer is one `done: false` line per piece, `message.content` holding the piece;
- a tool answer is one `done: false` line per call, each call whole in `message.tool_calls`
  (`{"function": {"name", "arguments": {…}}}`, arguments an object, no id): Ollama never streams
  a call in fragments;
- the final line has `done: true`, `done_reason` (`stop`, also after tool calls, or `length`), an
  empty `message.content` and the counters: `prompt_eval_count`, `eval_count` and the durations.

A JSON answer is that final line holding the whole message. A request without `model` is a 400
with Ollama's `{"error": "..."}` body.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from calltap.fakes.model import CREATED, Answer

PATH = "/api/chat"
MEDIA_TYPE = "application/x-ndjson"
CREATED_AT = datetime.fromtimestamp(CREATED, UTC).isoformat().replace("+00:00", "Z")
"""Ollama's `created_at`, fixed like the other dialects' `created`."""
NANOSECONDS_PER_TOKEN = 20_000_000
"""How long the fake model takes per token, for the durations of the final line."""


def chat_view(request: dict[str, Any]) -> dict[str, Any]:
    """The request in the fake model's Chat Completions terms; ValueError when Ollama would
    reject it."""
    model = request.get("model")
    if not isinstance(model, str) or not model:
        raise ValueError("model is required")
    tools = [
        tool
        for tool in request.get("tools") or ()
        if isinstance(tool, dict)
        and isinstance(tool.get("function"), dict)
        and isinstance(tool["function"].get("name"), str)
    ]
    view: dict[str, Any] = {"model": model, "tools": tools}
    options = request.get("options")
    if isinstance(options, dict):
        if isinstance(options.get("num_predict"), int):
            view["max_tokens"] = options["num_predict"]
        stop = options.get("stop")
        if stop:
            view["stop"] = stop if isinstance(stop, list) else [stop]
    return view


def streams(request: dict[str, Any]) -> bool:
    """Ollama streams unless told not to."""
    return request.get("stream") is not False


def tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """A call as Ollama writes it: the arguments as an object."""
    function = call["function"]
    return {
        "function": {"name": function["name"], "arguments": orjson.loads(function["arguments"])}
    }


def line(reply: Answer, content: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """One `done: false` line."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {"model": reply.model, "created_at": CREATED_AT, "message": message, "done": False}


def final(reply: Answer, content: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The `done: true` line: the reason and the counters."""
    prompt, completion = reply.usage["prompt_tokens"], reply.usage["completion_tokens"]
    prompt_duration = prompt * NANOSECONDS_PER_TOKEN // 10
    eval_duration = completion * NANOSECONDS_PER_TOKEN
    return {
        **line(reply, content, calls),
        "done_reason": "length" if reply.finish_reason == "length" else "stop",
        "done": True,
        "total_duration": prompt_duration + eval_duration,
        "load_duration": 0,
        "prompt_eval_count": prompt,
        "prompt_eval_duration": prompt_duration,
        "eval_count": completion,
        "eval_duration": eval_duration,
    }


def stream_events(reply: Answer, view: dict[str, Any]) -> list[bytes]:
    """The answer as NDJSON lines, the `done: true` line last; each item is one whole line."""
    lines = [line(reply, "", [tool_call(call)]) for call in reply.tool_calls]
    if not reply.tool_calls:
        lines = [line(reply, delta["content"], []) for delta in reply.deltas[1:]]
    lines.append(final(reply, "", []))
    return [orjson.dumps(one) + b"\n" for one in lines]


def json_body(reply: Answer, view: dict[str, Any]) -> bytes:
    """The answer as a non-streaming body: the final line with the whole message."""
    calls = [tool_call(call) for call in reply.tool_calls]
    return orjson.dumps(final(reply, reply.content or "", calls))


def error_body(message: str) -> bytes:
    """An error body in Ollama's shape."""
    return orjson.dumps({"error": message})
