"""litellm #33404: an upstream connection that drops mid-stream reaches the client as a finished
answer.

The route: a client streams `/v1/chat/completions` for an `openai/` model, relayed to the
provider's `/v1/chat/completions`; both legs are `openai.chat`. The provider (calltap's
`ResettingProvider`) sends the role chunk and three text chunks, then the connection closes under
the body: no `finish_reason`, no `[DONE]`. LiteLLM 1.82.1's stream wrapper
(`litellm/litellm_core_utils/streaming_handler.py`, `CustomStreamWrapper.__anext__`) takes the
transport error for the end of the stream and `finish_reason_handler` makes up the rest: a chunk
with `finish_reason: "stop"`, a usage chunk it estimated itself, `data: [DONE]`. The client reads
a short answer that looks complete.

LiteLLM 1.97.0 reports the same reset honestly: an error frame in the client's stream (or an
HTTP 500 when nothing was sent yet), which the openai SDK raises. calltap takes that for the
failure forwarded: equal, no alarm. The control is the same request on 1.82.1 without the reset.
"""

from __future__ import annotations

import openai
import pytest
from gateway_stack import GatewayStack
from tests.with_litellm.litellm_stack import question

from calltap.fakes.resetting import RESET_HEADER

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODEL = "gpt-4o-mini"
MODELS = {MODEL: f"openai/{MODEL}"}
KEPT_EVENTS = 4
"""The role chunk and three text chunks reach LiteLLM before the connection drops."""
MASKED = {"FINISH_REASON_CHANGED", "USAGE_CHANGED"}
"""A `stop` where the provider gave no finish reason (fatal), and token counts the provider never
sent (negotiable)."""


async def say_something(gateway: GatewayStack, request_id: str, headers: dict[str, str]) -> str:
    """A streamed text answer with usage; returns the finish reason the client read."""
    sent = await gateway.stream_chat(
        request_id, headers=headers, model=MODEL, messages=question("Say something."),
        stream_options={"include_usage": True})
    assert sent.reply.text
    return sent.reply.finish_reason or ""


@pytest.mark.parametrize("gateway", ["1.82.1"], indirect=True)
async def test_33404_upstream_reset_passed_off_as_stop_is_caught(gateway: GatewayStack) -> None:
    finish_reason = await say_something(gateway, "litellm-33404",
                                        {RESET_HEADER: str(KEPT_EVENTS)})

    assert finish_reason == "stop"
    _, answer = gateway.provider_answer("litellm-33404")
    assert b"finish_reason\":\"stop" not in answer and b"[DONE]" not in answer
    assert gateway.provider.exchange_for("litellm-33404").complete is False
    await gateway.expect_caught("litellm-33404", MASKED)


@pytest.mark.parametrize("gateway", ["1.82.1"], indirect=True)
async def test_33404_control_whole_stream_is_clean(gateway: GatewayStack) -> None:
    finish_reason = await say_something(gateway, "litellm-33404-control", {})

    assert finish_reason == "stop"
    assert gateway.provider.exchange_for("litellm-33404-control").complete is True
    await gateway.expect_clean("litellm-33404-control")


@pytest.mark.parametrize("gateway", ["1.97.0"], indirect=True)
async def test_33404_fixed_release_reports_the_reset_and_is_clean(gateway: GatewayStack) -> None:
    with pytest.raises(openai.APIError):
        await say_something(gateway, "litellm-33404-fixed", {RESET_HEADER: str(KEPT_EVENTS)})

    assert gateway.provider.exchange_for("litellm-33404-fixed").complete is False
    await gateway.expect_clean("litellm-33404-fixed")
