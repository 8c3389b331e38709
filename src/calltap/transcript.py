"""What a dialect reducer knows about one side: choices, tool calls, finish, usage, findings.

Plain data, no behaviour beyond small helpers: every dialect produces it and `compare` consumes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from calltap.codes import Code, Severity

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error"]
Side = Literal["upstream", "downstream", "request"]


@dataclass(frozen=True, slots=True)
class Position:
    """Where something was seen: the SSE event ordinal (0-based) and the byte offset in the body."""

    event: int | None
    byte: int | None


@dataclass(slots=True)
class Finding:
    """One fact worth reporting. `detail` may hold names or values and is dropped when redacting."""

    code: Code
    side: Side | None = None
    choice: int | None = None
    count: int | None = None
    position: Position | None = None
    detail: str = ""
    turn: int | None = None
    """A request finding's turn: the index of the client's turn (None: tools, parameters)."""
    tool: str | None = None
    """A request finding's tool name, when one is concerned (dropped when redacting)."""

    @property
    def severity(self) -> Severity:
        return self.code.severity


@dataclass(slots=True)
class ToolCall:
    """A tool call accumulated from its fragments (or read whole from a JSON body)."""

    name: str
    arguments: str
    id: str | None
    index: int | None
    fragments: int
    position: Position
    decoded: Any = None
    """The strictly decoded arguments (`jsonvalues.Decoded`); None when they are not JSON."""


@dataclass(slots=True)
class Choice:
    index: int
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    raw_finish_reason: str | None = None
    position: Position | None = None
    finish_position: Position | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None


@dataclass(slots=True)
class Transcript:
    """Everything one side's body says, reduced to meaning."""

    dialect: str
    streaming: bool
    events: int = 0
    bytes: int = 0
    choices: dict[int, Choice] = field(default_factory=dict)
    usage: Usage | None = None
    usage_position: Position | None = None
    errors: list[Any] = field(default_factory=list)
    terminal_seen: bool = False
    framing: str | None = field(default=None, compare=False)
    """How the body was framed (`sse`, `ndjson`, `eventstream`, `json`): a fact about the bytes,
    not their meaning, so two transcripts that say the same are equal whatever their framing."""
    end_position: Position | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def tool_call_count(self) -> int:
        return sum(len(choice.tool_calls) for choice in self.choices.values())


@dataclass(frozen=True, slots=True)
class Capture:
    """One recorded response body and the little the comparator needs to know about it."""

    body: bytes
    path: str | None = None
    """The request path (`/v1/chat/completions`), used to confirm the detected dialect."""
    content_encoding: str | None = None
    """The response's Content-Encoding; the body is kept as sent and decoded before parsing."""
    status: int | None = None
    """The HTTP status; an error object in a 2xx (or unknown-status) body is ERROR_IN_STREAM."""
    truncated: bool = False
    """True when the recorder stopped at its size limit (CAPTURE_TRUNCATED)."""
    dialect: str | None = None
    """A dialect NAME (`anthropic.messages`) to read the body as, instead of detecting it."""
    content_type: str | None = None
    """The response's Content-Type; it tells NDJSON from one JSON body when the content cannot
    (a one-line stream), and otherwise yields to the content."""
