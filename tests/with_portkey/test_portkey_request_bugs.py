"""Request bugs of Portkey 1.9.8 that 1.15.2 fixed, caught on the request the provider received.

The same client request goes through both releases (`portkey_release`, parametrized indirectly);
on 1.9.8 calltap finds the provider asked something else than the client asked, names it in
pair.json (`comparison.requests.findings`, `side: "request"`) and logs it as a `divergence`
line; on 1.15.2 the same request has no request finding. Each bug is traced to the release's
source in README.md ("Request bugs").

- Bedrock Converse, `temperature: 0` and `top_p: 0`: 1.9.8 builds `inferenceConfig` with
  `e.temperature&&(t.temperature=e.temperature)`, so a 0 is dropped and the provider samples at
  its default (Portkey PR #1383, "fix falsy check in bedrock").
- Anthropic, `tool_choice: "none"`: 1.9.8 maps only `required`, `auto` and a named function, and
  sends nothing for `none`; Anthropic's default with tools offered is `auto`, and the model calls
  the tools the client forbade (Portkey #1474, PR #1477).
- Held back (written after the two above passed, the comparator untouched): Gemini,
  `temperature: 0` and `top_p: 0`: the same falsy check in `generationConfig` (Portkey #1423,
  PR #1422).

1.9.8 also hands the client the provider's own finish reason on these routes (`tool_use`,
`STOP`; 1.15.2 maps it unless `x-portkey-strict-open-ai-compliance: false`): a response bug of
that release, FINISH_REASON_CHANGED beside each request finding, which the tests name.
"""

from __future__ import annotations

import pytest
from portkey_stack import OLD_RELEASE, RELEASE, Sent, Stack
from tests.with_litellm.litellm_stack import CLOCK, PARALLEL_CALLS, WEATHER, question

pytestmark = pytest.mark.asyncio(loop_scope="module")

BUGGY = pytest.mark.parametrize("portkey_release", [OLD_RELEASE], indirect=True)
FIXED = pytest.mark.parametrize("portkey_release", [RELEASE], indirect=True)
ZERO = {"temperature": 0, "top_p": 0}
"""Greedy decoding, as an evaluation or a test harness asks for it."""


async def zero_sampling(stack: Stack, route: str, request_id: str) -> Sent:
    return await stack.chat(route, request_id, messages=question(), tools=[WEATHER, CLOCK],
                            **ZERO)


def answer_findings(sent: Sent) -> set[tuple[str, str]]:
    """What the answers' comparison found (the response side), by code and detail."""
    return {(f["code"], f["detail"]) for f in sent.pair["comparison"]["findings"]
            if f["side"] != "request"}


def expect_no_request_finding(stack: Stack, sent: Sent) -> None:
    assert stack.request_findings(sent) == []
    assert sent.pair["comparison"]["requests"]["verdict"] == "equal"
    assert [line for line in stack.log.lines("divergence", sent.request_id)
            if line["side"] == "request"] == []


@BUGGY
async def test_bedrock_zero_sampling_is_dropped(portkey_release: Stack) -> None:
    sent = await zero_sampling(portkey_release, "bedrock-signed", "portkey-1383")

    upstream = portkey_release.request_body(sent, "upstream")
    assert "temperature" not in upstream.get("inferenceConfig", {})
    assert "topP" not in upstream.get("inferenceConfig", {})
    assert sent.reply.calls() == PARALLEL_CALLS
    findings = portkey_release.expect_request_diverged(sent, {"SAMPLING_CHANGED"})
    assert sorted(f["detail"] for f in findings) == [
        "sampling.temperature: 0 -> absent", "sampling.top_p: 0 -> absent"]
    assert {f["severity"] for f in findings} == {"negotiable"}
    assert answer_findings(sent) == {
        ("FINISH_REASON_CHANGED", "tool_use (tool_calls) -> tool_use")}


@FIXED
async def test_bedrock_zero_sampling_reaches_the_provider(portkey_release: Stack) -> None:
    sent = await zero_sampling(portkey_release, "bedrock-signed", "portkey-1383-fixed")

    upstream = portkey_release.request_body(sent, "upstream")
    assert (upstream["inferenceConfig"]["temperature"], upstream["inferenceConfig"]["topP"]) == (
        0, 0)
    expect_no_request_finding(portkey_release, sent)
    portkey_release.expect_equal(sent, "bedrock-signed", stream=False, pairing="header")


async def no_tool(stack: Stack, request_id: str) -> Sent:
    return await stack.chat("anthropic", request_id, messages=question(),
                            tools=[WEATHER, CLOCK], tool_choice="none")


@BUGGY
async def test_anthropic_tool_choice_none_is_dropped(portkey_release: Stack) -> None:
    sent = await no_tool(portkey_release, "portkey-1474")

    upstream = portkey_release.request_body(sent, "upstream")
    assert upstream.get("tool_choice") is None
    assert sent.reply.calls() == PARALLEL_CALLS, "the model called the tools the client forbade"
    (finding,) = portkey_release.expect_request_diverged(sent, {"TOOL_CHOICE_CHANGED"})
    assert (finding["detail"], finding["severity"]) == ("none -> auto", "fatal")
    assert {code for code, _ in answer_findings(sent)} == {
        "FINISH_REASON_CHANGED", "TOOL_CALL_IDS_REMAPPED"}


@FIXED
async def test_anthropic_tool_choice_none_reaches_the_provider(portkey_release: Stack) -> None:
    sent = await no_tool(portkey_release, "portkey-1474-fixed")

    assert portkey_release.request_body(sent, "upstream")["tool_choice"] == {"type": "none"}
    assert sent.reply.tool_calls == {} and sent.reply.text
    expect_no_request_finding(portkey_release, sent)
    portkey_release.expect_equal(sent, "anthropic", stream=False, pairing="header")


async def zero_temperature_on_gemini(stack: Stack, request_id: str) -> Sent:
    """A text question, whole: Portkey's Gemini route has response bugs of its own on calls and
    streams (`test_portkey_routes.py`)."""
    return await stack.chat("google", request_id, messages=question("Say something."), **ZERO)


@BUGGY
async def test_gemini_zero_sampling_is_dropped(portkey_release: Stack) -> None:
    """Held back: written after the tests above passed, with the comparator untouched."""
    sent = await zero_temperature_on_gemini(portkey_release, "portkey-1423")

    config = portkey_release.request_body(sent, "upstream").get("generationConfig", {})
    assert "temperature" not in config and "topP" not in config
    findings = portkey_release.expect_request_diverged(sent, {"SAMPLING_CHANGED"})
    assert sorted(f["detail"] for f in findings) == [
        "sampling.temperature: 0 -> absent", "sampling.top_p: 0 -> absent"]
    assert answer_findings(sent) == {("FINISH_REASON_CHANGED", "STOP (stop) -> STOP")}


@FIXED
async def test_gemini_zero_sampling_reaches_the_provider(portkey_release: Stack) -> None:
    """Held back, as above."""
    sent = await zero_temperature_on_gemini(portkey_release, "portkey-1423-fixed")

    config = portkey_release.request_body(sent, "upstream")["generationConfig"]
    assert (config["temperature"], config["topP"]) == (0, 0)
    expect_no_request_finding(portkey_release, sent)
    portkey_release.expect_equal(sent, "google", stream=False, pairing="header")
