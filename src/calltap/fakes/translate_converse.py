"""A Bedrock Converse answer back into Chat Completions, as LiteLLM's `bedrock/converse` route
does.

The stream arrives as decoded event stream messages, `{event type: body}` (the shape botocore
gives an event), or `{"error": {type, message}}` for an `exception` message:
- `messageStart` opens the answer (the model is the client's: Converse never names it);
- `contentBlockDelta.delta.text` becomes a text chunk;
- `contentBlockStart.start.toolUse` starts a call (its `toolUseId` and `name`), keyed by
  `contentBlockIndex`, and each `contentBlockDelta.delta.toolUse.input` fragment becomes an
  argument fragment of that call; tool indexes are renumbered from 0;
- `messageStop.stopReason` is kept (tool_use → tool_calls, end_turn and stop_sequence → stop,
  max_tokens → length, guardrail_intervened and content_filtered → content_filter);
- `metadata.usage`, which follows `messageStop`, closes the answer: the finish chunk, the usage
  chunk, `[DONE]`. A stream that ends after `messageStop` without `metadata` is closed without
  usage; one that ends before `messageStop` gets no `[DONE]`.

A whole body (`output.message.content[]`, `stopReason`, `usage`) becomes a `chat.completion`.
"""

from __future__ import annotations

from typing import Any

import orjson

from calltap.fakes.chat_answer import ChatTranslation, completion, keep_calls, usage
from calltap.fakes.defects import Payload

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}


def converse_usage(counts: Any) -> dict[str, Any]:
    """Converse's `usage` in Chat Completions terms: prompt tokens include the cache tokens."""
    counts = counts if isinstance(counts, dict) else {}
    cached = counts.get("cacheReadInputTokens") or 0
    prompt = (counts.get("inputTokens") or 0) + cached + (counts.get("cacheWriteInputTokens") or 0)
    return usage(prompt, counts.get("outputTokens") or 0, cached)


def event_of(payload: Payload) -> tuple[str, dict[str, Any]]:
    """The event type and body of one decoded message; ("", {}) for anything else."""
    if isinstance(payload, dict) and len(payload) == 1:
        kind, body = next(iter(payload.items()))
        if isinstance(body, dict):
            return kind, body
    return "", {}


class FromConverse(ChatTranslation):
    """A ConverseStream answer, one decoded message at a time, as Chat Completions chunks."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.stop_reason: str | None = None
        """The finish reason, once `messageStop` said it."""

    def feed(self, payload: Payload) -> list[Payload]:
        kind, body = event_of(payload)
        if self.closed or not kind:
            return []
        if kind == "error":
            return [{"error": body}]
        if kind == "messageStart":
            return [] if self.opened else self.open(None, None)
        if kind == "contentBlockStart":
            tool = (body.get("start") or {}).get("toolUse")
            if not isinstance(tool, dict):
                return []
            index = body.get("contentBlockIndex")
            return self.call_start(index, tool.get("toolUseId"), tool.get("name"))
        if kind == "contentBlockDelta":
            delta = body.get("delta") or {}
            if isinstance(delta.get("toolUse"), dict):
                return self.arguments(body.get("contentBlockIndex"), delta["toolUse"].get("input"))
            return self.text(delta.get("text"))
        if kind == "messageStop":
            self.stop_reason = STOP_REASONS.get(body.get("stopReason"), "stop")
            return []
        if kind == "metadata" and self.stop_reason is not None:
            return self.close(self.stop_reason, converse_usage(body.get("usage")))
        return []

    def end(self) -> list[Payload]:
        if self.closed or self.stop_reason is None:
            return []
        return self.close(self.stop_reason, None)


def converse_as_completion(
    body: dict[str, Any], *, lose_second_call: bool = False, model: Any = None
) -> Payload:
    """A whole Converse body as a `chat.completion` body."""
    output = body.get("output") if isinstance(body.get("output"), dict) else {}
    message = output.get("message") if isinstance(output.get("message"), dict) else {}
    blocks = [block for block in message.get("content") or () if isinstance(block, dict)]
    text = "".join(block["text"] for block in blocks if isinstance(block.get("text"), str))
    calls = [
        (tool.get("toolUseId"), tool.get("name"), orjson.dumps(tool.get("input") or {}).decode())
        for tool in (block.get("toolUse") for block in blocks)
        if isinstance(tool, dict)
    ]
    reason = STOP_REASONS.get(body.get("stopReason"), "stop")
    calls = keep_calls(calls, lose_second_call)
    return completion(None, model, text, calls, reason, converse_usage(body.get("usage")))
