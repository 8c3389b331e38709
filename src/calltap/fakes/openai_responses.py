"""The fake provider's OpenAI Responses dialect: `POST /v1/responses`, streamed or whole.

The request is read in Responses terms (`input`, `tools[]` with a top-level `name` and
`parameters`, `tool_choice`, `max_output_tokens`) and answered by the same fake model as Chat
Completions, so the same question gets the same tool calls with the same arguments (a
`tool_choice` naming a function, `{"type": "function", "name": …}`, a call of that one alone). The
answer is framed the way the API documents it, each event with its `event:` line and a
`sequence_number`:

- `response.created` and `response.in_progress` with the response envelope (`output: []`);
- a text answer is one `message` item: `response.output_item.added`,
  `response.content_part.added`, `response.output_text.delta` per piece,
  `response.output_text.done`, `response.content_part.done`, `response.output_item.done`;
- a request that asks for reasoning (`reasoning.effort` other than "none") gets a `reasoning`
  item first, at output_index 0, with an empty `summary` (no summary was asked for): its
  `response.output_item.added` and `response.output_item.done`, as reasoning models send it; the
  answer's items follow at output_index 1, 2, …;
- a tool answer is one `function_call` item per call, one after the other:
  `response.output_item.added` (`id`, `call_id`, `name`, `arguments: ""`), the
  `response.function_call_arguments.delta` fragments by `item_id` and `output_index`,
  `response.function_call_arguments.done`, `response.output_item.done`;
- `response.completed` (or `response.incomplete` with reason `max_output_tokens`) carries the whole
  response with its `output` and `usage`. There is no `[DONE]`.

A JSON answer is that final response object. A request without `input` is rejected (the provider
answers 400 in OpenAI's error shape).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from calltap.fakes.model import CREATED, Answer, fragments

PATH = "/v1/responses"
TOOL_CHOICES = {"none": "none", "required": "required"}


def chat_view(request: dict[str, Any]) -> dict[str, Any]:
    """The request in the fake model's Chat Completions terms; ValueError when the real API would
    reject it."""
    if not isinstance(request.get("input"), str | list):
        raise ValueError("Missing required parameter: 'input'.")
    tools = [
        {
            "type": "function",
            "function": {"name": tool["name"], "parameters": tool.get("parameters")},
        }
        for tool in request.get("tools") or ()
        if isinstance(tool, dict)
        and tool.get("type") == "function"
        and isinstance(tool.get("name"), str)
    ]
    view: dict[str, Any] = {"model": request.get("model"), "tools": tools}
    choice = request.get("tool_choice")
    if isinstance(choice, str) and choice in TOOL_CHOICES:
        view["tool_choice"] = TOOL_CHOICES[choice]
    elif isinstance(choice, dict):
        view["tool_choice"] = named_choice(choice) or "required"
    if isinstance(request.get("max_output_tokens"), int):
        view["max_tokens"] = request["max_output_tokens"]
    reasoning = request.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort", "medium") != "none":
        view["reasoning"] = True
    result = tool_output(request["input"])
    if result is not None:
        view["messages"] = [{"role": "tool", "content": result}]
    return view


def named_choice(choice: dict[str, Any]) -> dict[str, Any] | None:
    """A `tool_choice` naming a function, in Chat Completions terms so the model calls that one
    alone; None for another kind of choice."""
    name = choice.get("name")
    if choice.get("type") != "function" or not isinstance(name, str):
        return None
    return {"type": "function", "function": {"name": name}}


def tool_output(items: str | list[Any]) -> str | None:
    """The output of a `function_call_output` item ending the input (the answer to a call), so
    the model can quote it; None when the input does not end with one."""
    last = items[-1] if isinstance(items, list) and items else None
    if not isinstance(last, dict) or last.get("type") != "function_call_output":
        return None
    output = last.get("output")
    return output if isinstance(output, str) and output else None


def _ids(reply: Answer) -> tuple[str, str]:
    """The response id and the message item id."""
    digest = reply.id.removeprefix("chatcmpl-")
    return "resp_" + digest, "msg_" + digest


def item_id(call: dict[str, Any]) -> str:
    return "fc_" + hashlib.sha256(call["id"].encode()).hexdigest()[:24]


def function_call(call: dict[str, Any], *, done: bool) -> dict[str, Any]:
    """A function_call output item, as added (no arguments yet) or as done."""
    function = call["function"]
    return {
        "id": item_id(call),
        "type": "function_call",
        "status": "completed" if done else "in_progress",
        "arguments": function["arguments"] if done else "",
        "call_id": call["id"],
        "name": function["name"],
    }


def reasoning(reply: Answer) -> dict[str, Any]:
    """The reasoning item that precedes the answer when reasoning was asked for: no summary."""
    return {"id": "rs_" + reply.id.removeprefix("chatcmpl-"), "type": "reasoning", "summary": []}


def message(reply: Answer, text: str, *, done: bool) -> dict[str, Any]:
    """The message output item, as added (no content yet) or as done."""
    content = [{"type": "output_text", "annotations": [], "text": text}] if done else []
    return {
        "id": _ids(reply)[1],
        "type": "message",
        "status": "completed" if done else "in_progress",
        "content": content,
        "role": "assistant",
    }


def response(reply: Answer, view: dict[str, Any], *, done: bool) -> dict[str, Any]:
    """The response object: in progress (no output, no usage) or final."""
    status, incomplete, output, usage = "in_progress", None, [], None
    if done:
        status = "incomplete" if reply.finish_reason == "length" else "completed"
        if status == "incomplete":
            incomplete = {"reason": "max_output_tokens"}
        output = [function_call(call, done=True) for call in reply.tool_calls]
        if reply.content is not None:
            output = [message(reply, reply.content, done=True)]
        if view.get("reasoning"):
            output = [reasoning(reply), *output]
        usage = {
            "input_tokens": reply.usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.usage["total_tokens"],
        }
    return {
        "id": _ids(reply)[0],
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "max_output_tokens": view.get("max_tokens"),
        "model": reply.model,
        "output": output,
        "parallel_tool_calls": True,
        "usage": usage,
    }


def _reasoning_item(reply: Answer) -> list[dict[str, Any]]:
    """The events of the reasoning item, at output_index 0."""
    return [
        {"type": f"response.output_item.{stage}", "output_index": 0, "item": reasoning(reply)}
        for stage in ("added", "done")
    ]


def _text_item(reply: Answer, first: int) -> list[dict[str, Any]]:
    """The events of the message item that holds a text answer, at output_index `first`."""
    item = message(reply, "", done=False)
    where = {"item_id": item["id"], "output_index": first, "content_index": 0}
    part = {"type": "output_text", "annotations": [], "text": ""}
    text = reply.content or ""
    pieces = [delta["content"] for delta in reply.deltas[1:]]
    return [
        {"type": "response.output_item.added", "output_index": first, "item": item},
        {"type": "response.content_part.added", **where, "part": part},
        *({"type": "response.output_text.delta", **where, "delta": piece} for piece in pieces),
        {"type": "response.output_text.done", **where, "text": text},
        {"type": "response.content_part.done", **where, "part": {**part, "text": text}},
        {
            "type": "response.output_item.done",
            "output_index": first,
            "item": message(reply, text, done=True),
        },
    ]


def _call_items(reply: Answer, first: int) -> list[dict[str, Any]]:
    """The events of one function_call item per call, at output_index first, first + 1, …"""
    payloads: list[dict[str, Any]] = []
    for index, call in enumerate(reply.tool_calls, start=first):
        item = function_call(call, done=False)
        where = {"item_id": item["id"], "output_index": index}
        arguments = call["function"]["arguments"]
        payloads.append({"type": "response.output_item.added", "output_index": index, "item": item})
        payloads += [
            {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            for piece in fragments(arguments)
        ]
        payloads.append(
            {"type": "response.function_call_arguments.done", **where, "arguments": arguments}
        )
        payloads.append(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": function_call(call, done=True),
            }
        )
    return payloads


def stream_events(reply: Answer, view: dict[str, Any]) -> list[bytes]:
    """The answer as Responses stream events, the terminal one last; each item is one event."""
    opening = response(reply, view, done=False)
    final = response(reply, view, done=True)
    lead = _reasoning_item(reply) if view.get("reasoning") else []
    first = 1 if lead else 0
    payloads = [
        {"type": "response.created", "response": opening},
        {"type": "response.in_progress", "response": opening},
        *lead,
        *(_call_items(reply, first) if reply.tool_calls else _text_item(reply, first)),
        {"type": f"response.{final['status']}", "response": final},
    ]
    return [
        b"event: %s\ndata: %s\n\n"
        % (payload["type"].encode(), orjson.dumps({**payload, "sequence_number": number}))
        for number, payload in enumerate(payloads)
    ]


def json_body(reply: Answer, view: dict[str, Any]) -> bytes:
    """The answer as a non-streaming `response` body."""
    return orjson.dumps(response(reply, view, done=True))
