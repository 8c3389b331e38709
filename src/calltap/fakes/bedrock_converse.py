"""The fake provider's Bedrock Converse dialect: `POST /model/{id}/converse-stream` and
`POST /model/{id}/converse`.

The request is read in Converse terms (the `ConverseRequest` shape of botocore's
`bedrock-runtime` model: `messages` of content blocks, `toolConfig.tools[].toolSpec{name,
inputSchema.json}`, `toolConfig.toolChoice`, `inferenceConfig{maxTokens, stopSequences}`; the model
is in the path, not the body) and answered by the same fake model as Chat Completions, so the same
question gets the same tool calls with the same arguments. The path says whether to stream.

A stream is AWS event stream messages (`calltap.fakes.eventstream`) served as
`application/vnd.amazon.eventstream`, in the order the `ConverseStreamOutput` members describe:

- `messageStart{role}`;
- a text answer is block 0: `contentBlockDelta{delta.text}` per piece, then `contentBlockStop`
  (a text block has no `contentBlockStart`);
- a tool answer is one block per call, one after the other from index 0:
  `contentBlockStart{start.toolUse{toolUseId, name}}`, `contentBlockDelta{delta.toolUse.input}`
  per argument fragment, `contentBlockStop`;
- `messageStop{stopReason}` (tool_use, end_turn, stop_sequence, max_tokens), then
  `metadata{usage, metrics}`.

A JSON answer is `output.message.content[]` (`text` and `toolUse{toolUseId, name, input}` blocks,
`input` an object), `stopReason`, `usage` and `metrics`. A request without `messages` is a 400 with
Bedrock's `{"message": "..."}` body.
"""

from __future__ import annotations

from typing import Any

import orjson

from calltap.fakes import eventstream
from calltap.fakes.model import Answer, fragments

STREAM_PATH = "/model/{model}/converse-stream"
PATH = "/model/{model}/converse"
MEDIA_TYPE = "application/vnd.amazon.eventstream"
STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens", "stop": "end_turn"}
LATENCY_MS = 412
"""The `metrics.latencyMs` of every answer: fixed, like the other dialects' timestamps."""


def chat_view(request: dict[str, Any]) -> dict[str, Any]:
    """The request in the fake model's Chat Completions terms; ValueError when Bedrock would
    reject it."""
    if not isinstance(request.get("messages"), list):
        raise ValueError(
            "1 validation error detected: Value null at 'messages' failed to satisfy constraint: "
            "Member must not be null"
        )
    config = request.get("toolConfig") if isinstance(request.get("toolConfig"), dict) else {}
    choice = config.get("toolChoice") if isinstance(config.get("toolChoice"), dict) else {}
    forced = choice["tool"].get("name") if isinstance(choice.get("tool"), dict) else None
    tools = [
        {
            "type": "function",
            "function": {"name": spec["name"], "parameters": _schema(spec)},
        }
        for spec in _specs(config)
        if forced in (None, spec["name"])
    ]
    view: dict[str, Any] = {"model": None, "tools": tools}
    if "any" in choice or "tool" in choice:
        view["tool_choice"] = "required"
    settings = request.get("inferenceConfig")
    if isinstance(settings, dict):
        if isinstance(settings.get("maxTokens"), int):
            view["max_tokens"] = settings["maxTokens"]
        if settings.get("stopSequences"):
            view["stop"] = settings["stopSequences"]
    return view


def _specs(config: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        tool["toolSpec"]
        for tool in config.get("tools") or ()
        if isinstance(tool, dict)
        and isinstance(tool.get("toolSpec"), dict)
        and isinstance(tool["toolSpec"].get("name"), str)
    ]


def _schema(spec: dict[str, Any]) -> Any:
    schema = spec.get("inputSchema")
    return schema.get("json") if isinstance(schema, dict) else None


def streams_always(request: dict[str, Any]) -> bool:
    """`converse-stream` streams whatever the body says."""
    return True


def streams_never(request: dict[str, Any]) -> bool:
    """`converse` answers whole whatever the body says."""
    return False


def tool_use_id(call: dict[str, Any]) -> str:
    return "tooluse_" + call["id"].removeprefix("call_")[:22]


def stop_reason(reply: Answer, view: dict[str, Any]) -> str:
    if reply.finish_reason == "stop" and "stop" in view:
        return "stop_sequence"
    return STOP_REASONS[reply.finish_reason]


def usage(reply: Answer) -> dict[str, Any]:
    return {
        "inputTokens": reply.usage["prompt_tokens"],
        "outputTokens": reply.usage["completion_tokens"],
        "totalTokens": reply.usage["total_tokens"],
    }


def _blocks(reply: Answer) -> list[tuple[str, Any]]:
    """The content blocks' events, each as (event type, body)."""
    events: list[tuple[str, Any]] = []
    if not reply.tool_calls:
        events += [
            ("contentBlockDelta", {"delta": {"text": delta["content"]}, "contentBlockIndex": 0})
            for delta in reply.deltas[1:]
        ]
        return [*events, ("contentBlockStop", {"contentBlockIndex": 0})]
    for index, call in enumerate(reply.tool_calls):
        function = call["function"]
        tool = {"toolUseId": tool_use_id(call), "name": function["name"]}
        events.append(
            ("contentBlockStart", {"start": {"toolUse": tool}, "contentBlockIndex": index})
        )
        events += [
            (
                "contentBlockDelta",
                {"delta": {"toolUse": {"input": part}}, "contentBlockIndex": index},
            )
            for part in fragments(function["arguments"])
        ]
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
    return events


def stream_events(reply: Answer, view: dict[str, Any]) -> list[bytes]:
    """The answer as ConverseStream messages, `metadata` last; each item is one whole message."""
    events = [
        ("messageStart", {"role": "assistant"}),
        *_blocks(reply),
        ("messageStop", {"stopReason": stop_reason(reply, view)}),
        ("metadata", {"usage": usage(reply), "metrics": {"latencyMs": LATENCY_MS}}),
    ]
    return [eventstream.event(kind, body) for kind, body in events]


def json_body(reply: Answer, view: dict[str, Any]) -> bytes:
    """The answer as a non-streaming Converse body."""
    content: list[dict[str, Any]] = [{"text": reply.content}] if reply.content else []
    for call in reply.tool_calls:
        function = call["function"]
        tool = {
            "toolUseId": tool_use_id(call),
            "name": function["name"],
            "input": orjson.loads(function["arguments"]),
        }
        content.append({"toolUse": tool})
    body = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason(reply, view),
        "usage": usage(reply),
        "metrics": {"latencyMs": LATENCY_MS},
    }
    return orjson.dumps(body)


def error_body(message: str) -> bytes:
    """An error body in Bedrock's shape."""
    return orjson.dumps({"message": message})
