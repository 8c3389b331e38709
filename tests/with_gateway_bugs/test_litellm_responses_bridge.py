"""LiteLLM's Chat Completions -> Responses bridge numbering streamed tool calls: two bugs in a row.

The route: a client streams `/v1/chat/completions` for a model configured as
`openai/responses/<model>`; LiteLLM calls the provider's `/v1/responses` and translates each
`response.*` event into a chat chunk
(`litellm/completion_extras/litellm_responses_transformation/transformation.py`,
`translate_responses_chunk_to_openai_stream`). calltap reads the front leg as `openai.chat` and
the back leg as `openai.responses`.

- litellm #21331: up to 1.82.0 every tool-call chunk is built with `index=0`, so two parallel
  calls reach the client as one call named `weatherweatherclock…` with both argument objects
  glued together. 1.82.1 (PR #21337) takes the index from the event's `output_index`.
- The sequel: `output_index` counts every output item, and a reasoning model puts a `reasoning`
  item at 0, so from 1.82.1 to 1.96.x the calls stream on indexes 1 and 2; the openai SDK's
  own accumulator (`chat.completions.stream()`) raises IndexError on the first one. 1.97.0 maps
  each `output_index` to the next sequential index (`_sequential_tool_call_index`).
"""

from __future__ import annotations

import pytest
from gateway_stack import GatewayStack, Streamed
from tests.with_litellm.litellm_stack import CLOCK, PARALLEL_CALLS, WEATHER, question

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODEL = "gpt-5-mini"
MODELS = {MODEL: f"openai/responses/{MODEL}"}
ALL_ON_INDEX_0 = {
    "TOOL_CALL_ID_CONFLICT",
    "TOOL_CALLS_DROPPED",
    "TOOL_CALL_SET_CHANGED",
    "TOOL_CALL_ARGUMENTS_CHANGED",
    "TOOL_ARGUMENTS_INVALID",
}
"""Two calls merged on index 0: a second id on a used index, one call missing, the survivor's
arguments two JSON objects back to back."""
RENUMBERED = frozenset({"TOOL_CALL_IDS_REMAPPED"})
"""The fixed bridge numbers the calls 0 and 1 where the provider said 1 and 2: cosmetic."""


async def parallel_calls(gateway: GatewayStack, request_id: str, *, reasoning: bool) -> Streamed:
    """Offer two tools (the fake model calls both); with `reasoning`, ask for reasoning effort,
    which LiteLLM sends on as `reasoning: {"effort": "low"}` and the provider answers with a
    reasoning item at output_index 0 before the two calls."""
    extra = {"reasoning_effort": "low"} if reasoning else {}
    sent = await gateway.stream_chat(request_id, model=MODEL, messages=question(),
                                     tools=[WEATHER, CLOCK], **extra)
    request, answer = gateway.provider_answer(request_id)
    assert ("reasoning" in request) is reasoning
    assert (b'"type":"reasoning"' in answer) is reasoning
    return sent


@pytest.mark.parametrize("gateway", ["1.82.0"], indirect=True)
async def test_21331_parallel_calls_on_one_index_are_caught(gateway: GatewayStack) -> None:
    sent = await parallel_calls(gateway, "litellm-21331", reasoning=False)

    assert set(sent.tool_call_indexes) == {0}
    assert sent.reply.tool_calls == {0: {"name": "weatherweatherclockclock",
                                         "arguments": '{"city":"Taipei"}{"zone":"UTC"}'}}
    await gateway.expect_caught("litellm-21331", ALL_ON_INDEX_0)


@pytest.mark.parametrize("gateway", ["1.82.1"], indirect=True)
async def test_21331_fixed_release_is_clean(gateway: GatewayStack) -> None:
    sent = await parallel_calls(gateway, "litellm-21331-fixed", reasoning=False)

    assert sent.tool_call_indexes == [0] * 6 + [1] * 6
    assert sent.reply.calls() == PARALLEL_CALLS
    assert sent.sdk_accumulator_error() is None
    await gateway.expect_clean("litellm-21331-fixed")


@pytest.mark.parametrize("gateway", ["1.82.1"], indirect=True)
async def test_reasoning_item_shifting_call_indexes_is_caught(gateway: GatewayStack) -> None:
    sent = await parallel_calls(gateway, "litellm-output-index", reasoning=True)

    assert sent.tool_call_indexes == [1] * 6 + [2] * 6
    assert isinstance(sent.sdk_accumulator_error(), IndexError)
    await gateway.expect_caught("litellm-output-index", {"TOOL_CALL_INDEX_GAP"})


@pytest.mark.parametrize("gateway", ["1.97.0"], indirect=True)
async def test_reasoning_item_fixed_release_is_clean(gateway: GatewayStack) -> None:
    sent = await parallel_calls(gateway, "litellm-output-index-fixed", reasoning=True)

    assert sent.tool_call_indexes == [0] * 6 + [1] * 6
    assert sent.reply.calls() == PARALLEL_CALLS
    assert sent.sdk_accumulator_error() is None
    await gateway.expect_clean("litellm-output-index-fixed", cosmetic=RENUMBERED)
