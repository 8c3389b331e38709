"""The request comparator's rules, one code at a time: each code's case, and beside it the
nearest case that must read equal (a faithful translation into another dialect, or a rewrite that
keeps the meaning).

The client's request is a Chat Completions body; the provider's is the body a gateway sent, in
the provider's dialect, read by that dialect's request side (`read_ask` by its path).
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import orjson

from calltap.codes import Code
from calltap.compare_requests import (
    PairRequests,
    RecordedRequest,
    RequestComparison,
    compare_pair_requests,
    compare_requests,
)
from calltap.dialects.asks import read_ask

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
CONVERSE = "/model/anthropic.claude-sonnet-4-5-v1%3A0/converse"
GEMINI = "/v1beta/models/gemini-2.5-flash:generateContent"
OLLAMA = "/api/chat"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
PNG_B64 = base64.b64encode(PNG).decode()
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
    "required": ["city"],
}
CLOCK = {"type": "object", "properties": {"zone": {"type": "string"}}}


def chat_tool(name: str, schema: Any, **function: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": schema, **function}}


def chat(messages: list[Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A Chat Completions request: one user message and the two tools unless told otherwise."""
    request: dict[str, Any] = {
        "model": "gpt-4o",
        "messages": messages or [{"role": "user", "content": "Weather in Taipei?"}],
        "tools": [chat_tool("weather", WEATHER), chat_tool("clock", CLOCK)],
    }
    request.update(fields)
    return {key: value for key, value in request.items() if value is not None}


def anthropic(messages: list[Any] | None = None, **fields: Any) -> dict[str, Any]:
    """The Messages body a faithful gateway sends for `chat()`."""
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": messages or [{"role": "user", "content": "Weather in Taipei?"}],
        "tools": [{"name": "weather", "input_schema": WEATHER},
                  {"name": "clock", "input_schema": CLOCK}],
    }
    request.update(fields)
    return {key: value for key, value in request.items() if value is not None}


def compared(client: dict[str, Any], provider: dict[str, Any],
             path: str = CHAT) -> RequestComparison:
    return compare_requests(read_ask(orjson.dumps(client), CHAT),
                            read_ask(orjson.dumps(provider), path))


def codes(comparison: RequestComparison) -> list[Code]:
    return [finding.code for finding in comparison.findings]


def assert_equal(comparison: RequestComparison) -> None:
    assert comparison.client.readable and comparison.provider.readable
    assert comparison.findings == [], comparison.findings
    assert comparison.verdict == "equal"


def assert_only(comparison: RequestComparison, code: Code) -> None:
    assert codes(comparison) == [code], comparison.findings


# --- tools offered ------------------------------------------------------------------------------


def test_a_tool_not_offered_upstream_is_dropped_by_name() -> None:
    comparison = compared(chat(), chat(tools=[chat_tool("weather", WEATHER)]))
    assert_only(comparison, Code.REQUEST_TOOL_DROPPED)
    assert comparison.findings[0].tool == "clock"
    assert comparison.verdict == "diverged"


def test_the_same_tools_in_another_order_are_equal() -> None:
    assert_equal(compared(chat(), chat(tools=[chat_tool("clock", CLOCK),
                                              chat_tool("weather", WEATHER)])))


def test_a_tool_offered_upstream_only_is_added() -> None:
    tools = [chat_tool("weather", WEATHER), chat_tool("clock", CLOCK),
             chat_tool("web_search", {"type": "object"})]
    comparison = compared(chat(), chat(tools=tools))
    assert_only(comparison, Code.REQUEST_TOOL_ADDED)
    assert comparison.findings[0].tool == "web_search"


def test_the_tools_carried_to_anthropic_are_equal() -> None:
    assert_equal(compared(chat(), anthropic(), MESSAGES))


def test_a_tool_choice_of_none_with_every_tool_left_out_upstream_is_equal() -> None:
    assert_equal(compared(chat(tool_choice="none"), chat(tools=None)))
    dropped = compared(chat(tool_choice="auto"), chat(tools=None)).findings
    assert [(f.code, f.tool) for f in dropped if f.code == Code.REQUEST_TOOL_DROPPED] == [
        (Code.REQUEST_TOOL_DROPPED, "weather"), (Code.REQUEST_TOOL_DROPPED, "clock")]


# --- tool schemas -------------------------------------------------------------------------------


def test_a_schema_that_accepts_other_arguments_upstream_is_changed() -> None:
    narrowed = {**WEATHER, "properties": {**WEATHER["properties"], "unit": {"enum": ["c"]}}}
    comparison = compared(chat(), chat(tools=[chat_tool("weather", narrowed),
                                              chat_tool("clock", CLOCK)]))
    assert_only(comparison, Code.TOOL_SCHEMA_CHANGED)
    assert comparison.findings[0].tool == "weather"
    assert "/properties/unit" in comparison.findings[0].detail


def test_a_schema_rewritten_without_changing_its_meaning_is_equal() -> None:
    client = {
        "type": "object",
        "title": "Weather",
        "properties": {"city": {"$ref": "#/$defs/city"}, "unit": {"const": "c"}},
        "required": ["city"],
        "$defs": {"city": {"type": "string", "description": "a city's name"}},
    }
    inlined = {
        "properties": {"unit": {"enum": ["c"]}, "city": {"type": ["string"]}},
        "required": ["city"],
        "type": "object",
    }
    assert_equal(compared(chat(tools=[chat_tool("weather", client)]),
                          chat(tools=[chat_tool("weather", inlined)])))


def test_a_ref_that_names_another_definition_upstream_is_changed() -> None:
    def pointing_at(target: str) -> dict[str, Any]:
        return {"type": "object", "properties": {"when": {"$ref": f"#/$defs/{target}"}},
                "$defs": {"date": {"type": "string"}, "count": {"type": "integer"}}}
    comparison = compared(chat(tools=[chat_tool("clock", pointing_at("date"))]),
                          chat(tools=[chat_tool("clock", pointing_at("count"))]))
    assert_only(comparison, Code.TOOL_SCHEMA_CHANGED)


def test_a_schema_only_the_provider_cannot_say_is_unsupported_for_gemini() -> None:
    closed = {**WEATHER, "additionalProperties": False}
    gemini = {
        "contents": [{"role": "user", "parts": [{"text": "Weather in Taipei?"}]}],
        "tools": [{"functionDeclarations": [
            {"name": "weather", "parameters": {
                "type": "OBJECT",
                "properties": {"city": {"type": "STRING"},
                               "unit": {"type": "STRING", "enum": ["c", "f"]}},
                "required": ["city"]}},
            {"name": "clock", "parameters": {
                "type": "OBJECT", "properties": {"zone": {"type": "STRING"}}}},
        ]}],
    }
    client_tools = [chat_tool("weather", {**closed, "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}}),
        chat_tool("clock", CLOCK)]
    comparison = compared(chat(tools=client_tools), gemini, GEMINI)
    assert_only(comparison, Code.REQUEST_PART_UNSUPPORTED)
    assert comparison.findings[0].tool == "weather"
    assert comparison.verdict == "equal"
    # a property Gemini's schema could say, dropped, is a changed schema
    narrowed = copy.deepcopy(gemini)
    del narrowed["tools"][0]["functionDeclarations"][0]["parameters"]["properties"]["unit"]
    comparison = compared(chat(tools=client_tools), narrowed, GEMINI)
    assert_only(comparison, Code.TOOL_SCHEMA_CHANGED)


# --- strict -------------------------------------------------------------------------------------


def test_strict_dropped_is_a_strict_change() -> None:
    strict = [chat_tool("weather", WEATHER, strict=True), chat_tool("clock", CLOCK)]
    comparison = compared(chat(tools=strict), chat())
    assert_only(comparison, Code.TOOL_STRICT_CHANGED)
    assert comparison.findings[0].tool == "weather"
    assert comparison.verdict == "diverged"


def test_strict_false_and_no_strict_are_equal() -> None:
    loose = [chat_tool("weather", WEATHER, strict=False), chat_tool("clock", CLOCK)]
    assert_equal(compared(chat(tools=loose), chat()))


# --- tool choice and parallel calls -------------------------------------------------------------


def test_required_and_anthropic_any_are_equal() -> None:
    assert_equal(compared(chat(tool_choice="required"),
                          anthropic(tool_choice={"type": "any"}), MESSAGES))


def test_required_turned_into_auto_is_a_choice_change() -> None:
    comparison = compared(chat(tool_choice="required"),
                          anthropic(tool_choice={"type": "auto"}), MESSAGES)
    assert_only(comparison, Code.TOOL_CHOICE_CHANGED)
    assert comparison.findings[0].detail == "required -> auto"


def test_a_forced_function_and_anthropic_tool_are_equal_and_another_is_not() -> None:
    forced = {"type": "function", "function": {"name": "clock"}}
    assert_equal(compared(chat(tool_choice=forced),
                          anthropic(tool_choice={"type": "tool", "name": "clock"}), MESSAGES))
    comparison = compared(chat(tool_choice=forced),
                          anthropic(tool_choice={"type": "tool", "name": "weather"}), MESSAGES)
    assert_only(comparison, Code.TOOL_CHOICE_CHANGED)


def test_no_tool_choice_and_auto_are_equal() -> None:
    assert_equal(compared(chat(), chat(tool_choice="auto")))


def test_parallel_false_and_disable_parallel_tool_use_are_equal() -> None:
    assert_equal(compared(
        chat(parallel_tool_calls=False),
        anthropic(tool_choice={"type": "auto", "disable_parallel_tool_use": True}), MESSAGES))


def test_parallel_true_and_no_parallel_flag_are_equal() -> None:
    assert_equal(compared(chat(parallel_tool_calls=True), anthropic(), MESSAGES))
    assert_equal(compared(chat(), chat(parallel_tool_calls=True)))


def test_parallel_false_dropped_is_a_parallel_change() -> None:
    comparison = compared(chat(parallel_tool_calls=False), anthropic(), MESSAGES)
    assert_only(comparison, Code.PARALLEL_TOOL_CALLS_CHANGED)
    comparison = compared(chat(parallel_tool_calls=False), chat())
    assert_only(comparison, Code.PARALLEL_TOOL_CALLS_CHANGED)


def test_a_tool_choice_ollama_cannot_say_is_unsupported() -> None:
    ollama = {
        "model": "qwen3",
        "messages": [{"role": "user", "content": "Weather in Taipei?"}],
        "tools": [chat_tool("weather", WEATHER), chat_tool("clock", CLOCK)],
        "stream": False,
    }
    comparison = compared(chat(tool_choice="required"), ollama, OLLAMA)
    assert_only(comparison, Code.REQUEST_PART_UNSUPPORTED)
    assert comparison.findings[0].detail.startswith("tool_choice")
    assert comparison.verdict == "equal"
    assert_equal(compared(chat(tool_choice="auto"), ollama, OLLAMA))


# --- instructions and messages ------------------------------------------------------------------


def test_a_system_message_and_anthropic_system_are_equal() -> None:
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Taipei?"}]
    assert_equal(compared(chat(messages), anthropic(system="Be brief."), MESSAGES))
    assert_equal(compared(chat(messages), anthropic(
        system=[{"type": "text", "text": "Be brief."}]), MESSAGES))


def test_a_system_message_dropped_is_a_message_change() -> None:
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Taipei?"}]
    comparison = compared(chat(messages), anthropic(), MESSAGES)
    assert_only(comparison, Code.MESSAGE_CHANGED)
    assert comparison.findings[0].detail.startswith("instructions")


def test_consecutive_user_messages_and_one_merged_turn_are_equal() -> None:
    messages = [{"role": "user", "content": "Weather"},
                {"role": "user", "content": [{"type": "text", "text": "in  Taipei?"}]}]
    merged = [{"role": "user", "content": [{"type": "text", "text": "Weather"},
                                           {"type": "text", "text": "in Taipei?"}]}]
    assert_equal(compared(chat(messages), anthropic(merged), MESSAGES))


def test_a_user_turn_whose_text_changed_is_a_message_change() -> None:
    comparison = compared(chat(), anthropic([{"role": "user", "content": "Weather in Tainan?"}]),
                          MESSAGES)
    assert_only(comparison, Code.MESSAGE_CHANGED)
    assert comparison.findings[0].turn == 0


def test_an_image_carried_as_base64_is_equal_and_dropped_is_a_message_change() -> None:
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}]}]
    carried = [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": PNG_B64}}]}]
    assert_equal(compared(chat(messages), anthropic(carried), MESSAGES))
    comparison = compared(chat(messages),
                          anthropic([{"role": "user", "content": "What is this?"}]), MESSAGES)
    assert_only(comparison, Code.MESSAGE_CHANGED)
    assert "image dropped" in comparison.findings[0].detail


def test_an_image_url_fetched_and_inlined_upstream_is_equal() -> None:
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]
    fetched = [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": PNG_B64}}]}]
    assert_equal(compared(chat(messages), anthropic(fetched), MESSAGES))
    as_document = [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": PNG_B64}}]}]
    comparison = compared(chat(messages), anthropic(as_document), MESSAGES)
    assert_only(comparison, Code.MESSAGE_CHANGED)


def test_a_turn_dropped_in_the_middle_is_found_once() -> None:
    """The turns are aligned, so those after the dropped ones are not all changed; the first
    and last turns changed too, so that no common start or end holds the alignment."""
    turns = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}"}
             for n in range(9)]
    changed = [{"role": "user", "content": "turn 0, again"}, *turns[1:3], *turns[5:8],
               {"role": "user", "content": "turn 8, again"}]
    comparison = compared(chat(turns), chat(changed))
    assert [(f.code, f.turn, f.detail) for f in comparison.findings] == [
        (Code.MESSAGE_CHANGED, 0, "text: 6 chars -> 13 chars"),
        (Code.MESSAGE_CHANGED, 3, "assistant turn dropped"),
        (Code.MESSAGE_CHANGED, 4, "user turn dropped"),
        (Code.MESSAGE_CHANGED, 8, "text: 6 chars -> 13 chars")]


# --- history: tool calls and results ------------------------------------------------------------

CALLS_AND_RESULTS = [
    {"role": "user", "content": "Weather and time in Taipei?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_w", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Taipei", "unit": "c"}'}},
        {"id": "call_c", "type": "function",
         "function": {"name": "clock", "arguments": '{"zone": "Asia/Taipei"}'}}]},
    {"role": "tool", "tool_call_id": "call_w", "content": "31 C"},
    {"role": "tool", "tool_call_id": "call_c", "content": "14:05"},
]


def converse(results: list[dict[str, Any]], calls: list[dict[str, Any]] | None = None,
             ) -> dict[str, Any]:
    """The Converse body for CALLS_AND_RESULTS with these `toolResult`s."""
    uses = calls or [
        {"toolUse": {"toolUseId": "call_w", "name": "weather",
                     "input": {"unit": "c", "city": "Taipei"}}},
        {"toolUse": {"toolUseId": "call_c", "name": "clock", "input": {"zone": "Asia/Taipei"}}}]
    return {
        "messages": [
            {"role": "user", "content": [{"text": "Weather and time in Taipei?"}]},
            {"role": "assistant", "content": uses},
            {"role": "user", "content": results},
        ],
        "toolConfig": {"tools": [
            {"toolSpec": {"name": "weather", "inputSchema": {"json": WEATHER}}},
            {"toolSpec": {"name": "clock", "inputSchema": {"json": CLOCK}}}]},
    }


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": call_id, "content": [{"text": text}]}}


def test_calls_and_results_carried_to_converse_are_equal() -> None:
    assert_equal(compared(chat(CALLS_AND_RESULTS),
                          converse([result("call_w", "31 C"), result("call_c", "14:05")]),
                          CONVERSE))


def test_two_results_naming_one_call_after_merging_are_a_result_change() -> None:
    """LiteLLM #20047's shape: the merged user turn holds two `toolResult`s of one
    `toolUseId`, so one call has two answers and the other none."""
    comparison = compared(chat(CALLS_AND_RESULTS),
                          converse([result("call_w", "31 C"), result("call_w", "14:05")]),
                          CONVERSE)
    assert Code.HISTORY_TOOL_RESULT_CHANGED in codes(comparison)
    assert set(codes(comparison)) == {Code.HISTORY_TOOL_RESULT_CHANGED}
    assert comparison.verdict == "diverged"


def test_a_clients_duplicate_results_carried_as_sent_are_equal_and_deduplicated_are_not() -> None:
    """The client itself sent two tool messages of one id (#20047's reproduction): carried as
    sent they are equal; a gateway that keeps the first of them dropped a result."""
    duplicated = [*CALLS_AND_RESULTS[:3], CALLS_AND_RESULTS[2], CALLS_AND_RESULTS[3]]
    both = [result("call_w", "31 C"), result("call_w", "31 C"), result("call_c", "14:05")]
    assert_equal(compared(chat(duplicated), converse(both), CONVERSE))
    comparison = compared(chat(duplicated), converse([both[0], both[2]]), CONVERSE)
    assert_only(comparison, Code.HISTORY_TOOL_RESULT_CHANGED)


def test_remapped_call_ids_are_equal() -> None:
    remapped = json.loads(json.dumps(CALLS_AND_RESULTS).replace("call_w", "toolu_01")
                          .replace("call_c", "toolu_02"))
    assert_equal(compared(chat(CALLS_AND_RESULTS), chat(remapped)))


def test_a_calls_arguments_changed_in_history_is_a_call_change() -> None:
    changed = [{"toolUse": {"toolUseId": "call_w", "name": "weather",
                            "input": {"city": "Taipei", "unit": "f"}}},
               {"toolUse": {"toolUseId": "call_c", "name": "clock",
                            "input": {"zone": "Asia/Taipei"}}}]
    comparison = compared(chat(CALLS_AND_RESULTS),
                          converse([result("call_w", "31 C"), result("call_c", "14:05")],
                                   changed), CONVERSE)
    assert comparison.findings[0].code == Code.HISTORY_TOOL_CALL_CHANGED
    assert comparison.findings[0].turn == 1
    # its result answers a call the client never made: the result's link changed with it
    assert set(codes(comparison)) == {Code.HISTORY_TOOL_CALL_CHANGED,
                                      Code.HISTORY_TOOL_RESULT_CHANGED}


def test_a_results_text_changed_is_a_result_change() -> None:
    comparison = compared(chat(CALLS_AND_RESULTS),
                          converse([result("call_w", "31 F"), result("call_c", "14:05")]),
                          CONVERSE)
    assert_only(comparison, Code.HISTORY_TOOL_RESULT_CHANGED)


def test_a_result_dropped_with_its_turn_is_a_result_change() -> None:
    """The tool message is the only thing between two assistant turns: dropped, the turn it
    stood in goes, and the assistant turns around it merge."""
    messages = copy.deepcopy([*CALLS_AND_RESULTS[:3],
                              {"role": "assistant", "content": "31 C in Taipei."}])
    del messages[1]["tool_calls"][1]
    kept = chat([*messages[:2], messages[3]])
    comparison = compared(chat(messages), kept)
    assert Code.HISTORY_TOOL_RESULT_CHANGED in codes(comparison)


IMAGE_RESULT = [
    *CALLS_AND_RESULTS[:3],
    {"role": "tool", "tool_call_id": "call_c", "content": [
        {"type": "text", "text": "14:05"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}]},
]
IMAGE_BESIDE = {"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}]}


def test_a_results_image_moved_beside_it_where_results_hold_none_is_unsupported() -> None:
    moved = [*IMAGE_RESULT[:3], {"role": "tool", "tool_call_id": "call_c", "content": "14:05"},
             IMAGE_BESIDE]
    comparison = compared(chat(IMAGE_RESULT), chat(moved))
    assert_only(comparison, Code.REQUEST_PART_UNSUPPORTED)
    assert comparison.findings[0].detail == "result.media: moved beside the result"
    assert comparison.verdict == "equal"


def test_a_results_image_dropped_beside_the_same_image_is_a_result_change() -> None:
    """The client's turn already holds the image beside the result: nothing was moved there."""
    dropped = [*IMAGE_RESULT[:3], {"role": "tool", "tool_call_id": "call_c", "content": "14:05"},
               IMAGE_BESIDE]
    comparison = compared(chat([*IMAGE_RESULT, IMAGE_BESIDE]), chat(dropped))
    assert_only(comparison, Code.HISTORY_TOOL_RESULT_CHANGED)
    assert "image dropped" in comparison.findings[0].detail


def test_an_error_flag_dropped_where_the_provider_has_one_is_a_result_change() -> None:
    client = [*CALLS_AND_RESULTS[:2],
              {"role": "tool", "tool_call_id": "call_w", "content": "31 C"},
              {"role": "tool", "tool_call_id": "call_c", "content": "14:05"}]
    failed = {"toolResult": {"toolUseId": "call_c", "content": [{"text": "14:05"}],
                             "status": "error"}}
    comparison = compared(chat(client), converse([result("call_w", "31 C"), failed]), CONVERSE)
    assert_only(comparison, Code.HISTORY_TOOL_RESULT_CHANGED)
    assert "error flag" in comparison.findings[0].detail


# --- history: reasoning -------------------------------------------------------------------------

THINKING_HISTORY = [
    {"role": "user", "content": "Weather in Taipei?"},
    {"role": "assistant", "content": "It is 31 C.", "thinking_blocks": [
        {"type": "thinking", "thinking": "The user wants the weather.", "signature": "c2ln"}]},
    {"role": "user", "content": "Thanks."},
]


def anthropic_history(assistant: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "Weather in Taipei?"},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": "Thanks."}]


def test_signed_thinking_carried_as_a_thinking_block_is_equal() -> None:
    carried = anthropic_history([
        {"type": "thinking", "thinking": "The user wants the weather.", "signature": "c2ln"},
        {"type": "text", "text": "It is 31 C."}])
    assert_equal(compared(chat(THINKING_HISTORY), anthropic(carried), MESSAGES))


def test_thinking_turned_into_text_is_a_reasoning_change() -> None:
    as_text = anthropic_history([
        {"type": "text", "text": "The user wants the weather.\n\nIt is 31 C."}])
    comparison = compared(chat(THINKING_HISTORY), anthropic(as_text), MESSAGES)
    assert_only(comparison, Code.HISTORY_REASONING_CHANGED)
    assert comparison.findings[0].detail == "reasoning became visible text"
    assert comparison.findings[0].turn == 1


def test_thinking_dropped_where_the_provider_carries_it_is_a_reasoning_change() -> None:
    dropped = anthropic_history([{"type": "text", "text": "It is 31 C."}])
    comparison = compared(chat(THINKING_HISTORY), anthropic(dropped), MESSAGES)
    assert_only(comparison, Code.HISTORY_REASONING_CHANGED)
    signature_lost = anthropic_history([
        {"type": "thinking", "thinking": "The user wants the weather."},
        {"type": "text", "text": "It is 31 C."}])
    comparison = compared(chat(THINKING_HISTORY), anthropic(signature_lost), MESSAGES)
    assert_only(comparison, Code.HISTORY_REASONING_CHANGED)
    assert "signature" in comparison.findings[0].detail


def test_thinking_dropped_where_the_provider_has_no_field_for_it_is_unsupported() -> None:
    dropped = [THINKING_HISTORY[0], {"role": "assistant", "content": "It is 31 C."},
               THINKING_HISTORY[2]]
    comparison = compared(chat(THINKING_HISTORY), chat(dropped))
    assert_only(comparison, Code.REQUEST_PART_UNSUPPORTED)
    assert comparison.verdict == "equal"


# --- structured output --------------------------------------------------------------------------

ANSWER = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER}}


def test_a_structured_output_schema_sent_as_a_forced_tool_is_equal() -> None:
    stand_in = anthropic(
        tools=[{"name": "weather", "input_schema": WEATHER},
               {"name": "clock", "input_schema": CLOCK},
               {"name": "json_tool_call", "input_schema": ANSWER}],
        tool_choice={"type": "tool", "name": "json_tool_call"})
    assert_equal(compared(chat(response_format=JSON_SCHEMA), stand_in, MESSAGES))


def test_a_structured_output_schema_as_anthropic_output_format_is_equal() -> None:
    carried = anthropic(output_config={"format": {"type": "json_schema", "schema": ANSWER}})
    assert_equal(compared(chat(response_format=JSON_SCHEMA), carried, MESSAGES))


def test_a_structured_output_schema_dropped_is_a_format_change() -> None:
    comparison = compared(chat(response_format=JSON_SCHEMA), chat())
    assert_only(comparison, Code.RESPONSE_FORMAT_CHANGED)
    other = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {
        **ANSWER, "required": []}}}
    comparison = compared(chat(response_format=JSON_SCHEMA), chat(response_format=other))
    assert_only(comparison, Code.RESPONSE_FORMAT_CHANGED)


def test_a_forced_tool_whose_schema_is_not_the_formats_is_added_and_the_format_lost() -> None:
    wrong = anthropic(
        tools=[{"name": "weather", "input_schema": WEATHER},
               {"name": "clock", "input_schema": CLOCK},
               {"name": "json_tool_call", "input_schema": {"type": "object"}}],
        tool_choice={"type": "tool", "name": "json_tool_call"})
    found = set(codes(compared(chat(response_format=JSON_SCHEMA), wrong, MESSAGES)))
    assert {Code.REQUEST_TOOL_ADDED, Code.RESPONSE_FORMAT_CHANGED} <= found


# --- sampling and limits ------------------------------------------------------------------------


def test_a_temperature_of_zero_dropped_is_a_sampling_change() -> None:
    comparison = compared(chat(temperature=0), anthropic(), MESSAGES)
    assert_only(comparison, Code.SAMPLING_CHANGED)
    assert comparison.findings[0].detail == "sampling.temperature: 0 -> absent"
    assert comparison.verdict == "diverged"


def test_a_temperature_of_zero_carried_is_equal_whatever_its_spelling() -> None:
    assert_equal(compared(chat(temperature=0), anthropic(temperature=0.0), MESSAGES))
    assert_equal(compared(chat(temperature=0, top_p=1), converse_sampling(0, 1), CONVERSE))


def converse_sampling(temperature: Any, top_p: Any) -> dict[str, Any]:
    body = converse([])
    body["messages"] = [{"role": "user", "content": [{"text": "Weather in Taipei?"}]}]
    body["inferenceConfig"] = {"temperature": temperature, "topP": top_p}
    return body


def test_a_seed_changed_is_a_sampling_change() -> None:
    comparison = compared(chat(seed=0), chat(seed=7))
    assert_only(comparison, Code.SAMPLING_CHANGED)
    assert comparison.findings[0].detail == "sampling.seed: 0 -> 7"


def test_anthropic_max_tokens_added_where_the_client_sent_none_is_nothing() -> None:
    assert_equal(compared(chat(), anthropic(max_tokens=4096), MESSAGES))


def test_max_tokens_changed_is_a_sampling_change() -> None:
    comparison = compared(chat(max_completion_tokens=100), anthropic(max_tokens=4096), MESSAGES)
    assert_only(comparison, Code.SAMPLING_CHANGED)
    assert comparison.findings[0].detail == "max_output_tokens: 100 -> 4096"


def test_a_sampling_key_the_provider_has_no_field_for_is_unsupported() -> None:
    comparison = compared(chat(seed=7), anthropic(), MESSAGES)
    assert_only(comparison, Code.REQUEST_PART_UNSUPPORTED)
    assert comparison.findings[0].detail == "sampling.seed: dropped"
    assert comparison.verdict == "equal"


def test_stop_sequences_compare_as_a_set() -> None:
    assert_equal(compared(chat(stop=["END", "STOP"]),
                          anthropic(stop_sequences=["STOP", "END"]), MESSAGES))
    comparison = compared(chat(stop="END"), anthropic(stop_sequences=["STOP"]), MESSAGES)
    assert_only(comparison, Code.SAMPLING_CHANGED)


def test_thinking_turned_off_upstream_is_a_sampling_change() -> None:
    comparison = compared(chat(reasoning_effort="high"),
                          anthropic(thinking={"type": "disabled"}), MESSAGES)
    assert_only(comparison, Code.SAMPLING_CHANGED)
    assert comparison.findings[0].detail.startswith("reasoning: thinking True -> False")
    assert_equal(compared(chat(reasoning_effort="high"),
                          anthropic(output_config={"effort": "high"}), MESSAGES))


# --- unreadable ---------------------------------------------------------------------------------


def test_a_body_that_is_not_json_is_unreadable_and_the_comparison_inconclusive() -> None:
    comparison = compare_requests(read_ask(orjson.dumps(chat()), CHAT),
                                  read_ask(b"{not json", MESSAGES))
    assert comparison.verdict == "inconclusive"
    assert codes(comparison) == [Code.REQUEST_UNREADABLE]


def test_a_body_of_another_dialects_shape_is_unreadable() -> None:
    comparison = compared(chat(), {"messages": [{"role": "tool", "content": "x"}]}, MESSAGES)
    assert comparison.verdict == "inconclusive"
    assert codes(comparison) == [Code.REQUEST_UNREADABLE]


# --- tool results linked by place (Ollama) ------------------------------------------------------

def ollama_history(results: list[str]) -> list[dict[str, Any]]:
    """CALLS_AND_RESULTS as LiteLLM's `ollama_chat/` route sends it: the calls without ids, each
    result with the client's `tool_call_id` (which names no call upstream) and no `tool_name`."""
    calls = CALLS_AND_RESULTS[1]["tool_calls"]
    return [
        CALLS_AND_RESULTS[0],
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": call["function"]["name"],
                          "arguments": json.loads(call["function"]["arguments"])}}
            for call in calls]},
        *({"role": "tool", "tool_call_id": call["id"], "content": text}
          for call, text in zip(calls, results, strict=True)),
    ]


def test_results_answer_calls_without_ids_by_their_place() -> None:
    ollama = {"model": "llama3", "messages": ollama_history(["31 C", "14:05"]),
              "tools": chat()["tools"]}
    comparison = compared(chat(CALLS_AND_RESULTS), ollama, OLLAMA)
    assert Code.HISTORY_TOOL_RESULT_CHANGED not in codes(comparison), comparison.findings
    assert comparison.verdict == "equal", comparison.findings


def test_results_swapped_against_calls_without_ids_are_relinked() -> None:
    ollama = {"model": "llama3", "messages": ollama_history(["14:05", "31 C"]),
              "tools": chat()["tools"]}
    assert Code.HISTORY_TOOL_RESULT_CHANGED in codes(compared(chat(CALLS_AND_RESULTS), ollama,
                                                              OLLAMA))


def test_a_result_naming_no_call_where_calls_have_ids_links_nothing() -> None:
    """Where calls carry ids, a result whose id names none of them is not linked by place: the
    provider cannot link it either."""
    renamed = copy.deepcopy(CALLS_AND_RESULTS)
    renamed[3]["tool_call_id"] = "call_elsewhere"
    assert Code.HISTORY_TOOL_RESULT_CHANGED in codes(compared(chat(CALLS_AND_RESULTS),
                                                              chat(renamed)))


# --- a request passed through ---------------------------------------------------------------------


def test_a_request_passed_through_is_read_once_and_equal() -> None:
    body = orjson.dumps(chat(temperature=0))
    compared, _ = compare_pair_requests(PairRequests(RecordedRequest(body, CHAT),
                                                     RecordedRequest(body, CHAT)))
    assert compared.provider is compared.client
    assert (compared.verdict, compared.findings) == ("equal", [])


def test_the_same_bytes_sent_to_another_dialect_are_read_as_that_dialect() -> None:
    body = orjson.dumps(chat())
    compared, _ = compare_pair_requests(PairRequests(RecordedRequest(body, CHAT),
                                                     RecordedRequest(body, GEMINI)))
    assert compared.provider is not compared.client
    assert (compared.provider.dialect, compared.verdict) == ("google.gemini", "inconclusive")


def test_a_gemini_result_named_after_no_call_links_nothing() -> None:
    """Gemini links a `functionResponse` to its call by name: one named otherwise (Portkey up to
    1.15.2 names each `gateway-tool-filler-name`) answers no call, though Gemini's calls carry
    no ids."""
    gemini = {"contents": [
        {"role": "user", "parts": [{"text": CALLS_AND_RESULTS[0]["content"]}]},
        {"role": "model", "parts": [
            {"functionCall": {"name": "weather", "args": {"city": "Taipei", "unit": "c"}}},
            {"functionCall": {"name": "clock", "args": {"zone": "Asia/Taipei"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": name, "response": {"content": text}}}
            for name, text in (("gateway-tool-filler-name", "31 C"),
                               ("gateway-tool-filler-name", "14:05"))]},
    ], "tools": [{"functionDeclarations": [
        {"name": "weather", "parameters": WEATHER}, {"name": "clock", "parameters": CLOCK}]}]}
    assert Code.HISTORY_TOOL_RESULT_CHANGED in codes(compared(chat(CALLS_AND_RESULTS), gemini,
                                                              GEMINI))
