"""Request-translation bugs of LiteLLM releases, caught on the request the provider received.

The client streams `/v1/chat/completions` for an `anthropic/` model (LiteLLM calls the
provider's `/v1/messages`) or a `bedrock/` one (Converse: `/model/{id}/converse-stream`).
calltap reads the client's request (`openai.chat`) and the provider's (`anthropic.messages`,
`bedrock.converse`) as one `Ask` each and compares them by meaning: on the buggy release
pair.json holds the request finding and calltap logs it as a `divergence` line with
`side: "request"`; on the fixed release the same request has none.

- litellm #26692: a tool whose parameter schema keeps its subschemas in the legacy
  `definitions` (an MCP server's, or any draft-04/07 schema) loses them on the way to Anthropic.
  Up to 1.88.x `AnthropicConfig._map_tool_helper`
  (`litellm/llms/anthropic/chat/transformation.py`) keeps only the keys of
  `AnthropicInputSchema` (`type`, `properties`, `additionalProperties`, `required`, `$defs`,
  `strict`), so `definitions` is dropped and every `$ref: "#/definitions/…"` points nowhere:
  Anthropic answers 400 (`PointerToNowhere`), and a server that does not resolve references
  sees a property with no type. From 1.89.0 (PR #28646) `unpack_legacy_defs` inlines them first.
- Held back (written after the test above passed, the comparator untouched): a strict tool on
  Bedrock Converse loses `strict` and its schema's `additionalProperties: false`. Up to 1.89.x
  `_bedrock_tools_pt` (`litellm/litellm_core_utils/prompt_templates/factory.py`) builds the
  `inputSchema.json` from `type`, `properties` and `required` alone, and the tool spec from
  `name`, `description` and the schema: the provider is asked for a tool that accepts any extra
  argument, without constrained decoding. 1.90.0 (PR #29814, re-applying PR #25209) forwards
  both for the Claude models that take them (`BedrockToolSpec`).

The suite runs 1.82.0 (buggy) and 1.97.0 (fixed), which the other modules already build.
"""

from __future__ import annotations

from typing import Any

import pytest
from gateway_stack import GatewayStack
from tests.with_litellm.litellm_stack import BEDROCK_MODEL_ID, FAKE_AWS, WEATHER, question

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODEL = "claude-fake"
CONVERSE_MODEL = "converse-fake"
MODELS = {MODEL: {"model": "anthropic/claude-3-5-sonnet-20241022",
                  "api_key": "sk-ant-provider-fake"},
          CONVERSE_MODEL: {"model": f"bedrock/{BEDROCK_MODEL_ID}", **FAKE_AWS}}
"""LiteLLM appends each provider's path to the `api_base` (calltap's back)."""
RENUMBERED = frozenset({"TOOL_CALL_IDS_REMAPPED"})
"""The Anthropic answer's calls follow a text block, and reach the client numbered from 0:
cosmetic, on every release."""
CONTACTS: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "contacts",
        "description": "Contacts carrying a tag",
        "parameters": {
            "type": "object",
            "properties": {"tag": {"$ref": "#/definitions/Tag"},
                           "limit": {"type": "integer"}},
            "required": ["tag"],
            "definitions": {"Tag": {"type": "string", "enum": ["customer", "vendor"]}},
        },
    },
}
"""A schema with its enum in legacy `definitions`, the shape of litellm #26692's MCP tool
(`"$ref": "#/definitions/_gen:tags"`)."""


async def legacy_definitions(gateway: GatewayStack, request_id: str) -> dict[str, Any]:
    """Offer the tool beside a plain one; the provider's `contacts` input schema."""
    sent = await gateway.stream_chat(request_id, model=MODEL, max_tokens=512,
                                     messages=question("Who are our customers, and the weather"
                                                       " in Taipei?"),
                                     tools=[CONTACTS, WEATHER])
    assert set(sent.reply.tool_calls) == {0, 1}
    request = gateway.recorded_request(request_id, "upstream")
    (schema,) = [tool["input_schema"] for tool in request["tools"] if tool["name"] == "contacts"]
    return schema


@pytest.mark.parametrize("gateway", ["1.82.0"], indirect=True)
async def test_26692_legacy_definitions_dropped_are_caught(gateway: GatewayStack) -> None:
    schema = await legacy_definitions(gateway, "litellm-26692")

    assert "definitions" not in schema
    assert schema["properties"]["tag"] == {"$ref": "#/definitions/Tag"}, "a dangling reference"
    (finding,) = await gateway.expect_request_caught("litellm-26692", {"TOOL_SCHEMA_CHANGED"},
                                                     answers=RENUMBERED)
    assert (finding["tool"], finding["detail"]) == ("contacts", "differs at /properties/tag/$ref")


@pytest.mark.parametrize("gateway", ["1.97.0"], indirect=True)
async def test_26692_fixed_release_inlines_them(gateway: GatewayStack) -> None:
    schema = await legacy_definitions(gateway, "litellm-26692-fixed")

    assert schema["properties"]["tag"] == {"type": "string", "enum": ["customer", "vendor"]}
    await gateway.expect_clean("litellm-26692-fixed", cosmetic=RENUMBERED)


STRICT_WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        **WEATHER["function"],
        "strict": True,
        "parameters": {**WEATHER["function"]["parameters"], "additionalProperties": False},
    },
}
"""A strict tool as OpenAI's structured outputs want it: `strict`, and no extra property."""


async def strict_on_converse(gateway: GatewayStack, request_id: str) -> dict[str, Any]:
    """The provider's tool spec for a strict tool."""
    sent = await gateway.stream_chat(request_id, model=CONVERSE_MODEL, messages=question(),
                                     tools=[STRICT_WEATHER])
    assert sent.reply.calls() == [("weather", {"city": "Taipei"})]
    request = gateway.recorded_request(request_id, "upstream")
    (tool,) = request["toolConfig"]["tools"]
    return tool["toolSpec"]


@pytest.mark.parametrize("gateway", ["1.82.0"], indirect=True)
async def test_converse_strict_tool_loosened_is_caught(gateway: GatewayStack) -> None:
    """Held back: written after the test above passed, with the comparator untouched."""
    spec = await strict_on_converse(gateway, "litellm-29814")

    assert "strict" not in spec and "additionalProperties" not in spec["inputSchema"]["json"]
    findings = await gateway.expect_request_caught(
        "litellm-29814", {"TOOL_SCHEMA_CHANGED", "TOOL_STRICT_CHANGED"})
    assert sorted((f["code"], f["tool"], f["detail"]) for f in findings) == [
        ("TOOL_SCHEMA_CHANGED", "weather", "differs at /additionalProperties"),
        ("TOOL_STRICT_CHANGED", "weather", "strict True -> None")]


@pytest.mark.parametrize("gateway", ["1.97.0"], indirect=True)
async def test_converse_strict_tool_fixed_release_keeps_it(gateway: GatewayStack) -> None:
    """Held back, as above."""
    spec = await strict_on_converse(gateway, "litellm-29814-fixed")

    assert spec["strict"] is True and spec["inputSchema"]["json"]["additionalProperties"] is False
    await gateway.expect_clean("litellm-29814-fixed")
