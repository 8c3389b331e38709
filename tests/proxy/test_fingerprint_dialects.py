"""Pairing by content across the dialects a gateway translates Chat Completions into when it
forwards no header: Ollama `/api/chat`, Bedrock Converse, Anthropic on Bedrock InvokeModel.

Each translation is the request LiteLLM builds (its `ollama_chat` and `bedrock/converse`
transformations): the chat request and its translation must have one fingerprint.
"""

import orjson

from calltap.proxy.fingerprint import request_fingerprint

CHAT = "/v1/chat/completions"
OLLAMA = "/api/chat"
CONVERSE = "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/converse-stream"
INVOKE = "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/invoke"
QUESTION = "What is the weather in Paris and the time in Tokyo?"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "parameters": WEATHER}},
]
CONVERSE_TOOLS = {"tools": [
    {"toolSpec": {"name": "get_time", "inputSchema": {"json": WEATHER}}},
    {"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER}}},
]}
CALLS = [
    {"id": "call_a", "type": "function",
     "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
    {"id": "call_b", "type": "function",
     "function": {"name": "get_time", "arguments": '{"city":"Tokyo"}'}},
]
CHAT_QUESTION = {"model": "gpt-4o", "stream": True, "tools": CHAT_TOOLS, "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": QUESTION},
]}
CHAT_RESULTS = {"model": "gpt-4o", "tools": CHAT_TOOLS, "messages": [
    {"role": "user", "content": QUESTION},
    {"role": "assistant", "content": None, "tool_calls": CALLS},
    {"role": "tool", "tool_call_id": "call_a", "content": "18 C, cloudy"},
    {"role": "tool", "tool_call_id": "call_b", "content": "23:05"},
]}


def fp(request: dict, path: str) -> str | None:
    return request_fingerprint(orjson.dumps(request), path)


def test_an_ollama_translation_of_a_question_has_the_chat_fingerprint():
    ollama = {"model": "llama3.2", "stream": True, "tools": CHAT_TOOLS, "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": QUESTION},
    ], "options": {"num_predict": 256}}
    assert fp(ollama, OLLAMA) == fp(CHAT_QUESTION, CHAT) is not None


def test_an_ollama_translation_of_tool_results_has_the_chat_fingerprint():
    ollama = {"model": "llama3.2", "tools": CHAT_TOOLS, "messages": [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"function": {"name": "get_time", "arguments": {"city": "Tokyo"}}},
        ]},
        {"role": "tool", "content": "18 C, cloudy", "tool_name": "get_weather"},
        {"role": "tool", "content": "23:05", "tool_name": "get_time"},
    ]}
    assert fp(ollama, OLLAMA) == fp(CHAT_RESULTS, CHAT) is not None


def test_a_converse_translation_of_a_question_has_the_chat_fingerprint():
    converse = {
        "system": [{"text": "You are terse."}],
        "messages": [{"role": "user", "content": [{"text": QUESTION}]}],
        "inferenceConfig": {"maxTokens": 4096},
        "toolConfig": CONVERSE_TOOLS,
    }
    assert fp(converse, CONVERSE) == fp(CHAT_QUESTION, CHAT) is not None


def test_a_converse_translation_of_tool_results_has_the_chat_fingerprint():
    converse = {"toolConfig": CONVERSE_TOOLS, "messages": [
        {"role": "user", "content": [{"text": QUESTION}]},
        {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "call_a", "name": "get_weather", "input": {"city": "Paris"}}},
            {"toolUse": {"toolUseId": "call_b", "name": "get_time", "input": {"city": "Tokyo"}}},
        ]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "call_a", "content": [{"text": "18 C, cloudy"}]}},
            {"toolResult": {"toolUseId": "call_b", "content": [{"text": "23:05"}]}},
        ]},
    ]}
    reference = fp(CHAT_RESULTS, CHAT)
    assert fp(converse, CONVERSE) == reference is not None
    other = orjson.loads(orjson.dumps(converse))
    other["messages"][-1]["content"][1]["toolResult"]["content"][0]["text"] = "23:06"
    assert fp(other, CONVERSE) != reference


def test_converse_tools_count_and_its_blocks_need_the_converse_path():
    converse = {"messages": [{"role": "user", "content": [{"text": QUESTION}]}],
                "toolConfig": CONVERSE_TOOLS}
    without_tools = {"messages": converse["messages"]}
    assert fp(converse, CONVERSE) != fp(without_tools, CONVERSE)
    assert fp(converse, CHAT) != fp(converse, CONVERSE), "untyped blocks say nothing to Chat"


def test_an_anthropic_body_on_invoke_has_the_chat_fingerprint():
    invoke = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 4096,
              "system": "You are terse.",
              "tools": [{"name": "get_weather", "input_schema": WEATHER},
                        {"name": "get_time", "input_schema": WEATHER}],
              "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}]}
    assert fp(invoke, INVOKE) == fp(CHAT_QUESTION, CHAT) is not None


def test_a_converse_body_without_messages_gives_none():
    assert fp({"toolConfig": CONVERSE_TOOLS}, CONVERSE) is None
    assert fp({"messages": "hello"}, CONVERSE) is None


def test_a_converse_request_keeps_its_fingerprint_past_entries_it_cannot_read():
    """A cache point among the tools, a block that is not an object, a tool result whose content
    is not a list: each is skipped, and what follows it still counts."""
    converse = {"toolConfig": CONVERSE_TOOLS, "messages": [
        {"role": "user", "content": [{"text": QUESTION}]}]}
    noisy = orjson.loads(orjson.dumps(converse))
    noisy["toolConfig"]["tools"].insert(1, {"cachePoint": {"type": "default"}})
    noisy["messages"][0]["content"].insert(0, "junk")
    assert fp(noisy, CONVERSE) == fp(converse, CONVERSE) is not None
    results = [{"toolResult": {"content": None}}, {"text": QUESTION}]
    odd_result = {"messages": [{"role": "user", "content": results}]}
    empty_result = {"messages": [{"role": "user", "content": [
        {"toolResult": {"content": []}}, {"text": QUESTION}]}]}
    assert fp(odd_result, CONVERSE) == fp(empty_result, CONVERSE) is not None


def test_a_converse_message_whose_content_is_not_a_list_is_read_as_written():
    text = {"messages": [{"role": "user", "content": QUESTION}]}
    assert fp(text, CONVERSE) == fp({"messages": text["messages"]}, CHAT) is not None
