"""What a translating gateway does: Chat Completions in front, another dialect behind.

A client speaks OpenAI Chat Completions; the gateway calls a provider that speaks Anthropic
Messages (`anthropic`), OpenAI Responses (`responses`), Ollama (`ollama`,
`calltap.fakes.translate_ollama`), Bedrock Converse (`converse`,
`calltap.fakes.translate_converse`), Google Gemini (`gemini`, `calltap.fakes.translate_gemini`) or
Anthropic Messages on Bedrock's InvokeModel (`bedrock-invoke`, `calltap.fakes.translate_invoke`)
and hands the client Chat Completions back, the way LiteLLM's
routes do it (as measured against LiteLLM 1.108.7):

- the request: `calltap.fakes.translate_request`;
- the answer (`calltap.fakes.chat_answer` builds the Chat side): new `chatcmpl-<uuid>` chunk
  ids; tool indexes renumbered from 0 in the order the calls start (an Anthropic tool block at
  index 1 after a text block is tool index 0); the first fragment of a call carries its id and
  name, later ones `"type": "function"` again; stop reasons mapped (tool_use → tool_calls,
  end_turn and stop_sequence → stop, max_tokens → length, an incomplete response → length);
  usage (input plus cache tokens, output tokens) in a final chunk whose `choices` is
  `[{"index": 0, "delta": {}}]`; `data: [DONE]` after the provider's terminal event, and not
  without it. An `error` event becomes an `{"error": …}` payload.

The stream translators follow `calltap.fakes.defects.Relay`: `feed(payload)` takes one decoded
provider event and returns the Chat Completions payloads it becomes, `end()` what is due when the
provider's stream ended; so any stream defect can be chained after a translation.

One defect belongs to translation itself: LOSE_SECOND_TOOL_USE, a translator that never
translates the second tool call of the provider's answer (stream or JSON, every target), as in
ocp #478.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from calltap.codes import Code
from calltap.fakes.chat_answer import ChatTranslation, completion, keep_calls, usage
from calltap.fakes.defects import Defect, Payload
from calltap.fakes.translate_converse import FromConverse, converse_as_completion
from calltap.fakes.translate_gemini import (
    FromGemini,
    gemini_as_completion,
    gemini_headers,
    gemini_path,
    to_gemini,
)
from calltap.fakes.translate_invoke import invoke_path, to_invoke, unwrap
from calltap.fakes.translate_ollama import FromOllama, ollama_as_completion
from calltap.fakes.translate_request import (
    converse_path,
    to_converse,
    to_messages,
    to_ollama,
    to_responses,
)

ANTHROPIC_VERSION = "2023-06-01"
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}
PROMPT_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")

LOSE_SECOND_TOOL_USE = Defect(
    "lose-second-tool-use",
    "translates only the first of the provider's parallel tool calls",
    "ocp #478",
    "diverged",
    frozenset({Code.TOOL_CALLS_DROPPED, Code.TOOL_CALL_SET_CHANGED}),
)
TRANSLATION_DEFECTS = {LOSE_SECOND_TOOL_USE.name: LOSE_SECOND_TOOL_USE}
"""Defects only a translating gateway can have, by name."""


# The answer: Messages or Responses back to Chat Completions


def chat_usage(counts: Mapping[str, Any]) -> dict[str, Any]:
    """Usage in Chat Completions terms: prompt tokens include the cache tokens."""
    prompt = sum(counts.get(key) or 0 for key in PROMPT_FIELDS)
    cached = counts.get("cache_read_input_tokens") or 0
    return usage(prompt, counts.get("output_tokens") or 0, cached)


class FromMessages(ChatTranslation):
    """An Anthropic Messages stream as Chat Completions chunks."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.counts: dict[str, Any] = {}
        self.finish_reason = "stop"

    def feed(self, payload: Payload) -> list[Payload]:
        if not isinstance(payload, dict):
            return []
        kind = payload.get("type")
        if kind == "message_start":
            message = payload.get("message") or {}
            self.counts.update(message.get("usage") or {})
            return self.open(message.get("id"), message.get("model"))
        if kind == "content_block_start":
            block = payload.get("content_block") or {}
            if block.get("type") == "tool_use":
                return self.call_start(payload.get("index"), block.get("id"), block.get("name"))
            return self.text(block.get("text"))
        if kind == "content_block_delta":
            delta = payload.get("delta") or {}
            if delta.get("type") == "input_json_delta":
                return self.arguments(payload.get("index"), delta.get("partial_json"))
            return self.text(delta.get("text")) if delta.get("type") == "text_delta" else []
        if kind == "message_delta":
            reason = (payload.get("delta") or {}).get("stop_reason")
            self.finish_reason = STOP_REASONS.get(reason, "stop")
            self.counts.update(payload.get("usage") or {})
            return []
        if kind == "message_stop":
            return self.close(self.finish_reason, chat_usage(self.counts))
        if kind == "error":
            return [{"error": payload.get("error") or payload}]
        return []


class FromInvoke(FromMessages):
    """Anthropic Messages events inside Bedrock `chunk` messages, as Chat Completions chunks."""

    def feed(self, payload: Payload) -> list[Payload]:
        event = unwrap(payload)
        return super().feed(event) if event is not None else []


class FromResponses(ChatTranslation):
    """An OpenAI Responses stream as Chat Completions chunks."""

    def feed(self, payload: Payload) -> list[Payload]:
        if not isinstance(payload, dict):
            return []
        kind = payload.get("type")
        response = payload.get("response") or {}
        if kind == "response.created":
            return self.open(response.get("id"), response.get("model"))
        if kind == "response.output_item.added":
            item = payload.get("item") or {}
            if item.get("type") != "function_call":
                return []
            return self.call_start(
                payload.get("output_index"), item.get("call_id"), item.get("name")
            )
        if kind == "response.function_call_arguments.delta":
            return self.arguments(payload.get("output_index"), payload.get("delta"))
        if kind == "response.output_text.delta":
            return self.text(payload.get("delta"))
        if kind in ("response.completed", "response.incomplete"):
            return self.close(
                finish_reason(response, bool(self.calls)), chat_usage(response.get("usage") or {})
            )
        if kind == "response.failed":
            return [{"error": response.get("error") or {"message": "response failed"}}]
        if kind == "error":
            return [{"error": payload.get("error") or payload}]
        return []


def finish_reason(response: dict[str, Any], has_calls: bool) -> str:
    """A final Responses object's status as a Chat Completions finish reason."""
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return INCOMPLETE_REASONS.get(reason, "length")
    return "tool_calls" if has_calls else "stop"


def message_as_completion(
    body: dict[str, Any], *, lose_second_call: bool = False, model: Any = None
) -> Payload:
    """A Messages JSON body as a `chat.completion` body."""
    if body.get("type") == "error":
        return {"error": body.get("error")}
    blocks = [block for block in body.get("content") or () if isinstance(block, dict)]
    text = "".join(block.get("text") or "" for block in blocks if block.get("type") == "text")
    calls = [
        (block.get("id"), block.get("name"), orjson.dumps(block.get("input") or {}).decode())
        for block in blocks
        if block.get("type") == "tool_use"
    ]
    reason = STOP_REASONS.get(body.get("stop_reason"), "stop")
    counts = chat_usage(body.get("usage") or {})
    calls = keep_calls(calls, lose_second_call)
    return completion(body.get("id"), body.get("model") or model, text, calls, reason, counts)


def response_as_completion(
    body: dict[str, Any], *, lose_second_call: bool = False, model: Any = None
) -> Payload:
    """A Responses JSON body as a `chat.completion` body."""
    if body.get("error"):
        return {"error": body["error"]}
    items = [item for item in body.get("output") or () if isinstance(item, dict)]
    text = "".join(
        part.get("text") or ""
        for item in items
        if item.get("type") == "message"
        for part in item.get("content") or ()
        if isinstance(part, dict) and part.get("type") == "output_text"
    )
    calls = [
        (item.get("call_id"), item.get("name"), item.get("arguments") or "")
        for item in items
        if item.get("type") == "function_call"
    ]
    calls = keep_calls(calls, lose_second_call)
    reason = finish_reason(body, bool(calls))
    counts = chat_usage(body.get("usage") or {})
    return completion(body.get("id"), body.get("model") or model, text, calls, reason, counts)


def _anthropic_headers(client: Mapping[str, str], forwarded: bool) -> dict[str, str]:
    """Anthropic's version header, and the client's bearer token as `x-api-key`."""
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    bearer = client.get("Authorization", "")
    if forwarded and bearer.startswith("Bearer "):
        headers["x-api-key"] = bearer.removeprefix("Bearer ")
    return headers


def _bearer_headers(client: Mapping[str, str], forwarded: bool) -> dict[str, str]:
    """The client's Authorization, as it is: a bearer token, a Bedrock API key, or a SigV4
    signature the client made (the gateway signs nothing itself)."""
    bearer = client.get("Authorization")
    return {"Authorization": bearer} if forwarded and bearer else {}


def _no_headers(client: Mapping[str, str], forwarded: bool) -> dict[str, str]:
    """A local Ollama asks for no credentials."""
    return {}


def _fixed(path: str) -> Callable[[dict[str, Any]], str]:
    return lambda chat: path


@dataclass(frozen=True, slots=True)
class Target:
    """A dialect the gateway can translate Chat Completions into."""

    name: str
    path: Callable[[dict[str, Any]], str]
    """The provider's path for a Chat request (Converse puts the model and streaming in it)."""
    request: Callable[[dict[str, Any]], dict[str, Any]]
    headers: Callable[[Mapping[str, str], bool], dict[str, str]]
    """The provider's auth and version headers, from the client's (when they are forwarded)."""
    stream: Callable[..., ChatTranslation]
    """The stream translator: `stream(lose_second_call=…, model=…)`."""
    whole: Callable[..., Payload]
    """The body translator: `whole(body, lose_second_call=…, model=…)`."""


TARGETS = {
    target.name: target
    for target in (
        Target(
            "anthropic",
            _fixed("/v1/messages"),
            to_messages,
            _anthropic_headers,
            FromMessages,
            message_as_completion,
        ),
        Target(
            "responses",
            _fixed("/v1/responses"),
            to_responses,
            _bearer_headers,
            FromResponses,
            response_as_completion,
        ),
        Target(
            "ollama", _fixed("/api/chat"), to_ollama, _no_headers, FromOllama, ollama_as_completion
        ),
        Target(
            "converse",
            converse_path,
            to_converse,
            _bearer_headers,
            FromConverse,
            converse_as_completion,
        ),
        Target("gemini", gemini_path, to_gemini, gemini_headers, FromGemini, gemini_as_completion),
        Target(
            "bedrock-invoke",
            invoke_path,
            lambda chat: to_invoke(to_messages(chat)),
            _bearer_headers,
            FromInvoke,
            message_as_completion,
        ),
    )
}
"""Every translation the gateway offers, by the name a client asks for."""
