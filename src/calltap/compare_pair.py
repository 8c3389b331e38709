"""A pair's comparison joined with its requests': the answers' findings and the requests'.

`join_requests` adds the requests' comparison to the answers' (`compare.Comparison`): their
findings join, and a breaking one makes an equal pair diverged; a request that could not be read
makes no pair inconclusive. When the requests show that the gateway carried the client's
structured-output schema as a forced tool (the stand-in Anthropic and Bedrock routes use), the
answers are compared again with the provider's call of that tool read as what it stands for: the
text the gateway hands the client.
"""

from __future__ import annotations

import dataclasses

from calltap.compare import Comparison, compare
from calltap.compare_requests import PairRequests, RequestComparison, compare_pair_requests
from calltap.jsonvalues import JsonInvalid, decode_strict
from calltap.transcript import Choice, ToolCall


def join_requests(comparison: Comparison, requests: RequestComparison,
                  attempts: dict[int, RequestComparison] | None = None) -> Comparison:
    """The pair's comparison with its requests': their findings join the findings, and a
    breaking one makes an equal pair diverged. A request that could not be read
    (REQUEST_UNREADABLE) makes no pair inconclusive: the answers' comparison stands alone."""
    if requests.stand_in is not None:
        comparison = _answered_by_stand_in(comparison, requests.stand_in)
    comparison.requests = requests
    comparison.request_attempts = dict(attempts or {})
    comparison.findings.extend(requests.findings)
    if comparison.verdict == "equal" and requests.verdict == "diverged":
        comparison.verdict = "diverged"
    return comparison


def _answered_by_stand_in(comparison: Comparison, name: str) -> Comparison:
    """The answers compared again with the provider's call of the structured-output stand-in
    read as what it stands for: the gateway hands the client that call's arguments as the
    message's text, and a turn ended by it as a turn ended by `stop`."""
    upstream = comparison.upstream
    choices: dict[int, Choice] = {}
    for index, choice in upstream.choices.items():
        answers = [call for call in choice.tool_calls if call.name == name]
        if not answers:
            choices[index] = choice
            continue
        rest = [call for call in choice.tool_calls if call.name != name]
        client = comparison.downstream.choices.get(index)
        text = choice.text + "".join(_answer_text(call, client) for call in answers)
        finish = "stop" if choice.finish_reason == "tool_calls" and not rest else None
        choices[index] = dataclasses.replace(choice, text=text, tool_calls=rest,
                                             finish_reason=finish or choice.finish_reason)
    if choices == upstream.choices:
        return comparison
    adjusted = dataclasses.replace(upstream, choices=choices)
    return compare(adjusted, comparison.downstream, usage_requested=comparison.usage_requested)


def _answer_text(call: ToolCall, client: Choice | None) -> str:
    """A stand-in call's arguments as the client's text: the client's own text when it is the
    same JSON value (a gateway re-serializes it), else the arguments as sent."""
    if client is not None and call.decoded is not None and client.text.strip()[:1] == "{":
        try:
            if decode_strict(client.text).key == call.decoded.key:
                return client.text
        except JsonInvalid:
            pass
    return call.arguments


def with_requests(comparison: Comparison, requests: PairRequests | None) -> Comparison:
    """The comparison joined with its pair's recorded requests', when both were recorded."""
    if requests is None:
        return comparison
    return join_requests(comparison, *compare_pair_requests(requests))
