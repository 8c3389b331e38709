"""The two Asks of a pair's page, side by side: pure data, no I/O, no HTML.

What the client asked (downstream.request) and what the provider was asked (upstream.request),
each read as its own dialect (`calltap.ask`): the tools offered (name, strict, a schema summary),
the tool choice, the parallel flag and the other settings, the instructions, and the
conversation turn by turn (consecutive turns of one role as one, as the comparator counts them)
with their text, media, tool calls (decoded arguments), tool results (the call each answers) and
reasoning. Each request finding is marked where it points: at a tool by name, at the client's
turn it names and at the provider's turn aligned with it, or at a setting.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from calltap.ask import SAMPLING_KEYS, Ask, HistoryCall, Part, Tool, ToolResult, Turn
from calltap.codes import Code
from calltap.compare_history import merged_turns, normalized_text
from calltap.compare_requests import RequestComparison
from calltap.transcript import Finding

FOLD_LINES = 12
FOLD_CHARS = 600
"""Text longer than this is folded (a click unfolds it)."""
SCHEMA_FIELDS = 8
"""Properties named in a schema's summary; the whole schema is folded beneath it."""
SETTING_CODES = {
    Code.TOOL_CHOICE_CHANGED: "tool_choice",
    Code.PARALLEL_TOOL_CALLS_CHANGED: "parallel_tool_calls",
    Code.RESPONSE_FORMAT_CHANGED: "response_format",
}
"""Request-wide codes and the setting each is about; SAMPLING_CHANGED and
REQUEST_PART_UNSUPPORTED name theirs before the colon of their detail."""


@dataclass(slots=True)
class Mark:
    """A request finding, shown where it points."""

    code: str
    severity: str
    detail: str


@dataclass(slots=True)
class Block:
    """A text to show, folded when long."""

    text: str
    folded: bool

    @property
    def lines(self) -> int:
        return self.text.count("\n") + 1


@dataclass(slots=True)
class ToolView:
    name: str
    description: str | None
    strict: str
    """`true`, `false`, or `–` where the tool says nothing (not strict)."""
    summary: str
    schema: Block | None
    anchor: str
    state: str = "kept"
    """`kept`, `dropped` (the client's, offered to the provider under no such name) or `added`
    (the provider's only)."""
    marks: list[Mark] = field(default_factory=list)


@dataclass(slots=True)
class Setting:
    """One request-wide setting (the tool choice, a sampling parameter, …) and its value."""

    name: str
    value: str
    anchor: str
    marks: list[Mark] = field(default_factory=list)


@dataclass(slots=True)
class CallView:
    name: str
    id: str | None
    arguments: Block


@dataclass(slots=True)
class ResultView:
    answers: str
    """The call it answers: `id (name)` when it names an id its side knows, else what it
    names."""
    text: Block | None
    media: list[str]
    is_error: bool | None


@dataclass(slots=True)
class ReasoningView:
    text: Block | None
    signed: bool
    redacted: bool


@dataclass(slots=True)
class TurnView:
    index: int
    role: str
    text: Block | None
    media: list[str]
    calls: list[CallView]
    results: list[ResultView]
    reasoning: list[ReasoningView]
    anchor: str
    partner: int | None = None
    """The other side's turn this one is aligned with (None: only on this side)."""
    marks: list[Mark] = field(default_factory=list)


@dataclass(slots=True)
class AskView:
    side: str
    dialect: str
    model: str | None
    readable: bool
    problems: list[str]
    tools: list[ToolView]
    settings: list[Setting]
    instructions: Block | None
    turns: list[TurnView]
    marks: list[Mark] = field(default_factory=list)
    """Findings that point at no tool, turn or setting of this request."""
    instructions_marks: list[Mark] = field(default_factory=list)

    @property
    def instructions_anchor(self) -> str:
        return f"ask-{self.side}-instructions"

    def tool(self, name: str | None) -> ToolView | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def setting(self, name: str) -> Setting | None:
        return next((setting for setting in self.settings if setting.name == name), None)


@dataclass(slots=True)
class AttemptView:
    """An earlier upstream attempt's request compared with the client's (joins no verdict)."""

    attempt: int
    verdict: str
    codes: list[str]


@dataclass(slots=True)
class RequestsView:
    verdict: str
    upstream: AskView
    downstream: AskView
    attempts: list[AttemptView]
    places: list[list[tuple[str, str]]]
    """Per request finding (in the comparison's order): where it is marked, as (label,
    anchor)."""


def requests_view(requests: RequestComparison,
                  attempts: dict[int, RequestComparison] | None = None) -> RequestsView:
    """Both Asks laid out and every request finding marked where it points."""
    client_turns = merged_turns(requests.client.turns)
    provider_turns = merged_turns(requests.provider.turns)
    aligned = aligned_turns(client_turns, provider_turns)
    names = _setting_names(requests)
    down = _ask_view("downstream", requests.client, client_turns, names)
    up = _ask_view("upstream", requests.provider, provider_turns, names)
    for index, partner in aligned.items():
        down.turns[index].partner = partner
        up.turns[partner].partner = index
    for ask, other in ((down, up), (up, down)):
        for tool in ask.tools:
            if other.tool(tool.name) is None:
                tool.state = "dropped" if ask is down else "added"
    places = [_mark(finding, down, up, aligned) for finding in requests.findings]
    earlier = [AttemptView(number, comparison.verdict,
                           sorted({str(f.code) for f in comparison.findings}))
               for number, comparison in sorted((attempts or {}).items())]
    return RequestsView(requests.verdict, up, down, earlier, places)


def aligned_turns(mine: list[Turn], theirs: list[Turn]) -> dict[int, int]:
    """The client's turn index to the provider's it is compared with, aligned by role and
    text as `compare_history` aligns them."""
    matcher = SequenceMatcher(None, [_signature(turn) for turn in mine],
                              [_signature(turn) for turn in theirs], autojunk=False)
    pairs: dict[int, int] = {}
    for _tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for offset in range(min(i2 - i1, j2 - j1)):
            pairs[i1 + offset] = j1 + offset
    return pairs


def _signature(turn: Turn) -> tuple[str, str]:
    return turn.role, normalized_text(turn.parts)


def _mark(finding: Finding, down: AskView, up: AskView,
          aligned: dict[int, int]) -> list[tuple[str, str]]:
    """Mark the finding on each place it points at; those places as (label, anchor)."""
    mark = Mark(str(finding.code), str(finding.severity), finding.detail)
    places: list[tuple[str, str]] = []

    def put(label: str, anchor: str, marks: list[Mark]) -> None:
        marks.append(mark)
        places.append((label, anchor))

    if finding.code is Code.REQUEST_UNREADABLE:
        return places
    if finding.tool is not None:
        sides = {Code.REQUEST_TOOL_DROPPED: (down,), Code.REQUEST_TOOL_ADDED: (up,)}
        for ask in sides.get(finding.code, (down, up)):
            tool = ask.tool(finding.tool)
            if tool is not None:
                put(f"{ask.side} tool", tool.anchor, tool.marks)
    elif finding.turn is not None:
        turns = [(down, finding.turn), (up, aligned.get(finding.turn))]
        for ask, index in turns:
            if index is not None and index < len(ask.turns):
                put(f"{ask.side} turn {index}", ask.turns[index].anchor, ask.turns[index].marks)
    else:
        name = setting_of(finding)
        for ask in (down, up):
            setting = ask.setting(name) if name is not None else None
            if name == "instructions":
                put(f"{ask.side} instructions", ask.instructions_anchor, ask.instructions_marks)
            elif setting is not None:
                put(f"{ask.side} {name}", setting.anchor, setting.marks)
    if not places:
        down.marks.append(mark)
    return places


def setting_of(finding: Finding) -> str | None:
    """The setting a request-wide finding is about (`instructions` for the instructions)."""
    if finding.code in SETTING_CODES:
        return SETTING_CODES[finding.code]
    if finding.code is Code.MESSAGE_CHANGED:
        return "instructions"
    if finding.code in (Code.SAMPLING_CHANGED, Code.REQUEST_PART_UNSUPPORTED):
        part = finding.detail.partition(":")[0]
        return "reasoning" if part.startswith("reasoning") else part
    return None


def _setting_names(requests: RequestComparison) -> list[str]:
    """The settings either request says something about, or a finding names, in one order for
    both sides."""
    names = ["tool_choice", "parallel_tool_calls", "response_format"]
    names += [f"sampling.{key}" for key in SAMPLING_KEYS]
    names += ["max_output_tokens", "stop", "reasoning", "stream"]
    named = {setting_of(finding) for finding in requests.findings if finding.turn is None
             and finding.tool is None}
    asks = (requests.client, requests.provider)
    return [name for name in names
            if name in named or any(_setting(ask, name) != "–" for ask in asks)]


def _ask_view(side: str, ask: Ask, turns: list[Turn], names: list[str]) -> AskView:
    instructions = "\n".join(part.text or "" for part in ask.instructions if part.kind == "text")
    settings = [Setting(name, _setting(ask, name), f"ask-{side}-{name}") for name in names]
    calls = _calls_by_id(turns)
    return AskView(
        side=side, dialect=ask.dialect, model=ask.model, readable=ask.readable,
        problems=[finding.detail for finding in ask.findings],
        tools=[_tool_view(side, number, tool) for number, tool in enumerate(ask.tools)],
        settings=settings, instructions=block(instructions) if instructions else None,
        turns=[_turn_view(side, index, turn, calls) for index, turn in enumerate(turns)],
    )


def _setting(ask: Ask, name: str) -> str:
    """A setting's value as shown; `–` where the request says nothing (the provider's
    default)."""
    if name.startswith("sampling."):
        return _value(ask.sampling.get(name.removeprefix("sampling.")))
    if name == "tool_choice":
        return _value(None if ask.tool_choice is None else str(ask.tool_choice))
    if name == "response_format":
        form = ask.response_format
        if form is None:
            return "–"
        strict = " (strict)" if form.strict else ""
        return form.kind + (f": {schema_summary(form.schema)}" if form.schema else "") + strict
    if name == "reasoning":
        said = ask.reasoning
        parts = [f"{label} {_value(value)}" for label, value in
                 (("effort", said.effort), ("thinking", said.thinking),
                  ("budget", said.budget)) if value is not None]
        return " · ".join(parts) or "–"
    if name == "stream":
        if ask.stream is None:
            return "–"
        usage = " (usage asked)" if ask.usage_requested else ""
        return _value(ask.stream) + usage
    value = {"parallel_tool_calls": ask.parallel_tool_calls,
             "max_output_tokens": ask.max_output_tokens, "stop": ask.stop}.get(name)
    return _value(list(value) if isinstance(value, tuple) else value)


def _value(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _tool_view(side: str, number: int, tool: Tool) -> ToolView:
    schema = tool.raw_schema if tool.raw_schema is not None else tool.schema
    return ToolView(
        name=tool.name, description=tool.description, strict=_value(tool.strict),
        summary=schema_summary(schema),
        schema=None if schema is None else block(_pretty(schema)),
        anchor=f"ask-{side}-tool-{number}",
    )


def schema_summary(schema: Any) -> str:
    """A parameter schema in one line: an object's properties with their types (`*` when
    required), else the schema's type."""
    if schema is None:
        return "no schema"
    if not isinstance(schema, dict):
        return _pretty(schema)
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return _type_of(schema)
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    shown = [f"{name}{'*' if name in needed else ''}: {_type_of(value)}"
             for name, value in list(properties.items())[:SCHEMA_FIELDS]]
    more = len(properties) - SCHEMA_FIELDS
    return "{" + ", ".join(shown) + (f", … {more} more" if more > 0 else "") + "}"


def _type_of(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any" if schema is True else "?"
    if isinstance(schema.get("enum"), list):
        return f"enum({len(schema['enum'])})"
    if "const" in schema:
        return "const"
    for combined in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(combined), list):
            return f"{combined}({len(schema[combined])})"
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "|".join(str(item) for item in kind)
    if kind == "array":
        return f"array of {_type_of(schema.get('items'))}"
    if isinstance(kind, str):
        return kind
    return "ref" if "$ref" in schema else "any"


def _turn_view(side: str, index: int, turn: Turn,
               calls: dict[str, HistoryCall]) -> TurnView:
    text = "\n".join(part.text or "" for part in turn.parts if part.kind == "text")
    return TurnView(
        index=index, role=turn.role, text=block(text) if text else None,
        media=media_kinds(turn.parts),
        calls=[CallView(call.name, call.id, block(_arguments(call))) for call in turn.calls],
        results=[_result_view(result, calls) for result in turn.results],
        reasoning=[ReasoningView(block(r.text) if r.text else None, r.signed, r.redacted)
                   for r in turn.reasoning],
        anchor=f"ask-{side}-turn-{index}",
    )


def _calls_by_id(turns: Iterable[Turn]) -> dict[str, HistoryCall]:
    return {call.id: call for turn in turns for call in turn.calls if call.id is not None}


def _result_view(result: ToolResult, calls: dict[str, HistoryCall]) -> ResultView:
    call = calls.get(result.call_id) if result.call_id is not None else None
    if call is not None:
        answers = f"{result.call_id} ({call.name})"
    else:
        answers = result.call_id or result.name or "–"
    text = "\n".join(part.text or "" for part in result.parts if part.kind == "text")
    return ResultView(answers, block(text) if text else None, media_kinds(result.parts),
                      result.is_error)


def media_kinds(parts: Iterable[Part]) -> list[str]:
    """Each media part as its kind and where it came from (`image · sha256:12ab34cd…`,
    `image · URL`)."""
    shown = []
    for part in parts:
        if part.kind == "text":
            continue
        origin, _, rest = (part.digest or "").partition(":")
        shown.append(f"{part.kind} · {'URL' if origin == 'url' else f'{origin}:{rest[:8]}'}")
    return shown


def _arguments(call: HistoryCall) -> str:
    """The call's arguments decoded and indented; their text as sent when it is not JSON."""
    raw = call.raw_arguments
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return "{}"
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return call.raw_arguments
    return _pretty(raw)


def _pretty(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def block(text: str) -> Block:
    return Block(text, text.count("\n") >= FOLD_LINES or len(text) > FOLD_CHARS)
