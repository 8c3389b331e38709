import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.proxy.fingerprint import request_fingerprint

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
HEX = "0123456789abcdef"

QUESTION = "What is the weather in Paris and the time in Tokyo?"
HISTORY_CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi. What do you need?"},
]
HISTORY_ANTHROPIC = [
    {"role": "user", "content": [{"type": "text", "text": "Hello"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Hi. What do you need?"}]},
]
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "parameters": WEATHER}},
]
ANTHROPIC_TOOLS = [
    {"name": "get_time", "input_schema": WEATHER},
    {"name": "get_weather", "input_schema": WEATHER},
]
RESPONSES_TOOLS = [
    {"type": "function", "name": "get_weather", "parameters": WEATHER},
    {"type": "function", "name": "get_time", "parameters": WEATHER},
]


def fp(request: dict, path: str) -> str | None:
    return request_fingerprint(orjson.dumps(request), path)


SAME_REQUEST = [
    pytest.param(
        {"model": "gpt-4o", "stream": True, "tools": CHAT_TOOLS,
         "messages": [*HISTORY_CHAT, {"role": "user", "content": QUESTION}]},
        CHAT, id="chat-string",
    ),
    pytest.param(
        {"model": "gpt-4o", "tools": CHAT_TOOLS,
         "messages": [*HISTORY_CHAT,
                      {"role": "user", "content": [{"type": "text", "text": QUESTION}]}]},
        CHAT, id="chat-parts",
    ),
    pytest.param(
        {"model": "claude-sonnet-4", "max_tokens": 4096, "system": "You are terse.",
         "tools": ANTHROPIC_TOOLS,
         "messages": [*HISTORY_ANTHROPIC, {"role": "user", "content": QUESTION}]},
        MESSAGES, id="anthropic-string",
    ),
    pytest.param(
        {"model": "claude-sonnet-4", "max_tokens": 4096,
         "system": [{"type": "text", "text": "You are terse."}], "tools": ANTHROPIC_TOOLS,
         "messages": [*HISTORY_ANTHROPIC,
                      {"role": "user", "content": [
                          {"type": "text", "text": QUESTION,
                           "cache_control": {"type": "ephemeral"}}]}]},
        MESSAGES, id="anthropic-blocks",
    ),
    pytest.param(
        {"model": "gpt-4.1", "instructions": "You are terse.", "tools": RESPONSES_TOOLS,
         "input": QUESTION},
        RESPONSES, id="responses-string",
    ),
    pytest.param(
        {"model": "gpt-4.1", "tools": RESPONSES_TOOLS,
         "input": [
             {"type": "message", "role": "developer", "content": "You are terse."},
             {"role": "user", "content": "Hello"},
             {"type": "message", "role": "assistant",
              "content": [{"type": "output_text", "text": "Hi. What do you need?"}]},
             {"type": "message", "role": "user",
              "content": [{"type": "input_text", "text": QUESTION}]}]},
        RESPONSES, id="responses-items",
    ),
    pytest.param(
        {"model": "gpt-4.1", "tools": RESPONSES_TOOLS,
         "input": [{"role": "user", "content": QUESTION}]},
        "/openai/v1/responses?api-version=preview", id="responses-easy-message",
    ),
]


@pytest.mark.parametrize(("request_body", "path"), SAME_REQUEST)
def test_same_request_in_every_dialect_has_one_fingerprint(request_body, path):
    reference = fp(SAME_REQUEST[0].values[0], CHAT)
    assert reference is not None
    assert len(reference) == 64
    assert fp(request_body, path) == reference


def test_tool_results_turn_is_the_same_in_every_dialect():
    call_a = {"id": "call_a", "type": "function",
              "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    call_b = {"id": "call_b", "type": "function",
              "function": {"name": "get_time", "arguments": '{"city":"Tokyo"}'}}
    chat = {"tools": CHAT_TOOLS, "messages": [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [call_a, call_b]},
        {"role": "tool", "tool_call_id": "call_a", "content": "18 C, cloudy"},
        {"role": "tool", "tool_call_id": "call_b", "content": "23:05"},
    ]}
    anthropic = {"tools": ANTHROPIC_TOOLS, "max_tokens": 1024, "messages": [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_a", "name": "get_weather",
             "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_b", "name": "get_time",
             "input": {"city": "Tokyo"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a",
             "content": [{"type": "text", "text": "18 C, cloudy"}]},
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "23:05"},
        ]},
    ]}
    responses = {"tools": RESPONSES_TOOLS, "input": [
        {"role": "user", "content": QUESTION},
        {"type": "function_call", "call_id": "call_a", "name": "get_weather",
         "arguments": '{"city":"Paris"}'},
        {"type": "function_call", "call_id": "call_b", "name": "get_time",
         "arguments": '{"city":"Tokyo"}'},
        {"type": "function_call_output", "call_id": "call_a", "output": "18 C, cloudy"},
        {"type": "function_call_output", "call_id": "call_b", "output": "23:05"},
    ]}
    reference = fp(chat, CHAT)
    assert fp(anthropic, MESSAGES) == reference
    assert fp(responses, RESPONSES) == reference
    answered_differently = {**chat, "messages": [*chat["messages"][:-1],
                                                 {"role": "tool", "content": "23:06"}]}
    assert fp(answered_differently, CHAT) != reference


def test_consecutive_user_messages_merged_by_a_gateway_keep_the_fingerprint():
    split = {"messages": [{"role": "user", "content": "Part one. "},
                          {"role": "user", "content": "Part two."}]}
    merged = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Part one. "}, {"type": "text", "text": "Part two."}]}]}
    assert fp(split, CHAT) == fp(merged, MESSAGES)


def test_whitespace_is_normalized_at_the_ends_only():
    def ask(text: str) -> str | None:
        return fp({"messages": [{"role": "user", "content": text}]}, CHAT)

    assert ask("  Hi there\n\n") == ask("Hi there")
    assert ask("Hi  there") != ask("Hi there")
    assert ask("Hi\nthere") != ask("Hi there")


def test_model_settings_and_history_do_not_matter():
    base = {"model": "a", "messages": [{"role": "user", "content": QUESTION}]}
    other = {"model": "b", "temperature": 0.2, "max_tokens": 10, "stream": True,
             "messages": [{"role": "user", "content": "earlier"},
                          {"role": "assistant", "content": "reply"},
                          {"role": "user", "content": QUESTION}]}
    assert fp(base, CHAT) == fp(other, CHAT)


def test_a_different_last_message_changes_the_fingerprint():
    one = {"messages": [{"role": "user", "content": "Summarize page 1"}]}
    two = {"messages": [{"role": "user", "content": "Summarize page 2"}]}
    assert fp(one, CHAT) != fp(two, CHAT)


def test_a_different_tool_set_changes_the_fingerprint():
    messages = [{"role": "user", "content": QUESTION}]
    with_both = fp({"messages": messages, "tools": CHAT_TOOLS}, CHAT)
    with_one = fp({"messages": messages, "tools": CHAT_TOOLS[:1]}, CHAT)
    without = fp({"messages": messages}, CHAT)
    assert len({with_both, with_one, without}) == 3


def test_legacy_functions_count_as_tools():
    messages = [{"role": "user", "content": QUESTION}]
    legacy = {"messages": messages, "functions": [{"name": "get_weather"}, {"name": "get_time"}]}
    assert fp(legacy, CHAT) == fp({"messages": messages, "tools": CHAT_TOOLS}, CHAT)


def test_key_order_and_json_whitespace_do_not_matter():
    request = {"model": "gpt-4o", "tools": CHAT_TOOLS,
               "messages": [{"role": "user", "content": QUESTION}]}
    compact = orjson.dumps(request)
    reordered = json.dumps(
        {"messages": [{"content": QUESTION, "role": "user"}], "tools": CHAT_TOOLS[::-1],
         "model": "gpt-4o"},
        indent=3,
    ).encode()
    assert request_fingerprint(compact, CHAT) == request_fingerprint(reordered, CHAT)


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (b"", CHAT),
        (b"not json", CHAT),
        (b"\xff\xfe{}", CHAT),
        (b"[1, 2]", CHAT),
        (b'"messages"', CHAT),
        (b"{}", CHAT),
        (b'{"model": "gpt-4o"}', CHAT),
        (b'{"messages": "hello"}', CHAT),
        (b'{"messages": []}', CHAT),
        (b'{"messages": [{"role": "user", "content": "hi"}', CHAT),
        (b'{"input": "hi"}', "/v1/embeddings"),
        (b'{"input": "hi"}', CHAT),
        (b'{"input": 42}', RESPONSES),
        (b'{"input": []}', RESPONSES),
    ],
)
def test_unreadable_or_non_chat_bodies_give_none(body, path):
    assert request_fingerprint(body, path) is None


WORDS = st.sampled_from(
    ["text", "input_text", "tool_result", "message", "function_call_output", "function_call",
     "reasoning", "user", "assistant", "tool", "system"]
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    | WORDS,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(
        st.sampled_from(["role", "content", "type", "text", "output", "name", "function", "x"]),
        children,
        max_size=4,
    ),
    max_leaves=20,
)
ROLES = st.sampled_from(["user", "assistant", "tool", "system", "function", "developer", 7])


@examples(300)
@given(
    st.dictionaries(
        st.sampled_from(["messages", "input", "tools", "functions", "system"]),
        JSON_VALUES | st.lists(st.fixed_dictionaries({"role": ROLES, "content": JSON_VALUES})),
        max_size=4,
    ),
    st.sampled_from([CHAT, MESSAGES, RESPONSES, "/v1/embeddings"]),
)
def test_any_json_body_gives_a_hex_digest_or_none(request_body, path):
    result = request_fingerprint(json.dumps(request_body).encode(), path)
    assert result is None or (len(result) == 64 and set(result) <= set(HEX))


@examples(200)
@given(st.binary(max_size=200))
def test_any_bytes_give_a_hex_digest_or_none(body):
    result = request_fingerprint(body, CHAT)
    assert result is None or (len(result) == 64 and set(result) <= set(HEX))
