"""litellm #33678: on the `ollama_chat/` route every streamed tool call is on `index: 0`.

The route: a client streams `/v1/chat/completions` for an `ollama_chat/` model; LiteLLM calls the
provider's `/api/chat` (NDJSON, each call whole in `message.tool_calls`) and translates each line
into Chat Completions chunks. In LiteLLM 1.97.0 `OllamaChatCompletionResponseIterator.chunk_parser`
(`litellm/llms/ollama/chat/transformation.py`) gives each call an id but no `index`, and the
`Delta` it builds numbers every call 0: two parallel calls reach the client as two starts of
call 0 with different ids, which an index-keyed client merges into one call named
`weatherclock` with the arguments `{"city": "Taipei"}{"zone": "UTC"}`.

What calltap must log, and why each is the honest reading of the client's stream: the second
start reuses index 0 with another id (TOOL_CALL_ID_CONFLICT); read by index, as the client reads
it, the stream holds one `weather` call whose arguments are two JSON objects end to end, which no
client can decode (TOOL_ARGUMENTS_INVALID) and which are not the provider's `weather` arguments
(TOOL_CALL_ARGUMENTS_CHANGED); `clock` is gone (TOOL_CALLS_DROPPED, TOOL_CALL_SET_CHANGED). A
client that keys calls by id rather than index would read both calls, which is why the conflict
is named apart from the drop. The same release also ends the turn with `finish_reason: "stop"`,
Ollama's word, where the provider's turn was tool calls (Ollama says `stop` after calls too):
FINISH_REASON_CHANGED, "stop (tool_calls) -> stop". LiteLLM fixed that one separately
(`seen_tool_calls`, citing litellm #18922 and #34692): absent in 1.100.5, present from 1.101.0.

The fix (a per-stream `_next_tool_call_index`) is in 1.108.5 to 1.108.14, the pinned release of
`tests/with_litellm` among them, whose `test_litellm_routes.py` shows the same route `equal`; the
1.109 and 1.110 releases do not have it. The control here is the same route on 1.97.0 with one
tool, where index 0 is right: only the finish reason is left.
"""

from __future__ import annotations

import pytest
from gateway_stack import GatewayStack
from tests.with_litellm.litellm_stack import CLOCK, WEATHER, question

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODEL = "ollama-fake"
MODELS = {MODEL: {"model": "ollama_chat/llama3.1"}}
MERGED = {"TOOL_CALL_ID_CONFLICT", "TOOL_ARGUMENTS_INVALID", "TOOL_CALL_ARGUMENTS_CHANGED",
          "TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED", "FINISH_REASON_CHANGED"}
"""The merge, and the finish reason the same release gets wrong on this route."""


@pytest.mark.parametrize("gateway", ["1.97.0"], indirect=True)
async def test_33678_parallel_ollama_calls_on_index_0_are_caught(gateway: GatewayStack) -> None:
    sent = await gateway.stream_chat("litellm-33678", model=MODEL, messages=question(),
                                     tools=[WEATHER, CLOCK])

    assert sent.tool_call_indexes == [0, 0]
    assert sent.reply.tool_calls == {
        0: {"name": "weatherclock", "arguments": '{"city": "Taipei"}{"zone": "UTC"}'}}
    request, answer = gateway.provider_answer("litellm-33678")
    assert request["stream"] is True and answer.count(b'"tool_calls"') == 2
    assert sent.reply.finish_reason == "stop"
    await gateway.expect_caught("litellm-33678", MERGED)


@pytest.mark.parametrize("gateway", ["1.97.0"], indirect=True)
async def test_33678_control_one_call_leaves_only_the_finish_reason(
    gateway: GatewayStack,
) -> None:
    sent = await gateway.stream_chat("litellm-33678-control", model=MODEL, messages=question(),
                                     tools=[WEATHER])

    assert sent.tool_call_indexes == [0]
    assert sent.reply.calls() == [("weather", {"city": "Taipei"})]
    await gateway.expect_caught("litellm-33678-control", {"FINISH_REASON_CHANGED"})
