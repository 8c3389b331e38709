"""A provider error in the middle of a stream, through Portkey 1.15.2 (pairing by header).

calltap's fake provider (`VariantProvider`, for a request carrying `X-Fake-Provider-Error: N`,
which Portkey forwards when `x-portkey-forward-headers` lists it) sends N events of its answer,
then the error its API sends in a stream that already started, and ends the response cleanly.

- OpenAI route: Portkey passes the `error` payload on; the openai SDK raises it. Faithful: `equal`.
- Anthropic route: Portkey turns `event: error` into a chunk whose only choice has no `index`
  and `finish_reason` set to the error's type (`{"finish_reason": "overloaded_error", "delta":
  {"content": ""}}`), then `data: [DONE]`. The SDK's `create()` iteration raises nothing: the
  client reads a short answer that ended with an unknown finish reason; the SDK's own stream
  accumulator (`chat.completions.stream()`) raises on the missing index.
- Bedrock route: Portkey turns the exception message into a chunk whose `finish_reason: "stop"`
  sits inside `delta` (the choice has none), then `data: [DONE]`: the error vanishes, and the
  call that was cut short reaches the client as a finished stream.
"""

from __future__ import annotations

import openai
import pytest
from portkey_stack import Stack, parsed
from tests.with_litellm.litellm_stack import CLOCK, STREAM, WEATHER, question

from calltap.fakes.variants import ERROR_HEADER

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def cut(stack: Stack, route: str, request_id: str, events: int, **request: object) -> object:
    return await stack.chat(route, request_id, extra={ERROR_HEADER: str(events)},
                            messages=question(), **request, **STREAM)


async def test_openai_error_payload_reaches_the_client(forwarding: Stack) -> None:
    with pytest.raises(openai.APIError, match="Overloaded"):
        await cut(forwarding, "openai", "error-openai", 3, tools=[WEATHER, CLOCK])

    pair = await forwarding.tap.wait_compared("error-openai", timeout=30.0)
    comparison = pair["comparison"]
    assert comparison["verdict"] == "equal", comparison
    codes = {finding["code"] for finding in comparison["downstream"]["findings"]}
    assert "ERROR_IN_STREAM" in codes, "the error is in both legs: forwarded, not a divergence"
    assert forwarding.log.lines("divergence", "error-openai") == []


async def test_anthropic_error_becomes_a_choice_without_index(forwarding: Stack) -> None:
    sent = await cut(forwarding, "anthropic", "error-anthropic", 9, tools=[WEATHER, CLOCK])

    assert sent.reply.text == "I'll look that up with weather"
    assert (sent.reply.tool_calls, sent.reply.finish_reason) == ({}, "overloaded_error")
    assert isinstance(sent.reply.sdk_accumulator_error(), TypeError)
    *_, last, done = parsed(forwarding.leg_file(sent, "downstream"))
    assert last["choices"] == [{"finish_reason": "overloaded_error", "delta": {"content": ""}}]
    assert done == "[DONE]"
    upstream = forwarding.leg_file(sent, "upstream")
    assert upstream.endswith(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                             b"\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
    findings = forwarding.expect_diverged(sent, {
        "CHOICE_INDEX_MISSING", "ERROR_DROPPED", "FINISH_REASON_CHANGED", "USAGE_MISSING"})
    (missing,) = [f for f in findings if f["code"] == "CHOICE_INDEX_MISSING"]
    assert missing["side"] == "downstream"


async def test_bedrock_exception_becomes_a_clean_end(forwarding: Stack) -> None:
    sent = await cut(forwarding, "bedrock", "error-bedrock", 4, tools=[WEATHER, CLOCK])

    assert sent.reply.tool_calls == {0: {"name": "weather", "arguments": '{"city'}}
    assert sent.reply.finish_reason is None
    *_, last, done = parsed(forwarding.leg_file(sent, "downstream"))
    (choice,) = last["choices"]
    assert choice == {"index": 0, "delta": {"role": "assistant", "finish_reason": "stop"}}
    assert done == "[DONE]"
    (dropped,) = forwarding.expect_diverged(sent, {"ERROR_DROPPED"})
    assert (dropped["side"], dropped["severity"], dropped["count"]) == (
        "downstream", "fatal", 1)
