"""The fake provider's Anthropic Messages dialect: `POST /v1/messages`, streamed or whole.

The request is read in Messages terms (`tools[].input_schema`, `tool_choice.type`,
`stop_sequences`, the required `max_tokens`) and answered by the same fake model as Chat
Completions, so the same question gets the same tool calls with the same arguments. The answer is
framed the way the API frames it (Anthropic's streaming documentation):

- every event has its `event:` line; `message_start` carries the message envelope with the input
  usage, a `ping` follows the first `content_block_start`;
- a text block comes first: the answer itself, or, when tools are offered with `tool_choice` auto
  (as by default), a short sentence saying which tools the model is about to call; with
  `tool_choice` any or tool the model calls at once, as Claude does when the call is forced;
- then one `tool_use` block per call, one after the other: `content_block_start` with
  `"input": {}`, `input_json_delta` fragments of which the first is `""`, `content_block_stop`;
- `message_delta` carries the stop reason (tool_use, end_turn, stop_sequence, max_tokens) and the
  cumulative output tokens; `message_stop` ends the stream.

A JSON answer is a `message` object with `content` blocks (a tool call's `input` is an object) and
the same stop reason. A request without `messages` or `max_tokens` is a 400 in Anthropic's error
shape.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from calltap.fakes.model import Answer, fragments

PATH = "/v1/messages"
STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens", "stop": "end_turn"}
FORCED_TOOL_CHOICES = frozenset({"any", "tool"})
WORD = re.compile(r"\s*\S+")
"""A word with the space before it: how the preamble sentence is streamed."""


def chat_view(request: dict[str, Any]) -> dict[str, Any]:
    """The request in the fake model's Chat Completions terms; ValueError when the real API would
    reject it."""
    if not isinstance(request.get("messages"), list):
        raise ValueError("messages: Field required")
    if not isinstance(request.get("max_tokens"), int):
        raise ValueError("max_tokens: Field required")
    choice = request.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, dict) else None
    forced = choice.get("name") if kind == "tool" and isinstance(choice, dict) else None
    tools = [
        {
            "type": "function",
            "function": {"name": tool["name"], "parameters": tool.get("input_schema")},
        }
        for tool in request.get("tools") or ()
        if isinstance(tool, dict)
        and isinstance(tool.get("name"), str)
        and forced in (None, tool["name"])
    ]
    view: dict[str, Any] = {"model": request.get("model"), "tools": tools}
    view["max_tokens"] = request["max_tokens"]
    if kind == "none":
        view["tool_choice"] = "none"
    elif kind in FORCED_TOOL_CHOICES:
        view["tool_choice"] = "required"
    stops = request.get("stop_sequences")
    if isinstance(stops, list) and stops:
        view["stop"] = stops
    result = tool_result(request.get("messages"))
    if result is not None:
        view["messages"] = [{"role": "tool", "content": result}]
    return view


def tool_result(messages: list[Any]) -> str | None:
    """The text of a `tool_result` block ending the conversation (the user's turn that answers a
    call), so the model can quote it; None when the conversation does not end with one."""
    last = messages[-1] if messages else None
    blocks = last.get("content") if isinstance(last, dict) else None
    block = blocks[-1] if isinstance(blocks, list) and blocks else None
    if not isinstance(block, dict) or block.get("type") != "tool_result":
        return None
    content = block.get("content")
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        content = "".join(text for text in texts if isinstance(text, str))
    return content if isinstance(content, str) and content else None


def preamble(reply: Answer, view: dict[str, Any]) -> str:
    """What the model says before its tool calls: nothing when the call was forced."""
    if not reply.tool_calls or view.get("tool_choice") == "required":
        return ""
    names = " and ".join(call["function"]["name"] for call in reply.tool_calls)
    return f"I'll look that up with {names}."


def text_pieces(reply: Answer, view: dict[str, Any]) -> list[str]:
    """The text block's deltas, in order (none when there is no text block)."""
    if reply.tool_calls:
        return WORD.findall(preamble(reply, view))
    return [delta["content"] for delta in reply.deltas[1:]]


def message_id(reply: Answer) -> str:
    return "msg_" + reply.id.removeprefix("chatcmpl-")


def tool_use_id(call: dict[str, Any]) -> str:
    return "toolu_" + call["id"].removeprefix("call_")


def stop_reason(reply: Answer, view: dict[str, Any]) -> tuple[str, str | None]:
    """The stop reason and the stop sequence that ended the text, if one did."""
    if reply.finish_reason == "stop" and "stop" in view:
        return "stop_sequence", view["stop"][0]
    return STOP_REASONS[reply.finish_reason], None


def output_tokens(reply: Answer, view: dict[str, Any]) -> int:
    preamble_tokens = len(text_pieces(reply, view)) if reply.tool_calls else 0
    return reply.usage["completion_tokens"] + preamble_tokens


def usage(reply: Answer, output: int) -> dict[str, Any]:
    return {
        "input_tokens": reply.usage["prompt_tokens"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output,
        "service_tier": "standard",
    }


def event(payload: dict[str, Any]) -> bytes:
    """One SSE event with its `event:` line, as the API writes it."""
    return b"event: %s\ndata: %s\n\n" % (payload["type"].encode(), orjson.dumps(payload))


def stream_payloads(reply: Answer, view: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer as Messages stream events' payloads, `message_stop` last."""
    message = {
        "id": message_id(reply),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage(reply, 1),
    }
    payloads: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    pieces = text_pieces(reply, view)
    if pieces:
        text_deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
        blocks.append(({"type": "text", "text": ""}, text_deltas))
    for call in reply.tool_calls:
        start = {"type": "tool_use", "id": tool_use_id(call), "name": call["function"]["name"]}
        json_parts = ["", *fragments(call["function"]["arguments"])]
        json_deltas = [{"type": "input_json_delta", "partial_json": part} for part in json_parts]
        blocks.append(({**start, "input": {}}, json_deltas))
    for index, (block, deltas) in enumerate(blocks):
        payloads.append({"type": "content_block_start", "index": index, "content_block": block})
        if index == 0:
            payloads.append({"type": "ping"})
        payloads += [
            {"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas
        ]
        payloads.append({"type": "content_block_stop", "index": index})
    reason, sequence = stop_reason(reply, view)
    payloads.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": sequence},
            "usage": {"output_tokens": output_tokens(reply, view)},
        }
    )
    payloads.append({"type": "message_stop"})
    return payloads


def stream_events(reply: Answer, view: dict[str, Any]) -> list[bytes]:
    """The answer as Messages stream events, `message_stop` last; each item is one whole event."""
    return [event(payload) for payload in stream_payloads(reply, view)]


def json_body(reply: Answer, view: dict[str, Any]) -> bytes:
    """The answer as a non-streaming `message` body."""
    content: list[dict[str, Any]] = []
    text = "".join(text_pieces(reply, view))
    if text:
        content.append({"type": "text", "text": text})
    for call in reply.tool_calls:
        function = call["function"]
        content.append(
            {
                "type": "tool_use",
                "id": tool_use_id(call),
                "name": function["name"],
                "input": orjson.loads(function["arguments"]),
            }
        )
    reason, sequence = stop_reason(reply, view)
    body = {
        "id": message_id(reply),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage(reply, output_tokens(reply, view)),
    }
    return orjson.dumps(body)


def error_body(message: str, kind: str = "invalid_request_error") -> bytes:
    """An error body in Anthropic's shape."""
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
