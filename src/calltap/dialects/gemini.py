"""Google Gemini (Gemini API and Vertex AI): `GenerateContentResponse` streams and bodies.

`…/models/{model}:streamGenerateContent?alt=sse` streams one `GenerateContentResponse` per `data:`
event; without `alt=sse` the same objects arrive as the elements of one JSON array written
progressively (`jsonarray` reads it, an element per event; a cut array yields the elements it
holds, then SSE_INCOMPLETE_EVENT); `…:generateContent` answers with one object. Gemini API
paths (`/v1beta/models/…`) and Vertex AI paths (`/v1/projects/…/publishers/google/models/…`) end
alike. How each is read:
- `candidates[i]` are the choices, keyed by their `index` (the position in the list when it is
  absent, as proto3's JSON may leave a 0 out), so interleaved candidates reduce to one choice
  each.
- Text is every `text` part of `content.parts` joined in order, across chunks; a part with
  `thought: true` is the model's thinking, not the answer.
- Each `functionCall` part is one whole tool call (`name`, `args` object, optional `id`): there
  are no fragments to join, its arguments are `args` written as JSON (`{}` without `args`), and
  its index is its order of appearance in the choice. Several, in one chunk or across chunks,
  are parallel calls.
- `finishReason` is normalized: STOP is `tool_calls` when the choice made calls and `stop`
  otherwise, MAX_TOKENS is `length`, the filters (SAFETY, RECITATION, LANGUAGE, BLOCKLIST,
  PROHIBITED_CONTENT, SPII and the IMAGE_ kin) are `content_filter`; FINISH_REASON_UNSPECIFIED is
  no reason. The rest pass through: OTHER, and the failures to produce a usable call or answer
  (MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS, MISSING_THOUGHT_SIGNATURE,
  MALFORMED_RESPONSE, NO_IMAGE, IMAGE_OTHER), which no OpenAI reason says: a gateway that turns
  one into `stop` tells the client a failed turn ended well, and is FINISH_REASON_CHANGED.
- There is no terminal marker: the last chunk's `finishReason` is the end. A stream whose choice
  never got one is FINISH_REASON_MISSING, never DONE_MISSING; `terminal_seen` says every choice
  got its finish reason, which is what the proxy asks of a leg it judges complete. An answer with
  no candidate at all, no block reason and no error (an empty stream, `[]`, a stream of another
  dialect's payloads on a Gemini path) never finished either: one FINISH_REASON_MISSING, without
  a choice.
- `usageMetadata` is a snapshot repeated on chunks: the last one wins. Prompt tokens are
  `promptTokenCount`; completion tokens are `candidatesTokenCount` plus `thoughtsTokenCount`
  (OpenAI counts reasoning in completion tokens), unless prompt and candidates already make the
  total, in which case the candidates count holds the thoughts; total is `totalTokenCount`. A
  count left out is 0, as proto3's JSON leaves zeros out (a blocked prompt has no
  `candidatesTokenCount`).
- An `{"error": {code, message, status}}` payload is kept, and is ERROR_IN_STREAM unless the
  status is 4xx/5xx; a payload that is not a JSON object is JSON_INVALID.
- A prompt blocked before any candidate (`promptFeedback.blockReason` and no candidates) is
  choice 0, without text, finished by `content_filter` (the raw reason is the block reason): what
  the client must learn is that the answer was filtered.
Numbers in `args` are doubles, as everywhere: `5` and `5.0` are the same argument.

The request side, for pairing: `conversation` reads a request's conversation and tool names in
the fingerprint's vocabulary, `usage_requested` says whether it asks for usage (always: Gemini
reports it on every answer, and has no option to ask for it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from calltap.codes import Code
from calltap.dialects import gemini_request
from calltap.dialects.base import Conversation, Framing
from calltap.dialects.common import (
    PendingCall,
    Reducer,
    canonical_arguments,
    finish,
    normalize_finish_reason,
    position_of,
    read_object,
    record_error,
    usage_always_given,
)
from calltap.dialects.gemini_request import field
from calltap.sse import Event
from calltap.transcript import (
    Choice,
    Finding,
    FinishReason,
    Position,
    ToolCall,
    Transcript,
    Usage,
)

NAME = "google.gemini"
PATHS = (":streamGenerateContent", ":generateContent")
FRAMING: Framing = "sse"
"""`?alt=sse` streams; the JSON arrays streamed without it come as the same events."""
FILTERED: FinishReason = "content_filter"
FINISH_REASONS: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    **dict.fromkeys(
        (
            "SAFETY",
            "RECITATION",
            "LANGUAGE",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT",
            "IMAGE_RECITATION",
        ),
        FILTERED,
    ),
}
USAGE_KEYS = ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "totalTokenCount")
NO_REASON = frozenset(
    {"FINISH_REASON_UNSPECIFIED", "BLOCK_REASON_UNSPECIFIED", "BLOCKED_REASON_UNSPECIFIED"}
)
"""The enums' default values: no reason given."""


def sniff(payload: Any) -> bool:
    """True when a decoded stream payload or JSON body is a `GenerateContentResponse`: it has
    a `candidates` list, or (a blocked prompt, a usage-only chunk) usage or prompt feedback
    alongside the response's `modelVersion` or `responseId`."""
    if payload.__class__ is not dict:
        return False
    if payload.get("candidates").__class__ is list:
        return True
    return ("usageMetadata" in payload or "promptFeedback" in payload) and (
        "modelVersion" in payload or "responseId" in payload
    )


class _Choice:
    __slots__ = ("calls", "choice", "reason", "text")

    def __init__(self, choice: Choice) -> None:
        self.choice = choice
        self.text: list[str] = []
        self.calls: list[ToolCall] = []
        self.reason: str | None = None


class _Reducer(Reducer):
    """Accumulates one body's candidates; every payload is read, none ends the stream."""

    NAME = NAME

    def __init__(self, streaming: bool, status: int | None) -> None:
        super().__init__(streaming, status)
        self.choices: dict[int, _Choice] = {}
        self.blocked: tuple[str, Position] | None = None

    def stream(self, events: Iterable[Event]) -> Transcript:
        findings = self.transcript.findings
        take = self.read_body
        event = None
        for event in events:
            payload = read_object(event.data, event, findings)
            if payload is not None:
                take(payload, event)
        self.drain(iter(()), event, terminal=False)
        return self.result()

    def read_body(self, payload: dict[str, Any], event: Event | None = None) -> None:
        """One `GenerateContentResponse`: a stream's chunk at `event`, or a whole body."""
        error = payload.get("error")
        if error:
            record_error(self.transcript, error, self.status, position_of(event))
        counts = payload.get("usageMetadata")
        if counts.__class__ is dict:
            usage = _usage(counts)
            if usage is not None:
                self.transcript.usage = usage
                self.transcript.usage_position = position_of(event)
        candidates = payload.get("candidates")
        if candidates.__class__ is list:
            for order, candidate in enumerate(candidates):
                if candidate.__class__ is dict:
                    self.candidate(order, candidate, event)
        feedback = payload.get("promptFeedback")
        if feedback.__class__ is dict and self.blocked is None:
            reason = feedback.get("blockReason")
            if reason and (reason := _text_of(reason)) not in NO_REASON:
                self.blocked = (reason, position_of(event))

    def candidate(self, order: int, candidate: dict[str, Any], event: Event | None) -> None:
        index = candidate.get("index", order)
        if index.__class__ is not int:
            index = order
        state = self.choices.get(index)
        if state is None:
            state = self.choices[index] = _Choice(Choice(index=index, position=position_of(event)))
        content = candidate.get("content")
        if content.__class__ is dict:
            parts = content.get("parts")
            if parts.__class__ is list:
                self.parts(state, parts, event)
        reason = candidate.get("finishReason")
        if reason and (reason := _text_of(reason)) not in NO_REASON:
            state.reason = reason
            state.choice.finish_position = position_of(event)

    def parts(self, state: _Choice, parts: list[Any], event: Event | None) -> None:
        """A chunk's parts of one candidate: answer text, and whole function calls."""
        for part in parts:
            if part.__class__ is not dict:
                continue
            text = part.get("text")
            if text.__class__ is str:
                if text and part.get("thought") is not True:
                    state.text.append(text)
                continue
            call = part.get("functionCall")
            if call.__class__ is dict:
                args = call.get("args")
                arguments = "" if args is None else canonical_arguments(args)
                pending = PendingCall(
                    len(state.calls), call.get("id"), call.get("name"), position_of(event)
                )
                state.calls.append(pending.tool_call(arguments, 1))

    def result(self) -> Transcript:
        transcript = self.transcript
        if not self.choices and self.blocked is not None:
            reason, position = self.blocked
            transcript.choices[0] = Choice(
                index=0,
                finish_reason=FILTERED,
                raw_finish_reason=reason,
                position=position,
                finish_position=position,
            )
        for index in sorted(self.choices):
            state = self.choices[index]
            choice = state.choice
            choice.text = "".join(state.text)
            choice.tool_calls = state.calls
            if state.reason is not None:
                choice.raw_finish_reason = state.reason
                choice.finish_reason = (
                    "tool_calls"
                    if state.reason == "STOP" and state.calls
                    else normalize_finish_reason(state.reason, FINISH_REASONS)
                )
            transcript.choices[index] = choice
        if not transcript.choices and not transcript.errors:
            transcript.findings.append(
                Finding(Code.FINISH_REASON_MISSING, position=transcript.end_position)
            )
        choices = transcript.choices.values()
        transcript.terminal_seen = (
            transcript.streaming
            and bool(choices)
            and all(choice.finish_reason is not None for choice in choices)
        )
        return finish(transcript, marker=False)


def _text_of(reason: Any) -> str:
    return reason if reason.__class__ is str else repr(reason)


def _usage(counts: dict[str, Any]) -> Usage | None:
    """One `usageMetadata` snapshot in OpenAI's terms; None when it holds no count. A count it
    leaves out is 0, the value proto3's JSON leaves out."""
    prompt, candidates, thoughts, total = (_count(counts.get(key)) for key in USAGE_KEYS)
    if prompt is None and candidates is None and thoughts is None and total is None:
        return None
    prompt, candidates = prompt or 0, candidates or 0
    inclusive = total is not None and prompt + candidates == total
    completion = candidates + (0 if inclusive else thoughts or 0)
    return Usage(prompt, completion, prompt + completion if total is None else total)


def _count(value: Any) -> int | None:
    return value if value.__class__ is int else None


reduce_events = _Reducer.reduce_events
reduce_json = _Reducer.reduce_json


usage_requested = usage_always_given
REQUEST = gemini_request


def conversation(request: dict[str, Any]) -> Conversation | None:
    """A Gemini request's conversation and tool names; None without a `contents` list.

    The entries take the Chat Completions message shape the request fingerprint reads, so a
    Gemini request and the Chat request a gateway translated it from (or into) read alike: the
    system instruction is a `system` entry; a `user` content's text is a `user` entry; a
    `model` content's text an `assistant` entry (its function calls carry no text); each
    `functionResponse` part a `tool` entry whose content is its response's text. Both spellings
    the API accepts (`systemInstruction` and `system_instruction`, …) are read; a single part
    object stands for a list of one. Tool names come from `tools[].functionDeclarations[].name`.
    """
    contents = field(request, "contents")
    if contents.__class__ is not list:
        return None
    entries: list[dict[str, Any]] = []
    system = field(request, "systemInstruction")
    if system.__class__ is dict:
        entries.append({"role": "system", "content": _texts(_parts(system))})
    for content in contents:
        if content.__class__ is dict:
            entries.extend(_entries(content))
    return Conversation(entries, _function_names(request.get("tools")))


def _entries(content: dict[str, Any]) -> list[dict[str, Any]]:
    """One `contents` item as Chat-shaped entries, in the order of its parts."""
    role = "assistant" if content.get("role") == "model" else "user"
    entries: list[dict[str, Any]] = []
    texts: list[dict[str, str]] = []
    for part in _parts(content):
        response = field(part, "functionResponse")
        if response.__class__ is dict:
            if texts:
                entries.append({"role": role, "content": texts})
                texts = []
            entries.append({"role": "tool", "content": _response_text(response.get("response"))})
        else:
            texts.extend(_texts([part]))
    if texts or not entries:
        entries.append({"role": role, "content": texts})
    return entries


def _parts(content: dict[str, Any]) -> list[dict[str, Any]]:
    parts = content.get("parts")
    if parts.__class__ is dict:
        parts = [parts]
    if parts.__class__ is not list:
        return []
    return [part for part in parts if part.__class__ is dict]


def _texts(parts: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The text parts, as Chat text parts; thoughts are not the conversation's text."""
    return [
        {"type": "text", "text": part["text"]}
        for part in parts
        if part.get("text").__class__ is str and part.get("thought") is not True
    ]


def _response_text(response: Any) -> str:
    """A function response as the text of a tool message: a string as it is, the string of an
    object with one string member (`{"content": …}`, which gateways wrap a Chat tool message's
    text in; `{"output": …}`), anything else as compact JSON."""
    if response.__class__ is str:
        return response
    if response.__class__ is dict and len(response) == 1:
        (value,) = response.values()
        if value.__class__ is str:
            return value
    return orjson.dumps(response).decode()


def _function_names(tools: Any) -> list[str]:
    if tools.__class__ is not list:
        return []
    names: list[str] = []
    for tool in tools:
        declarations = field(tool, "functionDeclarations") if tool.__class__ is dict else None
        if declarations.__class__ is list:
            names += [
                declaration["name"]
                for declaration in declarations
                if declaration.__class__ is dict and declaration.get("name").__class__ is str
            ]
    return names
