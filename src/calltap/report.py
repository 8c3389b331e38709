"""Comparisons and checks as the JSON object of `calltap compare --json`, and as rich tables.

The JSON shape is fixed (users' scripts read it): `verdict`, one object per side (`dialect`,
`framing`, `events`, `bytes`, `choices`, `tool_calls`, `findings`) and the top-level `findings`,
each with `code`, `severity`, `side`, `choice`, `count` and `position {event, byte}`. A finding
may add `detail`, which can hold function names, argument values, text or ids; `redact=True`
leaves every `detail` out, so the report keeps only codes, severities, positions and counts and
can be shared.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from calltap.ask import Ask
from calltap.codes import Severity
from calltap.compare import Check, Comparison
from calltap.compare_history import merged_turns
from calltap.compare_requests import RequestComparison
from calltap.transcript import Finding, Position, Side, Transcript

VERDICT_STYLES = {
    "equal": "bold green",
    "clean": "bold green",
    "diverged": "bold red",
    "defective": "bold red",
    "inconclusive": "bold yellow",
}
SEVERITY_STYLES = {
    Severity.FATAL: "red",
    Severity.NEGOTIABLE: "yellow",
    Severity.COSMETIC: "dim",
    Severity.WARNING: "magenta",
}


def comparison_json(comparison: Comparison, *, redact: bool = False) -> dict[str, Any]:
    """The `calltap compare --json` object; `requests` when the requests were compared."""
    result = {
        "verdict": comparison.verdict,
        "upstream": side_json(comparison.upstream, "upstream", redact=redact),
        "downstream": side_json(comparison.downstream, "downstream", redact=redact),
        "findings": [finding_json(f, redact=redact) for f in comparison.findings],
    }
    if comparison.requests is not None:
        result["requests"] = requests_json(comparison.requests, comparison.request_attempts,
                                           redact=redact)
    return result


def requests_json(requests: RequestComparison,
                  attempts: dict[int, RequestComparison] | None = None, *,
                  redact: bool = False) -> dict[str, Any]:
    """The requests' comparison: its verdict, each request's summary, its findings, and those
    of earlier attempts' requests (by attempt number), which join no verdict."""
    return {
        "verdict": requests.verdict,
        "downstream": ask_json(requests.client, redact=redact),
        "upstream": ask_json(requests.provider, redact=redact),
        "findings": [finding_json(f, redact=redact) for f in requests.findings],
        "attempts": [
            {"attempt": number, "verdict": earlier.verdict,
             "findings": [finding_json(f, redact=redact) for f in earlier.findings]}
            for number, earlier in sorted((attempts or {}).items())
        ],
    }


def ask_json(ask: Ask, *, redact: bool = False) -> dict[str, Any]:
    """One request's summary: its dialect, what it offers and how long its conversation is."""
    result: dict[str, Any] = {
        "dialect": ask.dialect,
        "readable": ask.readable,
        "tools": len(ask.tools),
        "tool_choice": str(ask.tool_choice) if ask.tool_choice is not None else None,
        "turns": len(merged_turns(ask.turns)),
        "stream": ask.stream,
    }
    if redact:
        if ask.tool_choice is not None and ask.tool_choice.mode == "function":
            result["tool_choice"] = "function"
    else:
        result["model"] = ask.model
    return result


def check_json(check: Check, *, redact: bool = False) -> dict[str, Any]:
    """The `calltap check --json` object: the verdict, the side, and its findings."""
    return {
        "verdict": check.verdict,
        "capture": side_json(check.transcript, None, redact=redact),
        "findings": [finding_json(f, redact=redact) for f in check.findings],
    }


def side_json(transcript: Transcript, side: Side | None, *, redact: bool = False) -> dict[str, Any]:
    """One side's summary and everything seen on that side alone."""
    return {
        "dialect": transcript.dialect,
        "framing": transcript.framing,
        "events": transcript.events,
        "bytes": transcript.bytes,
        "choices": len(transcript.choices),
        "tool_calls": transcript.tool_call_count,
        "finish_reasons": finish_reasons(transcript),
        "usage": usage_json(transcript),
        "findings": [finding_json(f, side, redact=redact) for f in transcript.findings],
    }


def finish_reasons(transcript: Transcript) -> list[str]:
    """Each choice's finish reason in choice order, in the provider's own word when it said one
    (what a trace shows as `gen_ai.response.finish_reasons`); a choice that gave none is left
    out."""
    reasons = (transcript.choices[index].raw_finish_reason
               or transcript.choices[index].finish_reason
               for index in sorted(transcript.choices))
    return [reason for reason in reasons if reason]


def usage_json(transcript: Transcript) -> dict[str, int | None] | None:
    """The token counts the body reported, by the names traces give them; None when it reported
    none."""
    usage = transcript.usage
    if usage is None:
        return None
    return {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}


def finding_json(
    finding: Finding, side: Side | None = None, *, redact: bool = False
) -> dict[str, Any]:
    position = finding.position
    result: dict[str, Any] = {
        "code": str(finding.code),
        "severity": str(finding.severity),
        "side": finding.side or side,
        "choice": finding.choice,
        "count": finding.count,
        "position": {
            "event": position.event if position else None,
            "byte": position.byte if position else None,
        },
    }
    if result["side"] == "request":
        del result["choice"]
        result["turn"] = finding.turn
        if not redact:
            result["tool"] = finding.tool
    if finding.detail and not redact:
        result["detail"] = finding.detail
    return result


def render_comparison(comparison: Comparison, console: Console, *, redact: bool = False) -> None:
    """Verdict first, then one row per side summary, then one row per finding."""
    _verdict(console, comparison.verdict)
    sides = Table(show_edge=False, pad_edge=False)
    for column in ("side", "dialect", "events", "bytes", "choices", "tool calls"):
        sides.add_column(column, no_wrap=True)
    legs = (("upstream", comparison.upstream), ("downstream", comparison.downstream))
    for name, transcript in legs:
        sides.add_row(
            name,
            transcript.dialect,
            str(transcript.events),
            str(transcript.bytes),
            str(len(transcript.choices)),
            str(transcript.tool_call_count),
        )
    console.print(sides)
    for name, transcript in legs:
        if transcript.findings:
            codes = ", ".join(str(f.code) for f in transcript.findings)
            console.print(f"{name} on its own: {codes}", highlight=False)
    if comparison.requests is not None:
        render_requests_summary(comparison.requests, console)
    _findings(console, comparison.findings, sides=True, redact=redact)


def render_requests(requests: RequestComparison, console: Console, *,
                    redact: bool = False) -> None:
    """`calltap compare --requests`: the verdict, both requests' summaries, the findings."""
    _verdict(console, requests.verdict)
    render_requests_summary(requests, console)
    _findings(console, requests.findings, sides=False, redact=redact)


def render_requests_summary(requests: RequestComparison, console: Console) -> None:
    table = Table(show_edge=False, pad_edge=False)
    for column in ("request", "dialect", "tools", "tool choice", "turns"):
        table.add_column(column, no_wrap=True)
    for name, ask in (("upstream", requests.provider), ("downstream", requests.client)):
        choice = str(ask.tool_choice) if ask.tool_choice is not None else "-"
        table.add_row(name, ask.dialect, str(len(ask.tools)), choice,
                      str(len(merged_turns(ask.turns))))
    console.print(table)


def render_check(check: Check, console: Console, *, redact: bool = False) -> None:
    _verdict(console, check.verdict)
    transcript = check.transcript
    console.print(
        f"{transcript.dialect}: {transcript.events} events, {transcript.bytes} bytes, "
        f"{len(transcript.choices)} choices, {transcript.tool_call_count} tool calls",
        highlight=False,
    )
    _findings(console, check.findings, sides=False, redact=redact)


def _verdict(console: Console, verdict: str) -> None:
    console.print(Text.assemble("verdict: ", (verdict, VERDICT_STYLES.get(verdict, "bold"))))


def _findings(console: Console, findings: list[Finding], *, sides: bool, redact: bool) -> None:
    """One row per finding: the code (coloured by severity) over its severity and explanation."""
    if not findings:
        console.print("no findings", style="dim")
        return
    table = Table(show_edge=False, pad_edge=False, show_lines=True)
    table.add_column("finding", overflow="fold", ratio=1)
    if sides:
        table.add_column("side", no_wrap=True)
    for column in ("choice/turn", "count", "event:byte"):
        table.add_column(column, no_wrap=True, justify="right")
    for finding in findings:
        meaning = finding.code.explanation
        if finding.detail and not redact:
            meaning = f"{meaning}: {finding.detail}"
        label = Text.assemble(
            (str(finding.code), SEVERITY_STYLES[finding.severity]),
            "\n",
            (f"{finding.severity}: {meaning}", "dim"),
        )
        row: list[str | Text] = [label]
        if sides:
            row.append(finding.side or "-")
        place = f"turn {finding.turn}" if finding.turn is not None else _dash(finding.choice)
        if finding.tool is not None and not redact:
            place = f"{place} ({finding.tool})" if finding.turn is not None else finding.tool
        row += [place, _dash(finding.count), _where(finding.position)]
        table.add_row(*row)
    console.print(table)


def _where(position: Position | None) -> str:
    if position is None or (position.event is None and position.byte is None):
        return "-"
    return f"{_dash(position.event)}:{_dash(position.byte)}"


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)
