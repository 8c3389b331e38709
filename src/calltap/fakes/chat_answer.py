"""The Chat Completions side of every translation the fake gateway makes: the answer it hands
its client, whichever dialect the provider spoke.

`ChatTranslation` is the base of the stream translators (`calltap.fakes.defects.Relay`): chunk
envelopes with a new `chatcmpl-<uuid>` id, tool indexes renumbered from 0 in the order the calls
start, the finish chunk, the usage chunk and `[DONE]`, and the translator that loses the second
call. `completion` builds a whole `chat.completion` body the same way.
"""

from __future__ import annotations

import uuid
from typing import Any

from calltap.fakes.defects import DONE, Payload, Relay
from calltap.fakes.model import CREATED


def usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    """Usage in Chat Completions terms, as LiteLLM reports it."""
    return {
        "completion_tokens": completion,
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def chunk_id(upstream_id: Any) -> str:
    """A new chunk id, LiteLLM style; derived from the provider's id so it is reproducible."""
    return f"chatcmpl-{uuid.uuid5(uuid.NAMESPACE_URL, str(upstream_id))}"


class ChatTranslation(Relay):
    """The Chat Completions side of a stream translation: chunk envelopes, renumbered tool
    indexes, the finish chunk, the usage chunk and `[DONE]`."""

    def __init__(self, *, lose_second_call: bool = False, model: Any = None) -> None:
        self.lose_second_call = lose_second_call
        self.id = chunk_id(None)
        self.model: Any = model
        """The model the client asked for: what the chunks say when the provider says none."""
        self.calls: dict[Any, int] = {}
        """The provider's key of each translated call (block index, output index) -> tool index."""
        self.lost: set[Any] = set()
        self.started = 0
        self.opened = False
        self.closed = False

    def open(self, upstream_id: Any, model: Any) -> list[Payload]:
        self.id, self.model = chunk_id(upstream_id), model or self.model
        self.opened = True
        return [self.chunk({"role": "assistant", "content": ""})]

    def chunk(self, delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "created": CREATED,
            "model": self.model,
            "object": "chat.completion.chunk",
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, **extra}],
        }

    def call_start(self, key: Any, call_id: Any, name: Any) -> list[Payload]:
        """A call begins: its first fragment, unless this translator loses it."""
        self.started += 1
        if self.lose_second_call and self.started == 2:
            self.lost.add(key)
            return []
        index = self.calls[key] = len(self.calls)
        fragment = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
            "index": index,
        }
        return [self.chunk({"content": "", "tool_calls": [fragment]})]

    def arguments(self, key: Any, text: Any) -> list[Payload]:
        if key in self.lost or key not in self.calls or not isinstance(text, str) or not text:
            return []
        fragment = {"type": "function", "function": {"arguments": text}, "index": self.calls[key]}
        return [self.chunk({"content": "", "tool_calls": [fragment]})]

    def text(self, text: Any) -> list[Payload]:
        return [self.chunk({"content": text})] if isinstance(text, str) and text else []

    def close(self, finish_reason: str, usage: dict[str, Any] | None) -> list[Payload]:
        """The finish chunk, the usage chunk (when the provider gave usage) and `[DONE]`."""
        self.closed = True
        usage_chunks = [{**self.chunk({}), "usage": usage}] if usage is not None else []
        return [self.chunk({}, finish_reason=finish_reason), *usage_chunks, DONE]


def completion(
    upstream_id: Any,
    model: Any,
    text: str,
    calls: list[tuple[Any, Any, str]],
    reason: str,
    usage: dict[str, Any],
) -> dict[str, Any]:
    """A `chat.completion` body."""
    message: dict[str, Any] = {"content": text or None, "role": "assistant"}
    if calls:
        message["tool_calls"] = [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}
            for id_, name, arguments in calls
        ]
    return {
        "id": chunk_id(upstream_id),
        "created": CREATED,
        "model": model,
        "object": "chat.completion",
        "system_fingerprint": None,
        "choices": [{"finish_reason": reason, "index": 0, "message": message}],
        "usage": usage,
    }


def keep_calls(calls: list[tuple[Any, Any, str]], lose_second_call: bool) -> list:
    """The calls a translator passes on: all, or all but the second."""
    return calls[:1] + calls[2:] if lose_second_call else calls
