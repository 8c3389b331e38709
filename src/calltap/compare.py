"""Two transcripts in, a verdict and findings out: did the gateway forward the answer intact?

Upstream (what the provider sent) is the reference. Per choice, matched by index:
- tool calls are a multiset of (function name, decoded arguments). Exact pairs match first; then
  leftovers with the same name pair up as TOOL_CALL_ARGUMENTS_CHANGED; what is still left is
  TOOL_CALLS_DROPPED (upstream only) or TOOL_CALLS_ADDED (downstream only), with a count.
  TOOL_CALL_SET_CHANGED accompanies any of those. Arguments that are not valid JSON compare by
  their raw text. Matched calls in another order are TOOL_CALL_ORDER_CHANGED, matched calls with
  other ids or indexes TOOL_CALL_IDS_REMAPPED (both cosmetic).
- TEXT_CHANGED, FINISH_REASON_CHANGED when downstream has a finish reason other than upstream's
  (upstream without one and downstream "stop" is a masked upstream EOF, and is reported too);
  downstream without one is FINISH_REASON_MISSING alone.
- A side defect (FINISH_REASON_MISSING, DONE_MISSING, ERROR_IN_STREAM, TOOL_CALL_INDEX_MISSING,
  TOOL_CALL_INDEX_GAP, CHOICE_INDEX_MISSING, DELTA_LIST_INDEX_MISSING, TOOL_ARGUMENTS_INVALID,
  TOOL_CALL_ID_CONFLICT, STREAM_RESTARTED) is a
  divergence only when it is present downstream and not upstream with the same code and choice:
  the gateway cannot be blamed for what it was sent. A stream the provider never ended (its
  `terminal_seen` false: no terminal marker, or in Gemini, which has none, a choice left without
  its finish reason) likewise excuses a downstream DONE_MISSING.
- ERROR_DROPPED when upstream carried an error object and downstream carries none in any shape:
  the client never learned that the provider failed.
- USAGE_MISSING when only upstream had usage, USAGE_CHANGED when the counts differ, including
  usage only downstream (a gateway's estimate after a masked upstream EOF). A client whose
  request asked for no usage (a Chat Completions stream without `stream_options.include_usage`)
  misses none: gateways such as LiteLLM ask the provider for usage on their own behalf and keep
  it, which is what that client asked for. Whether a request asked is the client's dialect's to
  say (`usage_requested` of the dialect registry).
Every warning of either side joins the findings. Verdict: inconclusive on any warning, else
diverged on any fatal or negotiable finding, else equal.

A side that could not be read at all (no dialect recognized, an undecodable body) has nothing to
compare with: such a comparison holds the warnings alone, and is inconclusive. Each side's own
findings still stand in its transcript.

A provider stream that broke off (no terminal marker) answered by the gateway with an error (an
error frame in the stream, or an error status) is a failure forwarded faithfully: the client was
told the answer failed, which is the truth. Nothing is compared across the sides then either.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from calltap.codes import Code, Severity
from calltap.compare_requests import RequestComparison
from calltap.dialects import UNKNOWN, transcribe
from calltap.dialects import usage_requested as asks_for_usage
from calltap.transcript import Capture, Choice, Finding, Side, ToolCall, Transcript, Usage

ComparisonVerdict = Literal["equal", "diverged", "inconclusive"]
CheckVerdict = Literal["clean", "defective", "inconclusive"]

SIDE_DEFECTS = frozenset(
    {
        Code.FINISH_REASON_MISSING,
        Code.DONE_MISSING,
        Code.ERROR_IN_STREAM,
        Code.TOOL_CALL_INDEX_MISSING,
        Code.TOOL_ARGUMENTS_INVALID,
        Code.TOOL_CALL_ID_CONFLICT,
        Code.TOOL_CALL_INDEX_GAP,
        Code.CHOICE_INDEX_MISSING,
        Code.DELTA_LIST_INDEX_MISSING,
        Code.STREAM_RESTARTED,
    }
)
BREAKING = frozenset({Severity.FATAL, Severity.NEGOTIABLE})
COMPARISON_VERDICTS: dict[str, ComparisonVerdict] = {
    "warning": "inconclusive",
    "breaking": "diverged",
    "none": "equal",
}
CHECK_VERDICTS: dict[str, CheckVerdict] = {
    "warning": "inconclusive",
    "breaking": "defective",
    "none": "clean",
}


@dataclass(slots=True)
class Comparison:
    verdict: ComparisonVerdict
    upstream: Transcript
    downstream: Transcript
    findings: list[Finding]
    requests: RequestComparison | None = None
    """The client's request compared with the compared attempt's (`compare_pair.join_requests`)."""
    request_attempts: dict[int, RequestComparison] = dataclasses.field(default_factory=dict)
    """Earlier attempts' requests compared with the client's, by attempt number: kept, not
    joined to the verdict (the provider's answer to them is not the one compared)."""
    usage_requested: bool = True
    """Whether the client's request asked for usage (as `compare` was told)."""


@dataclass(slots=True)
class Check:
    verdict: CheckVerdict
    transcript: Transcript
    findings: list[Finding]


def compare(
    upstream: Transcript, downstream: Transcript, *, usage_requested: bool = True
) -> Comparison:
    """Compare what the provider sent (upstream) with what the client got (downstream);
    `usage_requested` False means the client's request asked for no usage."""
    findings: list[Finding] = []
    if readable(upstream) and readable(downstream) and not failure_reported(upstream, downstream):
        findings.extend(_cross_side(upstream, downstream, usage_requested))
    findings.extend(_warnings(upstream.findings, "upstream"))
    findings.extend(_warnings(downstream.findings, "downstream"))
    verdict: ComparisonVerdict = COMPARISON_VERDICTS[_worst(findings)]
    return Comparison(verdict, upstream, downstream, findings, usage_requested=usage_requested)


def readable(transcript: Transcript) -> bool:
    """False for a body no dialect could read: nothing it says can be compared."""
    return transcript.dialect != UNKNOWN


def failure_reported(upstream: Transcript, downstream: Transcript) -> bool:
    """The provider's stream broke off before its terminal marker, and the client got an error
    for it: the gateway reported the failure instead of passing the broken answer off as whole."""
    return upstream.streaming and not upstream.terminal_seen and bool(downstream.errors)


def _cross_side(
    upstream: Transcript, downstream: Transcript, usage_requested: bool
) -> list[Finding]:
    """What the gateway changed: choices, calls, text, finish, side defects, errors, usage."""
    findings: list[Finding] = []
    for index in sorted(upstream.choices.keys() | downstream.choices.keys()):
        up, down = upstream.choices.get(index), downstream.choices.get(index)
        if down is None:
            findings.append(
                Finding(Code.CHOICE_DROPPED, "downstream", index, position=downstream.end_position)
            )
        elif up is None:
            findings.append(Finding(Code.CHOICE_ADDED, "downstream", index, position=down.position))
        else:
            findings.extend(_compare_choice(up, down, downstream))
    findings.extend(_side_defects(upstream, downstream))
    findings.extend(_dropped_errors(upstream, downstream))
    findings.extend(_compare_usage(upstream, downstream, usage_requested))
    return findings


def check(transcript: Transcript) -> Check:
    """The single-side verdict: clean, defective, or inconclusive when anything is uncertain."""
    findings = list(transcript.findings)
    verdict: CheckVerdict = CHECK_VERDICTS[_worst(findings)]
    return Check(verdict, transcript, findings)


def compare_captures(
    upstream: Capture, downstream: Capture, *, downstream_request: bytes | None = None
) -> Comparison:
    """Compare two recorded bodies; `downstream_request` is the client's request body when it
    was recorded, which tells whether the client asked for usage."""
    down = transcribe(downstream)
    requested = downstream_request is None or asks_for_usage(down.dialect, downstream_request)
    return compare(transcribe(upstream), down, usage_requested=requested)


def check_capture(capture: Capture) -> Check:
    return check(transcribe(capture))


def _worst(findings: Iterable[Finding]) -> Literal["warning", "breaking", "none"]:
    """What decides a verdict: any warning, else any fatal or negotiable finding, else none."""
    severities = {finding.severity for finding in findings}
    if Severity.WARNING in severities:
        return "warning"
    if severities & BREAKING:
        return "breaking"
    return "none"


def _compare_choice(up: Choice, down: Choice, downstream: Transcript) -> list[Finding]:
    index = down.index
    findings: list[Finding] = []
    if up.text != down.text:
        findings.append(
            Finding(
                Code.TEXT_CHANGED,
                "downstream",
                index,
                position=down.finish_position or downstream.end_position,
                detail=_text_difference(up.text, down.text),
            )
        )
    if down.finish_reason is not None and up.finish_reason != down.finish_reason:
        findings.append(
            Finding(
                Code.FINISH_REASON_CHANGED,
                "downstream",
                index,
                position=down.finish_position or downstream.end_position,
                detail=f"{_reason_said(up)} -> {_reason_said(down)}",
            )
        )
    findings.extend(_compare_calls(up, down, downstream))
    return findings


def _reason_said(choice: Choice) -> str:
    """The finish reason as the side wrote it, with its normalized meaning when that differs:
    Ollama's `stop` after tool calls reads "stop (tool_calls)", so that a change of meaning
    between two identical words is not reported as "stop -> stop"."""
    raw, meaning = choice.raw_finish_reason, choice.finish_reason
    return f"{raw}" if meaning is None or raw == meaning else f"{raw} ({meaning})"


def _text_difference(up: str, down: str) -> str:
    common = next(
        (at for at, (a, b) in enumerate(zip(up, down, strict=False)) if a != b),
        min(len(up), len(down)),
    )
    return (
        f"upstream {len(up)} chars, downstream {len(down)} chars, first difference at char {common}"
    )


def call_key(call: ToolCall) -> tuple[str, Hashable]:
    """What makes two calls the same call: the name and the decoded arguments' meaning (the raw
    text when they are not JSON)."""
    arguments = call.decoded.key if call.decoded is not None else ("raw", call.arguments)
    return call.name, arguments


@dataclass(slots=True)
class _CallMatch:
    """How one choice's tool calls pair up across the legs, by their places in each list."""

    pairs: list[tuple[int, int]]
    """(upstream place, downstream place): same (name, arguments) first, then same name."""
    changed: list[tuple[int, int]]
    """The pairs by name only: the arguments changed on the way."""
    dropped: list[int]
    """Upstream calls with no downstream partner."""
    added: list[int]
    """Downstream calls with no upstream partner."""


def _match_calls(up: Choice, down: Choice) -> _CallMatch:
    """Pair calls with the same (name, decoded arguments) first, whatever their ids and
    indexes; then, of those left, calls with the same name, in order."""
    unmatched: dict[tuple[str, Hashable], list[int]] = defaultdict(list)
    for order, call in enumerate(up.tool_calls):
        unmatched[call_key(call)].append(order)
    pairs: list[tuple[int, int]] = []
    down_left: list[int] = []
    for order, call in enumerate(down.tool_calls):
        candidates = unmatched.get(call_key(call))
        if candidates:
            pairs.append((candidates.pop(0), order))
        else:
            down_left.append(order)
    by_name: dict[str, list[int]] = defaultdict(list)
    for order in sorted(order for orders in unmatched.values() for order in orders):
        by_name[up.tool_calls[order].name].append(order)
    changed: list[tuple[int, int]] = []
    added: list[int] = []
    for order in down_left:
        same_name = by_name.get(down.tool_calls[order].name)
        if same_name:
            changed.append((same_name.pop(0), order))
        else:
            added.append(order)
    dropped = [order for orders in by_name.values() for order in orders]
    return _CallMatch(pairs + changed, changed, dropped, added)


def _compare_calls(up: Choice, down: Choice, downstream: Transcript) -> list[Finding]:
    match = _match_calls(up, down)
    index = down.index
    end = down.finish_position or downstream.end_position
    findings = [
        Finding(Code.TOOL_CALL_ARGUMENTS_CHANGED, "downstream", index,
                position=down.tool_calls[d].position,
                detail=f"{down.tool_calls[d].name}: {up.tool_calls[u].arguments}"
                       f" -> {down.tool_calls[d].arguments}")
        for u, d in match.changed
    ]
    if match.dropped:
        names = ", ".join(up.tool_calls[order].name for order in sorted(match.dropped))
        findings.append(Finding(Code.TOOL_CALLS_DROPPED, "downstream", index,
                                count=len(match.dropped), position=end,
                                detail=f"missing downstream: {names}"))
    if match.added:
        names = ", ".join(down.tool_calls[order].name for order in match.added)
        findings.append(Finding(Code.TOOL_CALLS_ADDED, "downstream", index,
                                count=len(match.added),
                                position=down.tool_calls[match.added[0]].position,
                                detail=f"only downstream: {names}"))
    differences = len(match.dropped) + len(match.added) + len(match.changed)
    if differences:
        findings.append(Finding(Code.TOOL_CALL_SET_CHANGED, "downstream", index,
                                count=differences, position=end))
    findings.extend(_cosmetic(up, down, match.pairs))
    return findings


def _cosmetic(up: Choice, down: Choice, pairs: list[tuple[int, int]]) -> list[Finding]:
    findings: list[Finding] = []
    in_upstream_order = [down_order for _, down_order in sorted(pairs)]
    moved = next((later for earlier, later in pairwise(in_upstream_order) if later < earlier), None)
    if moved is not None:
        findings.append(
            Finding(
                Code.TOOL_CALL_ORDER_CHANGED,
                "downstream",
                down.index,
                position=down.tool_calls[moved].position,
            )
        )
    remapped = [
        (up.tool_calls[u], down.tool_calls[d])
        for u, d in pairs
        if _remapped(up.tool_calls[u], down.tool_calls[d])
    ]
    if remapped:
        findings.append(
            Finding(
                Code.TOOL_CALL_IDS_REMAPPED,
                "downstream",
                down.index,
                count=len(remapped),
                position=remapped[0][1].position,
                detail="; ".join(f"{a.id}#{a.index} -> {b.id}#{b.index}" for a, b in remapped),
            )
        )
    return findings


def _remapped(up: ToolCall, down: ToolCall) -> bool:
    """Another index, or another id where the provider gave one: a call without an id upstream
    (Ollama's, Gemini's) gets one from the gateway, which rewrites nothing."""
    return up.index != down.index or (up.id is not None and up.id != down.id)


def _side_defects(upstream: Transcript, downstream: Transcript) -> list[Finding]:
    """Downstream side defects that upstream did not already have (same code and choice); a
    stream upstream never ended has, in any dialect, the DONE_MISSING of a client's stream."""
    inherited = {(f.code, f.choice) for f in upstream.findings if f.code in SIDE_DEFECTS}
    if upstream.streaming and not upstream.terminal_seen:
        inherited.add((Code.DONE_MISSING, None))
    return [
        dataclasses.replace(finding, side="downstream")
        for finding in downstream.findings
        if finding.code in SIDE_DEFECTS and (finding.code, finding.choice) not in inherited
    ]


def _dropped_errors(upstream: Transcript, downstream: Transcript) -> list[Finding]:
    """ERROR_DROPPED: the provider sent error objects and the client got none of them."""
    if not upstream.errors or downstream.errors:
        return []
    sent = [f.detail for f in upstream.findings if f.code is Code.ERROR_IN_STREAM]
    return [
        Finding(
            Code.ERROR_DROPPED,
            "downstream",
            count=len(upstream.errors),
            position=downstream.end_position,
            detail="; ".join(sent),
        )
    ]


def _compare_usage(
    upstream: Transcript, downstream: Transcript, requested: bool
) -> list[Finding]:
    up, down = upstream.usage, downstream.usage
    if (up is None and down is None) or up == down:
        return []
    if down is None:
        if not requested:
            return []
        return [Finding(Code.USAGE_MISSING, "downstream", position=downstream.end_position)]
    return [
        Finding(
            Code.USAGE_CHANGED,
            "downstream",
            position=downstream.usage_position,
            detail=f"{_usage_text(up)} -> {_usage_text(down)}",
        )
    ]


def _usage_text(usage: Usage | None) -> str:
    if usage is None:
        return "none"
    counts = (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
    return "prompt {}, completion {}, total {}".format(*counts)


def _warnings(findings: Iterable[Finding], side: Side) -> list[Finding]:
    return [
        dataclasses.replace(finding, side=side)
        for finding in findings
        if finding.severity is Severity.WARNING
    ]
