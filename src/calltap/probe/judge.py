"""Judging one probe's answer, sans-IO: the bytes a gateway returned in, pass or fail with why.

The answer is read exactly as calltap reads a recorded leg (`dialects.transcribe`: the framing,
the dialect's reducer, the side rules) and the calls are compared with calltap's argument
equality (`jsonvalues`): a value of another type is another value (`true` is not `1`), key order
and whitespace do not matter. Anything a side check flags as fatal or uncertain (a duplicate key,
NaN, a missing terminal marker or finish reason, an error after 200) fails the probe: a probe
exists to find what a client would trip on. Every reason is kept, not just the first.

The calls expected are those the tool choice allows, not those the prompt asks for: a call in
the answer to `choice-none`, or of the function `choice-named` did not name, is the prompt winning
over a choice the gateway dropped or loosened.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import orjson

from calltap.codes import Severity
from calltap.dialects import transcribe
from calltap.jsonvalues import canonical_key
from calltap.probe.probes import ROUND_TRIP_RESULT, Probe, json_type
from calltap.transcript import Capture, Choice, ToolCall, Transcript

FAILING = frozenset({Severity.FATAL, Severity.WARNING})
"""Severities of a side finding that fail a probe."""
ERROR_EXCERPT = 200
MAX_DIFFERENCES = 5
"""How many argument differences a reason names per call."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What came back for one request: status, the headers the judge needs, the body bytes."""

    status: int
    body: bytes
    content_type: str | None = None
    content_encoding: str | None = None
    location: str | None = None
    request_id: str | None = None
    """The `X-Request-ID` of the answer: a calltap front names its capture with it."""


@dataclass(slots=True)
class Judgement:
    """A turn's outcome: the reasons it failed (none: passed), what was received, and the calls
    as read (for the next turn of `round-trip`)."""

    reasons: list[str] = field(default_factory=list)
    received: Any = None
    calls: list[ToolCall] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.reasons


def expected_calls(probe: Probe) -> list[dict[str, Any]]:
    """The calls a probe expects, as saved in results.json."""
    return [{"name": f.name, "arguments": f.arguments} for f in probe.expected]


def judge_first(probe: Probe, reply: Reply, path: str, dialect: str) -> Judgement:
    """The first turn: text when the tool choice forbids calls, else the expected calls."""
    if probe.forbids:
        return judge_text(reply, path, dialect, quote=None)
    return judge_calls(probe, reply, path, dialect)


def judge_calls(probe: Probe, reply: Reply, path: str, dialect: str) -> Judgement:
    """The first turn: exactly the probe's calls, with finish reason `tool_calls`; a streamed
    probe must also have streamed and ended with the dialect's terminal marker."""
    judgement = Judgement()
    choice = _read(reply, path, dialect, probe.stream, judgement)
    if choice is None:
        return judgement
    judgement.calls = list(choice.tool_calls)
    judgement.received = [_received_call(call) for call in choice.tool_calls]
    if choice.finish_reason != "tool_calls":
        judgement.reasons.append(f"finish reason {choice.raw_finish_reason!r}, not tool_calls")
    judgement.reasons.extend(_call_differences(probe, choice.tool_calls))
    return judgement


def judge_text(
    reply: Reply, path: str, dialect: str, quote: str | None = ROUND_TRIP_RESULT
) -> Judgement:
    """A turn whose tool choice is `none`: an ordinary answer (finish reason `stop`, no calls)
    whose text contains `quote` exactly (the second turn of `round-trip`), or any text at all
    (`choice-none`, quote None)."""
    judgement = Judgement()
    choice = _read(reply, path, dialect, False, judgement)
    if choice is None:
        return judgement
    judgement.calls = list(choice.tool_calls)
    judgement.received = {"text": choice.text}
    if choice.tool_calls:
        judgement.received["calls"] = [_received_call(call) for call in choice.tool_calls]
        names = ", ".join(call.name for call in choice.tool_calls)
        judgement.reasons.append(
            f"{len(choice.tool_calls)} tool call(s) ({names}) instead of an answer"
        )
    if choice.finish_reason != "stop":
        judgement.reasons.append(f"finish reason {choice.raw_finish_reason!r}, not stop")
    if quote is None and not choice.text.strip():
        judgement.reasons.append("the answer has no text")
    elif quote is not None and quote not in choice.text:
        judgement.reasons.append(f"the answer does not contain the tool result {quote!r}")
    return judgement


def _read(
    reply: Reply, path: str, dialect: str, stream: bool, judgement: Judgement
) -> Choice | None:
    """The answer's one choice, with every reason found on the way; None when there is none."""
    if 300 <= reply.status < 400:
        where = f" to {reply.location}" if reply.location else ""
        judgement.reasons.append(f"HTTP {reply.status} redirect{where}: redirects are refused")
        return None
    if reply.status >= 400 or reply.status < 200:
        judgement.reasons.append(f"HTTP {reply.status}: {_excerpt(reply.body)}")
        return None
    transcript = transcribe(
        Capture(
            reply.body,
            path=path,
            content_encoding=reply.content_encoding,
            status=reply.status,
            content_type=reply.content_type,
        )
    )
    judgement.reasons.extend(_side_reasons(transcript, dialect, stream))
    if len(transcript.choices) != 1:
        judgement.reasons.append(f"{len(transcript.choices)} choices, expected one")
        return None
    return next(iter(transcript.choices.values()))


def _side_reasons(transcript: Transcript, dialect: str, stream: bool) -> list[str]:
    reasons = []
    if transcript.dialect != dialect:
        reasons.append(f"the answer reads as {transcript.dialect}, not {dialect}")
    if transcript.streaming != stream:
        asked, got = ("a stream", "a whole body") if stream else ("a whole body", "a stream")
        reasons.append(f"asked for {asked}, got {got}")
    for finding in transcript.findings:
        if finding.severity in FAILING:
            detail = f" ({finding.detail})" if finding.detail else ""
            reasons.append(f"{finding.code}{detail}")
    return reasons


def _received_call(call: ToolCall) -> dict[str, Any]:
    decoded = call.decoded.value if call.decoded is not None else None
    return {"name": call.name, "arguments": decoded, "raw": call.arguments}


def _call_differences(probe: Probe, calls: list[ToolCall]) -> list[str]:
    """Why the received calls are not the expected multiset of (name, arguments)."""
    functions = probe.expected
    expected = Counter((f.name, canonical_key(f.arguments)) for f in functions)
    received = Counter(_key(call) for call in calls)
    if expected == received:
        return []
    reasons = []
    if len(calls) != len(functions):
        reasons.append(f"{len(calls)} call(s), expected {len(functions)}")
    names = {call.name for call in calls}
    for function in functions:
        if function.name not in names:
            reasons.append(f"no call of {function.name}")
    by_name = {function.name: function for function in functions}
    for call in calls:
        function = by_name.get(call.name)
        if function is None and probe.forced is not None:
            reasons.append(f"a call of {call.name!r}, not the function the tool choice named")
        elif function is None:
            reasons.append(f"an unexpected call of {call.name!r}")
        elif call.decoded is not None:
            reasons.extend(
                f"{call.name}: {difference}"
                for difference in differences(function.arguments, call.decoded.value)
            )
    return reasons or ["the calls differ from the expected ones"]


def _key(call: ToolCall) -> tuple[str, Hashable]:
    return call.name, call.decoded.key if call.decoded is not None else ("raw", call.arguments)


def differences(expected: Any, received: Any, path: str = "") -> list[str]:
    """Where two decoded values differ by the argument equality rules, and how (at most
    MAX_DIFFERENCES); empty when they are equal. Paths are JSON pointers (`/user/id`)."""
    found: list[str] = []
    _differ(expected, received, path, found)
    return found[:MAX_DIFFERENCES]


def _differ(expected: Any, received: Any, path: str, found: list[str]) -> None:
    if len(found) >= MAX_DIFFERENCES or canonical_key(expected) == canonical_key(received):
        return
    if isinstance(expected, dict) and isinstance(received, dict):
        for name in expected:
            if name not in received:
                found.append(f"{path}/{name} is missing")
            else:
                _differ(expected[name], received[name], f"{path}/{name}", found)
        found.extend(f"{path}/{name} was not expected" for name in received if name not in expected)
    elif (
        isinstance(expected, list) and isinstance(received, list) and len(expected) == len(received)
    ):
        for index, (want, got) in enumerate(zip(expected, received, strict=True)):
            _differ(want, got, f"{path}/{index}", found)
    else:
        found.append(f"at {path or '/'} expected {_shown(expected)}, received {_shown(received)}")


def _shown(value: Any) -> str:
    text = orjson.dumps(value, default=float).decode()
    if len(text) > ERROR_EXCERPT:
        text = text[:ERROR_EXCERPT] + "…"
    return f"{text} ({json_type(value)})"


def _excerpt(body: bytes) -> str:
    text = body[: ERROR_EXCERPT * 4].decode("utf-8", "replace")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        value = None
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        text = error["message"]
    elif isinstance(error, str):
        text = error
    text = " ".join(text.split())
    return text[:ERROR_EXCERPT] + ("…" if len(text) > ERROR_EXCERPT else "")
