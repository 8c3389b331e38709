"""Two Asks in, findings out: did the provider get asked what the client asked?

The client's Ask (the downstream request) is the reference; the provider's (the upstream request)
is read in its own dialect. Everything compares by meaning (`calltap.ask`): tools by name with
their schemas' meaning (`schemas`), the tool choice on one scale, the conversation turn by turn
(`compare_history`), parameters by value (a 0 is a value, not an absence).

- A tool missing upstream is REQUEST_TOOL_DROPPED, one only upstream REQUEST_TOOL_ADDED, except
  the documented stand-in for structured output: a tool whose schema is the client's
  `response_format` schema, which the gateway forces (Anthropic, Bedrock). That tool carries the
  response format, and its forced choice is not the client's choice changed.
- A client's `tool_choice: "none"` with no tool left upstream asks the same: no tool is called.
- The provider's dialect says what it can carry (`RequestSide.CARRIES`, `SCHEMA_LACKS`,
  `REQUIRES`): a part it has no field for, dropped, is REQUEST_PART_UNSUPPORTED (cosmetic); the
  same part changed to another value, or a part it can carry dropped, is a finding. A part the
  provider's dialect requires (Anthropic's `max_tokens`) may be added where the client sent none.
- Silence means the provider's default: no tool choice is `auto` when tools are offered, no
  parallel flag allows parallel calls, no `strict` is not strict, no response format is text.

Verdict: inconclusive when either body could not be read, or holds values nested deeper than
Python's recursion follows to compare them (REQUEST_UNREADABLE), else diverged on any fatal or
negotiable finding, else equal. It never raises.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from calltap.ask import SAMPLING_KEYS, Ask, ResponseFormat, Tool, ToolChoice
from calltap.codes import Code, Severity
from calltap.compare_history import compare_history, normalized_text
from calltap.dialects import dialect_named, dialect_of_path
from calltap.dialects.asks import read_ask
from calltap.dialects.base import RequestSide
from calltap.schemas import first_difference, normalize, schema_key
from calltap.transcript import Finding

RequestVerdict = Literal["equal", "diverged", "inconclusive"]
BREAKING = frozenset({Severity.FATAL, Severity.NEGOTIABLE})


@dataclass(slots=True)
class RequestComparison:
    verdict: RequestVerdict
    client: Ask
    provider: Ask
    findings: list[Finding]
    stand_in: str | None = None
    """The provider's tool that carries the client's structured-output schema, when the gateway
    sent it so: the answer's call of it is the client's structured answer."""


@dataclass(frozen=True, slots=True)
class _Reach:
    """What the provider's dialect can carry, as the comparison asks it."""

    carries: frozenset[str]
    schema_lacks: frozenset[str]
    requires: frozenset[str]

    @classmethod
    def of(cls, dialect: str) -> _Reach:
        try:
            side: RequestSide = dialect_named(dialect).REQUEST
        except ValueError:
            return cls(frozenset(), frozenset(), frozenset())
        return cls(side.CARRIES, side.SCHEMA_LACKS, side.REQUIRES)


def compare_requests(client: Ask, provider: Ask) -> RequestComparison:
    """Compare what the client asked with what the provider was asked (an Ask with itself is
    equal without a look)."""
    if provider is client and client.readable:
        return RequestComparison("equal", client, provider, [])
    if not (client.readable and provider.readable):
        findings = [*_unreadable(client), *_unreadable(provider)]
        return RequestComparison("inconclusive", client, provider, findings)
    try:
        return _compared(client, provider)
    except RecursionError:
        deep = Finding(Code.REQUEST_UNREADABLE, "request", detail="nested too deep to compare")
        return RequestComparison("inconclusive", client, provider, [deep])


def _compared(client: Ask, provider: Ask) -> RequestComparison:
    reach = _Reach.of(provider.dialect)
    stand_in = _stand_in(client, provider)
    findings = [
        *_tools(client, provider, reach, stand_in),
        *_tool_choice(client, provider, reach, stand_in),
        *_parallel(client, provider, reach),
        *_instructions(client, provider),
        *compare_history(client, provider, reach.carries),
        *_response_format(client, provider, reach, stand_in),
        *_parameters(client, provider, reach),
    ]
    breaking = any(finding.severity in BREAKING for finding in findings)
    return RequestComparison("diverged" if breaking else "equal", client, provider, findings,
                             stand_in.name if stand_in is not None else None)


def _unreadable(ask: Ask) -> list[Finding]:
    return [Finding(f.code, "request", detail=f.detail) for f in ask.findings]


def _finding(code: Code, detail: str, *, tool: str | None = None) -> Finding:
    return Finding(code, "request", detail=detail, tool=tool)


def _unsupported(part: str, detail: str, *, tool: str | None = None) -> Finding:
    return _finding(Code.REQUEST_PART_UNSUPPORTED, f"{part}: {detail}", tool=tool)


def _by_name(tools: list[Tool]) -> dict[str, Tool]:
    """Tools by name, the first of a name (as `Ask.tool` finds it)."""
    named: dict[str, Tool] = {}
    for tool in tools:
        named.setdefault(tool.name, tool)
    return named


def _stand_in(client: Ask, provider: Ask) -> Tool | None:
    """The provider's tool that carries the client's structured-output schema, if any."""
    wanted = client.response_format
    if wanted is None or wanted.kind != "json_schema":
        return None
    mine = _by_name(client.tools)
    return next((tool for tool in provider.tools
                 if tool.name not in mine and tool.schema_key == wanted.schema_key), None)


def _tools(client: Ask, provider: Ask, reach: _Reach, stand_in: Tool | None) -> list[Finding]:
    offered = [tool for tool in provider.tools if tool is not stand_in]
    findings: list[Finding] = []
    if not offered and _choice(client).mode == "none":
        return findings
    mine, theirs = _by_name(client.tools), _by_name(provider.tools)
    for tool in client.tools:
        other = theirs.get(tool.name)
        if other is None:
            findings.append(_finding(Code.REQUEST_TOOL_DROPPED, "not offered upstream",
                                     tool=tool.name))
        else:
            findings.extend(_tool_changes(tool, other, reach))
    findings.extend(_finding(Code.REQUEST_TOOL_ADDED, "offered upstream only", tool=tool.name)
                    for tool in offered if tool.name not in mine)
    return findings


def _tool_changes(tool: Tool, other: Tool, reach: _Reach) -> Iterable[Finding]:
    if tool.schema_key != other.schema_key:
        yield _schema_change(tool, other, reach)
    if (tool.strict is True) != (other.strict is True):
        if tool.strict and other.strict is None and "strict" not in reach.carries:
            yield _unsupported("strict", "dropped", tool=tool.name)
        else:
            yield _finding(Code.TOOL_STRICT_CHANGED, f"strict {tool.strict} -> {other.strict}",
                           tool=tool.name)


def _schema_change(tool: Tool, other: Tool, reach: _Reach) -> Finding:
    """TOOL_SCHEMA_CHANGED, unless the difference is only in keywords the provider's schema
    subset cannot say."""
    if reach.schema_lacks:
        mine = normalize(tool.raw_schema, without=reach.schema_lacks)
        theirs = normalize(other.raw_schema, without=reach.schema_lacks)
        if schema_key(mine) == schema_key(theirs):
            lost = ", ".join(sorted(reach.schema_lacks))
            return _unsupported("schema", f"keywords the provider cannot say ({lost})",
                                tool=tool.name)
    where = first_difference(tool.schema, other.schema)
    return _finding(Code.TOOL_SCHEMA_CHANGED, f"differs at {where}", tool=tool.name)


def _choice(ask: Ask, stand_in: Tool | None = None) -> ToolChoice:
    """The tool choice meant: silence is `auto` with tools offered, `none` without."""
    offered = any(tool is not stand_in for tool in ask.tools)
    if ask.tool_choice is None or not offered:
        return ToolChoice("auto" if offered else "none")
    return ask.tool_choice


def _tool_choice(client: Ask, provider: Ask, reach: _Reach,
                 stand_in: Tool | None) -> list[Finding]:
    mine = _choice(client)
    forced = provider.tool_choice
    if stand_in is not None and forced is not None and (
            forced.name == stand_in.name or forced.mode == "required"):
        return []
    theirs = _choice(provider, stand_in)
    if mine == theirs:
        return []
    part = f"tool_choice.{mine.mode}"
    if provider.tool_choice is None and mine.mode != "auto" and part not in reach.carries:
        return [_unsupported("tool_choice", f"{mine} not expressible")]
    return [_finding(Code.TOOL_CHOICE_CHANGED, f"{mine} -> {theirs}")]


def _parallel(client: Ask, provider: Ask, reach: _Reach) -> list[Finding]:
    mine = client.parallel_tool_calls is not False
    theirs = provider.parallel_tool_calls is not False
    if mine == theirs or not client.tools:
        return []
    if provider.parallel_tool_calls is None and "parallel_tool_calls" not in reach.carries:
        return [_unsupported("parallel_tool_calls", "false not expressible")]
    return [_finding(Code.PARALLEL_TOOL_CALLS_CHANGED, f"parallel {mine} -> {theirs}")]


def _instructions(client: Ask, provider: Ask) -> list[Finding]:
    mine, theirs = normalized_text(client.instructions), normalized_text(provider.instructions)
    if mine == theirs:
        return []
    return [_finding(Code.MESSAGE_CHANGED,
                     f"instructions: {len(mine)} chars -> {len(theirs)} chars")]


def _response_format(client: Ask, provider: Ask, reach: _Reach,
                     stand_in: Tool | None) -> list[Finding]:
    mine = _format(client.response_format)
    theirs = mine if stand_in is not None else _format(provider.response_format)
    if mine == theirs:
        return []
    if provider.response_format is None and "response_format" not in reach.carries:
        return [_unsupported("response_format", f"{mine[0]} not expressible")]
    if mine[0] == theirs[0] == "json_schema" and reach.schema_lacks:
        assert client.response_format is not None and provider.response_format is not None
        lacks = reach.schema_lacks
        if schema_key(normalize(client.response_format.schema, without=lacks)) == schema_key(
                normalize(provider.response_format.schema, without=lacks)):
            return [_unsupported("response_format", "schema keywords the provider cannot say")]
    return [_finding(Code.RESPONSE_FORMAT_CHANGED, f"{mine[0]} -> {theirs[0]}")]


def _format(response_format: ResponseFormat | None) -> tuple[str, Any]:
    if response_format is None or response_format.kind == "text":
        return ("text", None)
    return (response_format.kind, response_format.schema_key)


def _parameters(client: Ask, provider: Ask, reach: _Reach) -> list[Finding]:
    """Sampling, the output limit, stop sequences and reasoning settings."""
    pairs: list[tuple[str, Any, Any]] = [
        (f"sampling.{key}", client.sampling.get(key), provider.sampling.get(key))
        for key in SAMPLING_KEYS
    ]
    pairs.append(("max_output_tokens", client.max_output_tokens, provider.max_output_tokens))
    pairs.append(("stop", _set(client.stop), _set(provider.stop)))
    findings = [finding for part, mine, theirs in pairs
                for finding in _parameter(part, mine, theirs, reach)]
    findings.extend(_reasoning_settings(client, provider, reach))
    return findings


def _parameter(part: str, mine: Any, theirs: Any, reach: _Reach) -> list[Finding]:
    if mine == theirs or (mine is None and part in reach.requires):
        return []
    if theirs is None and part not in reach.carries:
        return [_unsupported(part, "dropped")]
    said = "absent" if theirs is None else repr(theirs)
    return [_finding(Code.SAMPLING_CHANGED, f"{part}: {_said(mine)} -> {said}")]


def _said(value: Any) -> str:
    return "absent" if value is None else repr(value)


def _set(values: tuple[str, ...] | None) -> frozenset[str] | None:
    return None if values is None else frozenset(values)


def _reasoning_settings(client: Ask, provider: Ask, reach: _Reach) -> list[Finding]:
    mine, theirs = client.reasoning, provider.reasoning
    if mine == theirs:
        return []
    asked = (mine.effort, mine.thinking, mine.budget) != (None, None, None)
    told = (theirs.effort, theirs.thinking, theirs.budget) != (None, None, None)
    reasoning_parts = {"reasoning.effort", "reasoning.thinking", "reasoning.budget"}
    if asked and not told and not (reasoning_parts & reach.carries):
        return [_unsupported("reasoning", "settings dropped")]
    differences = []
    on, told_on = _thinking_on(mine), _thinking_on(theirs)
    if on != told_on and not (on is None and told_on is False):
        differences.append(f"thinking {on} -> {told_on}")
    if None not in (mine.effort, theirs.effort) and mine.effort != theirs.effort:
        differences.append(f"effort {mine.effort} -> {theirs.effort}")
    if None not in (mine.budget, theirs.budget) and mine.budget != theirs.budget:
        differences.append(f"budget {mine.budget} -> {theirs.budget}")
    if not differences:
        return []
    return [_finding(Code.SAMPLING_CHANGED, "reasoning: " + "; ".join(differences))]


def _thinking_on(settings: Any) -> bool | None:
    """Whether the settings turn reasoning on: said outright, or by an effort or a budget."""
    if settings.thinking is not None:
        return bool(settings.thinking)
    if settings.effort is not None:
        return settings.effort != "none"
    if settings.budget is not None:
        return settings.budget > 0
    return None


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A recorded request body and the path it was sent to (which names its dialect)."""

    body: bytes
    path: str | None


@dataclass(frozen=True, slots=True)
class PairRequests:
    """A pair's recorded requests: the client's, the compared attempt's, the earlier ones'."""

    client: RecordedRequest
    compared: RecordedRequest
    earlier: dict[int, RecordedRequest] = field(default_factory=dict)


def compare_pair_requests(
    requests: PairRequests,
) -> tuple[RequestComparison, dict[int, RequestComparison]]:
    """The client's request compared with the compared attempt's and with each earlier one's
    (the client's read once)."""
    client = read_ask(requests.client.body, requests.client.path)
    compared = compare_requests(client, _ask(requests.compared, requests.client, client))
    return compared, {number: compare_requests(client, _ask(earlier, requests.client, client))
                      for number, earlier in requests.earlier.items()}


def _ask(request: RecordedRequest, client: RecordedRequest, asked: Ask) -> Ask:
    """A provider's request read, or the client's own Ask when it is the same body sent to a
    path of the same dialect (a gateway that passes the request through): same bytes, same
    reading, and nothing to compare."""
    if request.body == client.body and dialect_of_path(request.path) is dialect_of_path(
            client.path):
        return asked
    return read_ask(request.body, request.path)
