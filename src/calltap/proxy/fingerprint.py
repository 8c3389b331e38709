"""A content fingerprint of a chat-like request, for pairing legs when a gateway forwards no
header that links them.

The front leg and the back leg of one request may be in different dialects (a gateway
translates OpenAI Chat Completions into Anthropic Messages or OpenAI Responses) and the
gateway reshapes the conversation on the way: it moves system messages to a top-level
`system`, merges consecutive user and tool messages into one message of blocks, turns a
string into a list of text blocks, drops null fields, adds `max_tokens`, renames models.
What survives all of that is the content of the conversation's last turn and the set of
tool names, so the fingerprint is the sha256 of exactly those:

- the last turn is the trailing run of entries from the same side as the last entry
  (usually the user's message, or the tool results answering the model's tool calls);
  system and developer entries are skipped, wherever they are;
- it becomes a list of units: `("tool", text)` per tool result, `("text", text)` per run
  of adjacent text, the parts concatenated as a gateway flattening parts into a string
  does, with whitespace stripped at both ends of each unit and never inside; empty text
  runs are dropped; images, documents and tool calls carry no text and are skipped;
- tool names are the ones the dialect reads from its request (`tools[].function.name` in
  Chat Completions and Ollama, `tools[].name` in Messages and Responses, the legacy
  `functions[].name`, `toolConfig.tools[].toolSpec.name` in Bedrock Converse), sorted.

Which entries make the conversation is the dialect's knowledge, not this module's: the dialect
the request path names (`calltap.dialects.request_conversation`; Chat Completions' reading on a
path no dialect names) hands over its entries in one vocabulary, and the rules above apply to
them whatever the dialect.

Model, sampling settings, ids and earlier turns are left out on purpose: gateways rewrite
them. Equal fingerprints therefore mean "probably the same request"; the pairing book
resolves identical requests in arrival order.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import orjson

from calltap.dialects import request_conversation

Speaker = Literal["assistant", "client"]
Unit = tuple[Literal["text", "tool"], str]

_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_TOOL_RESULT_ROLES = frozenset({"tool", "function"})


def request_fingerprint(body: bytes, path: str) -> str | None:
    """sha256 hex of the request's last turn and tool names, or None when the body is not a
    JSON chat-like request of the dialect its path names. Never raises."""
    return _fingerprint(body, path, with_tools=True)


def turn_fingerprint(body: bytes, path: str) -> str | None:
    """sha256 hex of the request's last turn alone, without the tool names: the question a
    request asks, whatever it offers to answer it with (what `calltap replay` matches a
    gateway's request to a recorded one by, so that a gateway that stopped dropping a tool
    still asks the recorded question). None as for `request_fingerprint`."""
    return _fingerprint(body, path, with_tools=False)


def _fingerprint(body: bytes, path: str, *, with_tools: bool) -> str | None:
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(request, dict):
        return None
    conversation = request_conversation(request, path)
    if conversation is None or not conversation.entries:
        return None
    parts: list[Any] = [_last_turn(conversation.entries)]
    if with_tools:
        parts.append(sorted(conversation.tools))
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()


def _last_turn(entries: list[Any]) -> list[Unit]:
    turn: list[list[Unit]] = []
    turn_speaker: Speaker | None = None
    for entry in reversed(entries):
        read = _read_entry(entry)
        if read is None:
            continue
        speaker, units = read
        if turn_speaker is None:
            turn_speaker = speaker
        elif speaker != turn_speaker:
            break
        turn.append(units)
    return _merge_text([unit for units in reversed(turn) for unit in units])


def _read_entry(entry: Any) -> tuple[Speaker, list[Unit]] | None:
    """The side and units of one message (Chat, Messages) or input item (Responses); None
    for entries that do not count (system, developer, unknown shapes)."""
    if not isinstance(entry, dict):
        return None
    kind = entry.get("type")
    if isinstance(kind, str) and kind != "message":
        if kind.endswith("_call_output"):
            return "client", [("tool", _text(entry.get("output")))]
        if kind.endswith("_call") or kind == "reasoning":
            return "assistant", []
        return None
    role = entry.get("role")
    content = entry.get("content")
    if not isinstance(role, str):
        return None
    if role in _TOOL_RESULT_ROLES:
        return "client", [("tool", _text(content))]
    if role == "user":
        return "client", _units(content)
    if role == "assistant":
        return "assistant", _units(content)
    return None


def _units(content: Any) -> list[Unit]:
    if isinstance(content, str):
        return [("text", content)]
    if not isinstance(content, list):
        return []
    units: list[Unit] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if not isinstance(kind, str):
            continue
        if kind == "tool_result":
            units.append(("tool", _text(part.get("content"))))
        elif kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            units.append(("text", part["text"]))
    return units


def _text(content: Any) -> str:
    """The text of a tool result: a string, or its text parts concatenated; stripped."""
    return "".join(text for kind, text in _units(content) if kind == "text").strip()


def _merge_text(units: list[Unit]) -> list[Unit]:
    merged: list[Unit] = []
    pending: list[str] = []

    def flush() -> None:
        text = "".join(pending).strip()
        pending.clear()
        if text:
            merged.append(("text", text))

    for kind, text in units:
        if kind == "text":
            pending.append(text)
        else:
            flush()
            merged.append((kind, text))
    flush()
    return merged
