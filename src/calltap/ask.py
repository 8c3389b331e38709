"""What a request asks of the model, reduced to meaning: the request side's `Transcript`.

Every dialect's request reader produces an `Ask` and `compare_requests` consumes two of them (the
client's, and the one the provider received). One vocabulary for every dialect:

- tools offered, by name: description, parameter schema in one JSON Schema meaning (`schemas`),
  `strict`;
- the tool choice on one scale (`none`, `auto`, `required`, or one named function) and the limit
  on parallel calls;
- the instructions (system or developer text, wherever the dialect keeps it);
- the conversation as turns of `user` or `assistant`: text and media parts, assistant tool calls
  (name, decoded arguments, the id the dialect gave them), tool results (the id or name they
  answer, their parts, their error flag), reasoning carried in history;
- output constraints, sampling, reasoning settings, whether it streams and asked for usage.

Plain data with no behaviour: absent is `None`, never a default, so that a 0 stays a value.

What every request reader keeps to, so that a faithful translation reads equal:
- instructions (system or developer text, wherever the dialect keeps them) go to `instructions`,
  never into turns;
- turns are `user` or `assistant`; tool results always stand in a `user` turn, where Anthropic,
  Gemini and Bedrock keep them (Chat Completions' `tool` messages become such a turn); readers do
  not merge consecutive turns of one role: the comparator does;
- a tool result links to its call by `call_id` where the dialect links by id, else by `name`;
  its `is_error` is None where the dialect has no error flag or none was sent;
- arguments by meaning (`request_common.arguments_key`), media by digest
  (`request_common.inline_media`, `url_media`);
- a shape the dialect does not allow raises `request_common.RequestUnreadable`; an unknown block
  type is skipped.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Literal

from calltap.transcript import Finding

Role = Literal["user", "assistant"]
ChoiceMode = Literal["none", "auto", "required", "function"]
SAMPLING_KEYS: tuple[str, ...] = (
    "temperature", "top_p", "top_k", "seed", "frequency_penalty", "presence_penalty",
)
"""The sampling parameters an Ask names, by their Chat Completions names."""
PARTS: frozenset[str] = frozenset({
    "tool_choice.none", "tool_choice.required", "tool_choice.function", "parallel_tool_calls",
    "strict", *(f"sampling.{key}" for key in SAMPLING_KEYS), "max_output_tokens", "stop",
    "response_format", "reasoning.effort", "reasoning.thinking", "reasoning.budget",
    "history.reasoning", "history.signature", "result.media", "result.error", "media.image",
    "media.audio", "media.video", "media.document", "media.file",
})
"""The parts of an Ask a dialect may or may not have a field for (`RequestSide.CARRIES`). The
tools, the instructions, text and tool calls and results in history every dialect carries."""


@dataclass(frozen=True, slots=True)
class Part:
    """A text part (`kind` "text", `text` set) or a media part (`kind` image, audio, document,
    video or file, `digest` set: `sha256:<hex>` of the bytes for inline data, `url:<url>` for a
    reference, which a gateway may fetch and inline: the two are not comparable)."""

    kind: str
    text: str | None = None
    digest: str | None = None


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str | None
    schema: Any
    """The parameter schema as `schemas.normalize` gives it (None: no schema given)."""
    schema_key: Hashable
    """Its canonical key: equal keys, equal schemas."""
    strict: bool | None
    raw_schema: Any = field(default=None, compare=False)
    """The schema as sent, for display and for the oracle tests."""


@dataclass(frozen=True, slots=True)
class ToolChoice:
    mode: ChoiceMode
    name: str | None = None
    """The function forced, when `mode` is "function"."""

    def __str__(self) -> str:
        return f"function {self.name}" if self.mode == "function" else self.mode


@dataclass(frozen=True, slots=True)
class HistoryCall:
    """An assistant tool call carried in the conversation."""

    name: str
    arguments: Hashable
    """The decoded arguments by meaning (`jsonvalues.canonical_key`); an empty string is `{}`."""
    id: str | None
    raw_arguments: Any = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool result carried in the conversation, and what links it to its call: the call's id,
    or, in dialects that link by name (Gemini), the function's name."""

    call_id: str | None
    name: str | None
    parts: tuple[Part, ...]
    is_error: bool | None
    """None: the dialect has no error flag, or none was sent."""


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Reasoning carried in history: its text, and whether its signature (or encrypted content,
    which proves it to the provider) came along."""

    text: str
    signed: bool
    redacted: bool = False


@dataclass(slots=True)
class Turn:
    role: Role
    parts: list[Part] = field(default_factory=list)
    calls: list[HistoryCall] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    reasoning: list[Reasoning] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    kind: Literal["text", "json_object", "json_schema"]
    schema: Any = None
    schema_key: Hashable = None
    strict: bool | None = None


@dataclass(frozen=True, slots=True)
class ReasoningSettings:
    effort: str | None = None
    """An effort level (`low`, `medium`, `high`, …) as the dialect names it."""
    thinking: bool | None = None
    """Thinking asked on (True) or off (False)."""
    budget: int | None = None
    """A thinking budget in tokens."""


@dataclass(slots=True)
class Ask:
    """Everything one request body asks, reduced to meaning."""

    dialect: str
    model: str | None = None
    tools: list[Tool] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    """None: the request says nothing (the provider's default)."""
    parallel_tool_calls: bool | None = None
    instructions: list[Part] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    response_format: ResponseFormat | None = None
    max_output_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    """SAMPLING_KEYS present in the request, by those names, with their values as sent."""
    reasoning: ReasoningSettings = field(default_factory=ReasoningSettings)
    stream: bool | None = None
    usage_requested: bool | None = None
    readable: bool = True
    """False when the body could not be read as its dialect (REQUEST_UNREADABLE is in
    `findings`): nothing it says can be compared."""
    findings: list[Finding] = field(default_factory=list)

    def tool(self, name: str) -> Tool | None:
        return next((tool for tool in self.tools if tool.name == name), None)
