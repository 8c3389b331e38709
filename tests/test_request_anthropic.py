"""The Anthropic Messages request side: `/v1/messages` bodies, and the same body on Bedrock's
InvokeModel, read to an `Ask`.

The official `anthropic` SDK is the oracle for the wire shapes: its first-party client and its
Bedrock client (`AnthropicBedrock`) build the bodies and paths here over a transport that answers
locally, so the Bedrock form (model and streaming in the path, `anthropic_version` in the body)
is the one a real client sends.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import httpx2
import orjson
import pytest
from anthropic import Anthropic, AnthropicBedrock
from hypothesis import given
from hypothesis import strategies as st
from tests.support.properties import examples

from calltap.ask import (
    PARTS,
    Ask,
    HistoryCall,
    Part,
    Reasoning,
    ReasoningSettings,
    ToolChoice,
)
from calltap.codes import Code
from calltap.compare_requests import compare_requests
from calltap.dialects import anthropic, bedrock_anthropic, openai_chat_request
from calltap.dialects.anthropic_request import ask, bedrock_model
from calltap.dialects.asks import read_ask
from calltap.dialects.request_common import arguments_key, inline_media
from calltap.fakes.provider import TOOLS_REQUEST
from calltap.fakes.translate_invoke import invoke_path, to_invoke
from calltap.fakes.translate_request import to_messages
from calltap.schemas import normalize, schema_key

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PDF = b"%PDF-1.7\n" + bytes(range(60))
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"const": "celsius"}},
    "required": ["city"],
}
MESSAGES = [
    {"role": "user", "content": [
        {"type": "text", "text": "What is in this picture, and the weather?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": base64.b64encode(PNG).decode()}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": base64.b64encode(PDF).decode()}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                        "data": "plain notes"}},
    ]},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Two tools are needed.", "signature": "c2ln"},
        {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Taipei"}},
        {"type": "tool_use", "id": "toolu_2", "name": "clock", "input": {}},
    ]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "31 C"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True, "content": [
            {"type": "text", "text": "clock broke"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(PNG).decode()}},
        ]},
        {"type": "text", "text": "And now?"},
    ]},
]
REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 2048,
    "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}],
    "messages": MESSAGES,
    "tools": [
        {"name": "weather", "description": "Weather in a city", "input_schema": WEATHER_SCHEMA,
         "strict": True},
        {"type": "custom", "name": "clock", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    "stop_sequences": ["END"],
    "temperature": 0,
    "top_p": 0.5,
    "top_k": 0,
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "output_config": {"effort": "high"},
    "stream": True,
}


def test_a_whole_messages_request_reads_to_its_meaning() -> None:
    result = ask(REQUEST, "/v1/messages")
    assert (result.dialect, result.model, result.readable) == (
        "anthropic.messages", "claude-sonnet-4-5", True)
    assert (result.stream, result.usage_requested) == (True, True)
    assert result.instructions == [Part("text", "Be brief."), Part("text", "Use tools.")]
    assert [tool.name for tool in result.tools] == ["weather", "clock", "web_search"]
    weather, clock, search = result.tools
    assert weather.description == "Weather in a city" and weather.strict is True
    assert weather.schema_key == schema_key(normalize(WEATHER_SCHEMA))
    assert weather.raw_schema == WEATHER_SCHEMA
    assert clock.strict is None and clock.schema == {"type": ["object"]}
    assert (search.schema, search.description) == (None, None)
    assert result.tool_choice == ToolChoice("required")
    assert result.parallel_tool_calls is False
    assert (result.max_output_tokens, result.stop) == (2048, ("END",))
    assert result.sampling == {"temperature": 0, "top_p": 0.5, "top_k": 0}
    assert result.reasoning == ReasoningSettings("high", True, 1024)
    assert result.response_format is None


def test_each_message_is_a_turn_of_its_role_with_its_blocks() -> None:
    user, assistant, results = ask(REQUEST).turns
    assert [turn.role for turn in (user, assistant, results)] == ["user", "assistant", "user"]
    assert user.parts == [
        Part("text", "What is in this picture, and the weather?"),
        Part("image", digest="sha256:" + hashlib.sha256(PNG).hexdigest()),
        Part("image", digest="url:https://example.com/cat.png"),
        Part("document", digest="sha256:" + hashlib.sha256(PDF).hexdigest()),
        Part("document", digest="sha256:" + hashlib.sha256(b"plain notes").hexdigest()),
    ]
    assert assistant.parts == [Part("text", "Checking.")]
    assert assistant.calls == [
        HistoryCall("weather", arguments_key({"city": "Taipei"}), "toolu_1"),
        HistoryCall("clock", arguments_key({}), "toolu_2"),
    ]
    assert assistant.reasoning == [Reasoning("Two tools are needed.", signed=True),
                                   Reasoning("", signed=True, redacted=True)]
    first, second = results.results
    assert (first.call_id, first.name, first.parts, first.is_error) == (
        "toolu_1", None, (Part("text", "31 C"),), None)
    assert (second.call_id, second.is_error) == ("toolu_2", True)
    assert second.parts == (Part("text", "clock broke"),
                            Part("image", digest="sha256:" + hashlib.sha256(PNG).hexdigest()))
    assert results.parts == [Part("text", "And now?")]


def test_a_base64_image_digests_as_the_same_bytes_sent_as_a_chat_data_url() -> None:
    data_url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    chat = openai_chat_request.content_parts(
        [{"type": "image_url", "image_url": {"url": data_url}}])
    assert ask(REQUEST).turns[0].parts[1] == chat[0] == inline_media("image", PNG)


@pytest.mark.parametrize(("system", "instructions"), [
    ("Be brief.", ["Be brief."]),
    ([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
     ["Be brief."]),
    ("", []),
    (None, []),
])
def test_system_as_a_string_or_text_blocks_is_the_instructions(system: Any,
                                                               instructions: list[str]) -> None:
    request = {"model": "m", "max_tokens": 1, "messages": [], "system": system}
    assert [part.text for part in ask(request).instructions] == instructions


@pytest.mark.parametrize(("choice", "expected", "parallel"), [
    ({"type": "auto"}, ToolChoice("auto"), None),
    ({"type": "auto", "disable_parallel_tool_use": True}, ToolChoice("auto"), False),
    ({"type": "any", "disable_parallel_tool_use": False}, ToolChoice("required"), True),
    ({"type": "tool", "name": "weather"}, ToolChoice("function", "weather"), None),
    ({"type": "tool", "name": "weather", "disable_parallel_tool_use": True},
     ToolChoice("function", "weather"), False),
    ({"type": "none"}, ToolChoice("none"), None),
    (None, None, None),
])
def test_tool_choice_on_the_asks_scale_with_its_parallel_limit(
        choice: Any, expected: ToolChoice | None, parallel: bool | None) -> None:
    request = {**REQUEST, "tool_choice": choice}
    result = ask(request)
    assert (result.tool_choice, result.parallel_tool_calls) == (expected, parallel)


@pytest.mark.parametrize(("thinking", "settings"), [
    ({"type": "enabled", "budget_tokens": 2048}, ReasoningSettings(None, True, 2048)),
    ({"type": "disabled"}, ReasoningSettings(None, False, None)),
    ({"type": "adaptive"}, ReasoningSettings(None, True, None)),
    (None, ReasoningSettings()),
])
def test_thinking_on_or_off_and_its_budget(thinking: Any, settings: ReasoningSettings) -> None:
    request = {"model": "m", "max_tokens": 4096, "messages": [], "thinking": thinking}
    assert ask(request).reasoning == settings


def test_thinking_removed_while_the_history_holds_thinking_blocks_reads_as_both() -> None:
    """LiteLLM #18926: `thinking` dropped from a request whose history still holds thinking
    blocks. The reader keeps both facts, so the comparison sees the setting gone."""
    request = {key: value for key, value in REQUEST.items() if key != "thinking"}
    result = ask(request)
    assert result.reasoning.thinking is None and result.reasoning.budget is None
    assert [r.signed for r in result.turns[1].reasoning] == [True, True]
    client = openai_chat_request.ask({
        "model": "m", "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "hi"}, {
            "role": "assistant", "content": "Checking.",
            "thinking_blocks": [{"type": "thinking", "thinking": "Two tools are needed.",
                                 "signature": "c2ln"}]}],
    })
    assert client.reasoning.thinking is True
    assert client.turns[1].reasoning[0] == result.turns[1].reasoning[0]


def test_thinking_blocks_without_a_signature_read_unsigned() -> None:
    request = {"model": "m", "max_tokens": 1, "messages": [{"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": ""}]}]}
    assert ask(request).turns[0].reasoning == [Reasoning("hmm", signed=False)]


SCHEMA = {"type": "object", "$defs": {"name": {"type": "string"}},
          "properties": {"name": {"$ref": "#/$defs/name"}}, "required": ["name"]}


@pytest.mark.parametrize("body", [
    {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}},
    {"output_format": {"type": "json_schema", "schema": SCHEMA}},
], ids=["output_config.format", "output_format (beta)"])
def test_structured_output_reads_as_a_json_schema_by_meaning(body: dict[str, Any]) -> None:
    result = ask({"model": "m", "max_tokens": 1, "messages": [], **body})
    assert result.response_format is not None
    assert result.response_format.kind == "json_schema"
    chat = openai_chat_request.response_format({"type": "json_schema", "json_schema": {
        "name": "person", "schema": {"type": "object", "properties": {"name": {"type": "string"}},
                                     "required": ["name"]}}})
    assert chat is not None and result.response_format.schema_key == chat.schema_key


def test_litellms_structured_output_stand_in_reads_as_a_tool_and_a_forced_choice() -> None:
    """LiteLLM sends a `response_format` schema to Claude as a tool it forces: read as what it
    is; the comparator recognizes the stand-in by the schema's meaning."""
    request = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
               "tools": [{"name": "json_tool_call", "input_schema": SCHEMA}],
               "tool_choice": {"type": "tool", "name": "json_tool_call"}}
    result = ask(request)
    assert result.tool_choice == ToolChoice("function", "json_tool_call")
    chat = openai_chat_request.response_format(
        {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}})
    assert chat is not None and result.tools[0].schema_key == chat.schema_key


def test_tool_result_content_as_a_string_or_text_blocks_reads_alike() -> None:
    def result(content: Any) -> Any:
        message = {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": content}]}
        return ask({"model": "m", "max_tokens": 1, "messages": [message]}).turns[0].results[0]

    assert result("ok") == result([{"type": "text", "text": "ok"}])
    assert result("").parts == result(None).parts == result([]).parts == ()


def test_duplicate_tool_result_ids_are_two_results_of_one_call() -> None:
    """A history is read as sent: results naming one id twice are two results (the shape Bedrock
    rejects in LiteLLM #20047, and whose deduplication drops one)."""
    twice = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "31 C"},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "31 C"}]}
    results = ask({"model": "m", "max_tokens": 1, "messages": [twice]}).turns[0].results
    assert [r.call_id for r in results] == ["toolu_1", "toolu_1"]


def test_blocks_of_tools_the_provider_runs_are_not_compared() -> None:
    message = {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
         "input": {"query": "weather"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "It is warm.", "citations": []},
    ]}
    turn = ask({"model": "m", "max_tokens": 1, "messages": [message]}).turns[0]
    assert (turn.calls, turn.results, turn.parts) == ([], [], [Part("text", "It is warm.")])


@given(st.text(), st.dictionaries(st.text(max_size=5), st.integers() | st.text(), max_size=4))
@examples(100)
def test_text_and_arguments_read_as_the_chat_reader_reads_them(said: str,
                                                               arguments: dict[str, Any]) -> None:
    request = {"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": said},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": arguments}]}]}
    chat = openai_chat_request.ask({"model": "m", "messages": [
        {"role": "user", "content": said},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t", "type": "function",
             "function": {"name": "f", "arguments": json.dumps(arguments)}}]}]})
    user, assistant = ask(request).turns
    assert user.parts == ask({**request, "messages": [
        {"role": "user", "content": [{"type": "text", "text": said}] if said else []}]}
    ).turns[0].parts == chat.turns[0].parts
    assert assistant.calls == chat.turns[1].calls


def _sent(client_class: type, **create: Any) -> tuple[str, dict[str, Any]]:
    """The path and body the official SDK sends for `messages.create(**create)`."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append((request.url.raw_path.decode(), json.loads(request.content)))
        return httpx2.Response(400, json={"type": "error", "error": {"type": "x", "message": ""}})

    options: dict[str, Any] = {"api_key": "key", "base_url": "http://127.0.0.1:9",
                               "max_retries": 0,
                               "http_client": httpx2.Client(transport=httpx2.MockTransport(answer))}
    if client_class is AnthropicBedrock:
        options["aws_region"] = "us-east-1"
    client = client_class(**options)
    with pytest.raises(Exception, match="400"):
        client.messages.create(**create)
    return seen[0]


ARN = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5"
CREATE: dict[str, Any] = {
    "model": ARN, "max_tokens": 2048, "system": REQUEST["system"], "messages": MESSAGES,
    "tools": REQUEST["tools"], "tool_choice": REQUEST["tool_choice"],
    "stop_sequences": ["END"], "thinking": REQUEST["thinking"],
    "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": SCHEMA}},
    "extra_body": {"temperature": 0, "top_p": 0.5, "top_k": 0},
}


@pytest.mark.parametrize("stream", [True, False])
def test_the_bedrock_body_reads_as_the_first_party_body_it_was_made_from(stream: bool) -> None:
    """The Bedrock client moves `model` and `stream` into the path and adds `anthropic_version`:
    the Ask is the one of the same call to `/v1/messages`."""
    path, body = _sent(AnthropicBedrock, **CREATE, stream=stream)
    assert "model" not in body and "stream" not in body and "anthropic_version" in body
    assert path.endswith("/invoke-with-response-stream" if stream else "/invoke")
    assert "%2F" in path
    first_path, first_body = _sent(Anthropic, **CREATE, stream=stream)
    on_bedrock, first_party = ask(body, path), ask(first_body, first_path)
    assert (on_bedrock.model, on_bedrock.stream) == (ARN, stream)
    assert on_bedrock == first_party


def test_on_bedrock_the_path_wins_over_a_stream_or_model_in_the_body() -> None:
    body = {"anthropic_version": "bedrock-2023-05-31", "model": "other", "stream": True,
            "max_tokens": 1, "messages": []}
    result = ask(body, "/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke?x=1")
    assert (result.model, result.stream) == ("anthropic.claude-3-haiku-20240307-v1:0", False)


@pytest.mark.parametrize(("path", "model"), [
    ("/model/anthropic.claude-v2/invoke", "anthropic.claude-v2"),
    ("/bedrock/model/us.anthropic.claude-x%3A0/converse-stream/", "us.anthropic.claude-x:0"),
    ("/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fp/invoke",
     "arn:aws:bedrock:us-east-1:1:inference-profile/p"),
    ("/model/arn:aws:bedrock:us-east-1:1:application-inference-profile/p/invoke",
     "arn:aws:bedrock:us-east-1:1:application-inference-profile/p"),
    ("/v1/messages", None),
    ("/model//invoke", None),
    ("", None),
])
def test_the_model_of_a_bedrock_path(path: str, model: str | None) -> None:
    assert bedrock_model(path) == model


def test_both_modules_of_the_dialect_share_one_request_side() -> None:
    assert anthropic.REQUEST is bedrock_anthropic.REQUEST
    body = orjson.dumps({"anthropic_version": "v", "max_tokens": 1,
                         "messages": [{"role": "user", "content": "hi"}]})
    for path in ("/v1/messages", "/model/m/invoke", "/model/m/invoke-with-response-stream"):
        result = read_ask(body, path)
        assert result.dialect == "anthropic.messages" and result.readable
    assert read_ask(body, "/model/m/invoke-with-response-stream").stream is True


def _meaning(result: Ask) -> Any:
    """What a faithful translation keeps: tools, choice, instructions, and the turns' text,
    calls and results, consecutive turns of one role merged."""
    turns: list[list[Any]] = []
    for turn in result.turns:
        said = [[p.text for p in turn.parts], [(c.name, c.arguments) for c in turn.calls],
                [(r.call_id, r.parts) for r in turn.results]]
        if turns and turns[-1][0] == turn.role:
            for mine, more in zip(turns[-1][1:], said, strict=True):
                mine.extend(more)
        else:
            turns.append([turn.role, *said])
    return ([(t.name, t.schema_key) for t in result.tools], result.tool_choice,
            [p.text for p in result.instructions], turns, result.stop)


CHAT = {
    **TOOLS_REQUEST,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather and time?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Taipei"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "clock", "arguments": ""}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "31 C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
    ],
    "tool_choice": {"type": "function", "function": {"name": "weather"}},
    "stop": "END",
}


def test_a_faithful_translation_of_a_chat_request_reads_to_the_same_meaning() -> None:
    client = openai_chat_request.ask(CHAT)
    messages = to_messages(CHAT)
    assert _meaning(ask(messages, "/v1/messages")) == _meaning(client)
    on_bedrock = ask(to_invoke(messages), invoke_path(CHAT))
    assert _meaning(on_bedrock) == _meaning(client)
    assert (on_bedrock.model, on_bedrock.stream) == (CHAT["model"], True)


@pytest.mark.parametrize(("body", "reason"), [
    ({"max_tokens": 1}, "messages"),
    ({"max_tokens": 1, "messages": [{"role": "system", "content": "x"}]}, "role"),
    ({"max_tokens": 1, "messages": [], "tool_choice": "required"}, "tool_choice"),
    ({"max_tokens": 1, "messages": [], "tool_choice": {"type": "required"}}, "tool_choice"),
    ({"max_tokens": 1, "messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": '{"a": 1}'}]}]}, "input"),
    ({"max_tokens": 1, "messages": [], "tools": [{"name": "f"}]}, "input_schema"),
    ({"max_tokens": 1, "messages": [], "thinking": "on"}, "thinking"),
    ({"max_tokens": "1", "messages": []}, "max_tokens"),
    ({"max_tokens": 1, "messages": [], "temperature": "0"}, "temperature"),
    ({"max_tokens": 1, "messages": [], "output_format": {"type": "json_object"}},
     "output_format"),
    ({"max_tokens": 1, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "s3", "uri": "x"}}]}]}, "source"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_body_that_is_no_messages_request_is_unreadable(body: dict[str, Any],
                                                          reason: str) -> None:
    result = read_ask(orjson.dumps(body), "/v1/messages")
    assert not result.readable and result.dialect == "anthropic.messages"
    (finding,) = result.findings
    assert finding.code is Code.REQUEST_UNREADABLE and reason in finding.detail


def test_what_the_dialect_carries_and_requires() -> None:
    side = anthropic.REQUEST
    assert set(side.REQUIRES) == {"max_output_tokens"}
    assert side.CARRIES <= PARTS
    assert {"tool_choice.none", "parallel_tool_calls", "sampling.top_k", "history.signature",
            "result.media", "result.error"} <= side.CARRIES
    assert not {"sampling.seed", "sampling.frequency_penalty", "sampling.presence_penalty",
                "media.audio"} & side.CARRIES


@pytest.mark.parametrize(("thinking", "verdict"), [
    ({"type": "enabled", "budget_tokens": 1024}, "equal"),
    (None, "diverged"),
], ids=["forwarded", "removed (LiteLLM #18926)"])
def test_the_comparison_sees_thinking_removed_with_thinking_in_history(
        thinking: dict[str, Any] | None, verdict: str) -> None:
    client = openai_chat_request.ask({
        "model": "m", "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"type": "function", "function": {"name": "f",
                                                    "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Checking.", "thinking_blocks": [
                {"type": "thinking", "thinking": "A tool is needed.", "signature": "c2ln"}],
             "tool_calls": [{"id": "toolu_1", "type": "function",
                             "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "done"}]})
    upstream: dict[str, Any] = {
        "model": "m", "max_tokens": 4096,
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "A tool is needed.", "signature": "c2ln"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}]}]}
    if thinking is not None:
        upstream["thinking"] = thinking
    comparison = compare_requests(client, ask(upstream, "/v1/messages"))
    assert comparison.verdict == verdict
    if verdict == "diverged":
        (finding,) = comparison.findings
        assert finding.code is Code.SAMPLING_CHANGED and "thinking" in finding.detail
