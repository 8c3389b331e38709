"""The Bedrock Converse request side: `/model/{id}/converse` and `/converse-stream` bodies read to
an `Ask`.

boto3 is the oracle for the wire shapes: its `bedrock-runtime` client validates the parameters
against the service model and serializes them (blobs as base64, the model id quoted into the
path), and the request is taken from it before it is sent, so what is read here is what a real
client sends.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import boto3
import orjson
import pytest
from botocore.config import Config
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
from calltap.dialects import anthropic_request, bedrock, openai_chat_request
from calltap.dialects.asks import read_ask
from calltap.dialects.bedrock_request import ask
from calltap.dialects.request_common import arguments_key
from calltap.fakes.translate_request import converse_path, to_converse, to_messages
from calltap.schemas import normalize, schema_key

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PDF = b"%PDF-1.7\n" + bytes(range(60))
MODEL = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-5"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"const": "celsius"}},
    "required": ["city"],
}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": [
        {"text": "What is in this picture, and the weather?"},
        {"image": {"format": "png", "source": {"bytes": PNG}}},
        {"image": {"format": "png", "source": {"s3Location": {"uri": "s3://bucket/cat.png"}}}},
        {"document": {"format": "pdf", "name": "report", "source": {"bytes": PDF}}},
        {"document": {"format": "txt", "name": "notes", "source": {"text": "plain notes"}}},
        {"video": {"format": "mp4", "source": {"s3Location": {"uri": "s3://bucket/v.mp4"}}}},
        {"cachePoint": {"type": "default"}},
    ]},
    {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "Two tools are needed.",
                                                "signature": "c2ln"}}},
        {"reasoningContent": {"redactedContent": b"encrypted"}},
        {"text": "Checking."},
        {"toolUse": {"toolUseId": "tooluse_1", "name": "weather", "input": {"city": "Taipei"}}},
        {"toolUse": {"toolUseId": "tooluse_2", "name": "clock", "input": {}}},
    ]},
    {"role": "user", "content": [
        {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "31 C"}]}},
        {"toolResult": {"toolUseId": "tooluse_2", "status": "error", "content": [
            {"text": "clock broke"},
            {"image": {"format": "png", "source": {"bytes": PNG}}},
        ]}},
    ]},
]
CONVERSE: dict[str, Any] = {
    "modelId": MODEL,
    "messages": MESSAGES,
    "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}, {"text": "Use tools."}],
    "inferenceConfig": {"maxTokens": 2048, "temperature": 0, "topP": 0.5,
                        "stopSequences": ["END"]},
    "toolConfig": {
        "tools": [
            {"toolSpec": {"name": "weather", "description": "Weather in a city",
                          "inputSchema": {"json": WEATHER_SCHEMA}, "strict": True}},
            {"toolSpec": {"name": "clock", "inputSchema": {"json": {"type": "object"}}}},
            {"cachePoint": {"type": "default"}},
        ],
        "toolChoice": {"any": {}},
    },
    "additionalModelRequestFields": {"top_k": 0,
                                     "thinking": {"type": "enabled", "budget_tokens": 1024}},
    "outputConfig": {"textFormat": {"type": "json_schema", "structure": {
        "jsonSchema": {"schema": json.dumps(SCHEMA), "name": "person"}}}},
}


class _Taken(Exception):
    """Raised once the request is taken, so that nothing is sent."""


@pytest.fixture(scope="module")
def runtime() -> Any:
    """A `bedrock-runtime` client whose requests are taken before they are sent."""
    client = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="a",
                          aws_secret_access_key="b", endpoint_url="http://127.0.0.1:9",
                          config=Config(retries={"max_attempts": 0}))
    client.taken = []

    def take(request: Any, **_: Any) -> None:
        client.taken.append((request.url.removeprefix("http://127.0.0.1:9"),
                             json.loads(request.body)))
        raise _Taken

    client.meta.events.register("before-send.bedrock-runtime.*", take)
    return client


def sent(runtime: Any, operation: str = "converse", **params: Any) -> tuple[str, dict[str, Any]]:
    """The path and body boto3 sends for `operation(**params)`."""
    with pytest.raises(_Taken):
        getattr(runtime, operation)(**params)
    return runtime.taken[-1]


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(("operation", "stream"), [("converse", False),
                                                   ("converse_stream", True)])
def test_a_whole_converse_request_reads_to_its_meaning(runtime: Any, operation: str,
                                                       stream: bool) -> None:
    path, body = sent(runtime, operation, **CONVERSE)
    assert "modelId" not in body and "%2F" in path
    result = ask(body, path)
    assert (result.dialect, result.model, result.stream, result.readable) == (
        "bedrock.converse", MODEL, stream, True)
    assert result.usage_requested is True
    assert result.instructions == [Part("text", "Be brief."), Part("text", "Use tools.")]
    weather, clock = result.tools
    assert (weather.name, weather.description, weather.strict) == (
        "weather", "Weather in a city", True)
    assert weather.schema_key == schema_key(normalize(WEATHER_SCHEMA))
    assert (clock.name, clock.strict, clock.schema) == ("clock", None, {"type": ["object"]})
    assert (result.tool_choice, result.parallel_tool_calls) == (ToolChoice("required"), None)
    assert (result.max_output_tokens, result.stop) == (2048, ("END",))
    assert result.sampling == {"temperature": 0, "top_p": 0.5, "top_k": 0}
    assert result.reasoning == ReasoningSettings(None, True, 1024)
    assert result.response_format is not None
    assert result.response_format.schema_key == schema_key(normalize(SCHEMA))


def test_each_message_is_a_turn_of_its_role_with_its_blocks(runtime: Any) -> None:
    user, assistant, results = ask(*reversed(sent(runtime, **CONVERSE))).turns
    assert [turn.role for turn in (user, assistant, results)] == ["user", "assistant", "user"]
    assert user.parts == [
        Part("text", "What is in this picture, and the weather?"),
        Part("image", digest=digest(PNG)),
        Part("image", digest="url:s3://bucket/cat.png"),
        Part("document", digest=digest(PDF)),
        Part("document", digest=digest(b"plain notes")),
        Part("video", digest="url:s3://bucket/v.mp4"),
    ]
    assert assistant.parts == [Part("text", "Checking.")]
    assert assistant.calls == [
        HistoryCall("weather", arguments_key({"city": "Taipei"}), "tooluse_1"),
        HistoryCall("clock", arguments_key({}), "tooluse_2"),
    ]
    assert assistant.reasoning == [Reasoning("Two tools are needed.", signed=True),
                                   Reasoning("", signed=True, redacted=True)]
    first, second = results.results
    assert (first.call_id, first.name, first.parts, first.is_error) == (
        "tooluse_1", None, (Part("text", "31 C"),), None)
    assert (second.call_id, second.is_error) == ("tooluse_2", True)
    assert second.parts == (Part("text", "clock broke"), Part("image", digest=digest(PNG)))
    assert results.parts == []


def test_the_same_request_as_anthropic_messages_reads_to_the_same_conversation(
        runtime: Any) -> None:
    """One conversation said in both dialects: the same tools, turns, media and reasoning."""
    messages = [
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture, and the weather?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(PNG).decode()}},
            {"type": "image", "source": {"type": "url", "url": "s3://bucket/cat.png"}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                            "data": base64.b64encode(PDF).decode()}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                            "data": "plain notes"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Two tools are needed.", "signature": "c2ln"},
            {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "tooluse_1", "name": "weather",
             "input": {"city": "Taipei"}},
            {"type": "tool_use", "id": "tooluse_2", "name": "clock", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tooluse_1", "content": "31 C"},
            {"type": "tool_result", "tool_use_id": "tooluse_2", "is_error": True, "content": [
                {"type": "text", "text": "clock broke"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": base64.b64encode(PNG).decode()}}]}]},
    ]
    anthropic = anthropic_request.ask({
        "model": MODEL, "max_tokens": 2048, "messages": messages,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}],
        "tools": [{"name": "weather", "description": "Weather in a city",
                   "input_schema": WEATHER_SCHEMA, "strict": True},
                  {"name": "clock", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"}, "stop_sequences": ["END"], "temperature": 0,
        "top_p": 0.5, "top_k": 0, "thinking": {"type": "enabled", "budget_tokens": 1024},
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
    })
    without_video = [*MESSAGES]
    without_video[0] = {"role": "user", "content": MESSAGES[0]["content"][:5]}
    converse = ask(*reversed(sent(runtime, **{**CONVERSE, "messages": without_video})))
    for field in ("tools", "tool_choice", "parallel_tool_calls", "instructions", "turns",
                  "response_format", "max_output_tokens", "stop", "sampling", "reasoning"):
        assert getattr(converse, field) == getattr(anthropic, field), field


@pytest.mark.parametrize(("choice", "expected"), [
    ({"auto": {}}, ToolChoice("auto")),
    ({"any": {}}, ToolChoice("required")),
    ({"tool": {"name": "weather"}}, ToolChoice("function", "weather")),
    (None, None),
])
def test_tool_choice_on_the_asks_scale(runtime: Any, choice: Any,
                                       expected: ToolChoice | None) -> None:
    config = {"tools": CONVERSE["toolConfig"]["tools"]}
    if choice is not None:
        config["toolChoice"] = choice
    result = ask(*reversed(sent(runtime, **{**CONVERSE, "toolConfig": config})))
    assert (result.tool_choice, result.parallel_tool_calls) == (expected, None)


def test_converse_has_no_none_choice_and_no_parallel_flag() -> None:
    side = bedrock.REQUEST
    assert side.CARRIES <= PARTS
    assert not {"tool_choice.none", "parallel_tool_calls"} & side.CARRIES
    assert {"tool_choice.required", "tool_choice.function", "sampling.top_k", "result.error",
            "result.media", "history.signature", "media.video", "media.audio"} <= side.CARRIES
    assert not side.REQUIRES and not side.SCHEMA_LACKS
    result = read_ask(orjson.dumps({"messages": [], "toolConfig": {
        "tools": [], "toolChoice": {"none": {}}}}), "/model/m/converse")
    assert not result.readable and "toolChoice" in result.findings[0].detail


@pytest.mark.parametrize(("status", "is_error"), [("error", True), ("success", False),
                                                  (None, None)])
def test_a_tool_results_status_is_its_error_flag(status: str | None,
                                                 is_error: bool | None) -> None:
    result: dict[str, Any] = {"toolUseId": "t", "content": [{"text": "x"}]}
    if status is not None:
        result["status"] = status
    turn = ask({"messages": [{"role": "user", "content": [{"toolResult": result}]}]}).turns[0]
    assert turn.results[0].is_error is is_error


def test_a_json_tool_result_reads_as_its_json_text() -> None:
    value = {"temp": 22, "city": "台北"}
    turn = ask({"messages": [{"role": "user", "content": [{"toolResult": {
        "toolUseId": "t", "content": [{"json": value}]}}]}]}).turns[0]
    (part,) = turn.results[0].parts
    assert part.kind == "text" and part.text is not None and json.loads(part.text) == value


def test_duplicate_tool_use_ids_are_kept_as_sent(runtime: Any) -> None:
    """LiteLLM #20047: consecutive tool messages merged into one user turn of `toolResult`
    blocks naming one `toolUseId` twice. The reader keeps both results (and two `toolUse`
    blocks of one id, both calls), so that a comparison sees the turn as it was sent."""
    messages = [
        {"role": "user", "content": [{"text": "What's the weather?"}]},
        {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "tooluse_abc123", "name": "get_weather",
                         "input": {"location": "Paris"}}},
            {"toolUse": {"toolUseId": "tooluse_abc123", "name": "get_weather",
                         "input": {"location": "Paris"}}}]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "tooluse_abc123", "content": [{"text": '{"temp": 22}'}]}},
            {"toolResult": {"toolUseId": "tooluse_abc123", "content": [{"text": '{"temp": 22}'}]}},
        ]},
    ]
    _, calls, results = ask(*reversed(sent(runtime, modelId="m", messages=messages))).turns
    assert [call.id for call in calls.calls] == ["tooluse_abc123", "tooluse_abc123"]
    assert [result.call_id for result in results.results] == ["tooluse_abc123", "tooluse_abc123"]
    client = openai_chat_request.ask({"model": "m", "messages": [
        {"role": "user", "content": "What's the weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "tooluse_abc123", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "tooluse_abc123", "content": '{"temp": 22}'},
        {"role": "tool", "tool_call_id": "tooluse_abc123", "content": '{"temp": 22}'}]})
    assert [r for turn in client.turns for r in turn.results] == results.results


@pytest.mark.parametrize(("extra", "sampling", "settings"), [
    ({"top_k": 40, "thinking": {"type": "enabled", "budget_tokens": 2048}},
     {"top_k": 40}, ReasoningSettings(None, True, 2048)),
    ({"thinking": {"type": "disabled"}}, {}, ReasoningSettings(None, False, None)),
    ({"inferenceConfig": {"topK": 20}, "reasoningConfig": {
        "type": "enabled", "maxReasoningEffort": "low"}},
     {"top_k": 20}, ReasoningSettings("low", True, None)),
    ({"reasoning_effort": "high"}, {}, ReasoningSettings("high", None, None)),
    ({"output_config": {"effort": "medium"}}, {}, ReasoningSettings("medium", None, None)),
    ({"anthropic_beta": ["x"]}, {}, ReasoningSettings()),
], ids=["claude (LiteLLM)", "thinking off", "nova", "open-weight", "claude effort", "other"])
def test_the_models_own_fields_say_top_k_and_reasoning(
        runtime: Any, extra: dict[str, Any], sampling: dict[str, Any],
        settings: ReasoningSettings) -> None:
    path, body = sent(runtime, modelId="m", messages=MESSAGES[:1],
                      additionalModelRequestFields=extra)
    result = ask(body, path)
    assert (result.sampling, result.reasoning) == (sampling, settings)


def test_an_effort_in_output_config_is_the_reasoning_effort(runtime: Any) -> None:
    result = ask(*reversed(sent(runtime, modelId="m", messages=MESSAGES[:1],
                                outputConfig={"effort": "high"})))
    assert result.reasoning == ReasoningSettings("high", None, None)
    assert result.response_format is None


def test_claudes_own_output_format_tunnelled_through_converse_is_the_structured_output() -> None:
    body = {"messages": [], "additionalModelRequestFields": {"output_config": {
        "format": {"type": "json_schema", "schema": SCHEMA}}}}
    result = ask(body, "/model/m/converse")
    assert result.response_format is not None
    assert result.response_format.schema_key == schema_key(normalize(SCHEMA))


def test_litellms_structured_output_stand_in_reads_as_a_tool_and_a_forced_choice() -> None:
    """LiteLLM sends a `response_format` schema to Bedrock as a tool it forces; the comparator
    recognizes the stand-in by the schema's meaning, which is the client's format's."""
    body = {"messages": [{"role": "user", "content": [{"text": "x"}]}], "toolConfig": {
        "tools": [{"toolSpec": {"name": "person", "inputSchema": {"json": SCHEMA}}}],
        "toolChoice": {"tool": {"name": "person"}}}}
    result = ask(body)
    chat = openai_chat_request.response_format(
        {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}})
    assert result.tool_choice == ToolChoice("function", "person")
    assert chat is not None and result.tools[0].schema_key == chat.schema_key


def test_without_a_path_the_model_and_streaming_are_unsaid() -> None:
    result = ask({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    assert (result.model, result.stream, result.usage_requested) == (None, None, True)


def test_a_system_tool_is_offered_by_its_name_and_a_server_tool_use_is_not_a_call() -> None:
    body = {"messages": [{"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "s", "name": "nova_grounding", "input": {},
                     "type": "server_tool_use"}},
        {"citationsContent": {"content": [{"text": "It is warm."}], "citations": []}}]}],
        "toolConfig": {"tools": [{"systemTool": {"name": "nova_grounding"}}]}}
    result = ask(body)
    assert [(t.name, t.schema) for t in result.tools] == [("nova_grounding", None)]
    assert (result.turns[0].calls, result.turns[0].parts) == ([], [Part("text", "It is warm.")])


def test_guarded_content_is_text() -> None:
    body = {"system": [{"guardContent": {"text": {"text": "Stay on topic."}}}],
            "messages": [{"role": "user", "content": [
                {"guardContent": {"text": {"text": "Is it safe?", "qualifiers": ["query"]}}}]}]}
    result = ask(body)
    assert result.instructions == [Part("text", "Stay on topic.")]
    assert result.turns[0].parts == [Part("text", "Is it safe?")]


@given(st.text(min_size=1), st.dictionaries(st.text(max_size=5), st.integers() | st.text(),
                                            max_size=4))
@examples(100)
def test_text_and_arguments_read_as_the_anthropic_reader_reads_them(
        said: str, arguments: dict[str, Any]) -> None:
    converse = ask({"messages": [
        {"role": "user", "content": [{"text": said}]},
        {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "t", "name": "f", "input": arguments}}]}]})
    messages = anthropic_request.ask({"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": said},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": arguments}]}]})
    assert converse.turns == messages.turns


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
            [p.text for p in result.instructions], turns, result.stop, result.max_output_tokens)


CHAT: dict[str, Any] = {
    "model": "us.anthropic.claude-sonnet-4-5-v1:0",
    "stream": True,
    "max_tokens": 300,
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
    "tools": [{"type": "function", "function": {"name": "weather", "parameters": WEATHER_SCHEMA}},
              {"type": "function", "function": {"name": "clock", "parameters": {
                  "type": "object", "properties": {}}}}],
    "tool_choice": "required",
    "stop": ["END"],
}


def test_a_faithful_translation_of_a_chat_request_reads_to_the_same_meaning() -> None:
    client = openai_chat_request.ask(CHAT)
    result = ask(to_converse(CHAT), converse_path(CHAT))
    assert _meaning(result) == _meaning(client)
    assert (result.model, result.stream) == (CHAT["model"], True)
    assert _meaning(result) == _meaning(anthropic_request.ask(to_messages(CHAT)))


def test_a_converse_path_names_the_dialect_that_reads_the_body() -> None:
    body = orjson.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
    for path, stream in (("/model/m/converse", False), ("/model/m/converse-stream", True)):
        result = read_ask(body, path)
        assert (result.dialect, result.readable, result.stream) == (
            "bedrock.converse", True, stream)


@pytest.mark.parametrize(("body", "reason"), [
    ({"messages": [{"role": "system", "content": [{"text": "x"}]}]}, "role"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "content"),
    ({"messages": [{"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "t", "name": "f", "input": "{}"}}]}]}, "input"),
    ({"messages": [], "toolConfig": {"tools": [{"toolSpec": {"name": "f"}}]}}, "inputSchema"),
    ({"messages": [], "inferenceConfig": {"maxTokens": 1.5}}, "maxTokens"),
    ({"messages": [], "inferenceConfig": {"temperature": "0"}}, "temperature"),
    ({"messages": [], "outputConfig": {"textFormat": {"type": "json_schema", "structure": {
        "jsonSchema": {"schema": "{not json"}}}}}, "schema"),
    ({"messages": [{"role": "user", "content": [{"image": {"format": "png", "source": {}}}]}]},
     "source"),
    ({"messages": [], "additionalModelRequestFields": {"thinking": True}}, "thinking"),
    ({"messages": "hi"}, "messages"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_body_that_is_no_converse_request_is_unreadable(body: dict[str, Any],
                                                          reason: str) -> None:
    result = read_ask(orjson.dumps(body), "/model/m/converse")
    assert not result.readable and result.dialect == "bedrock.converse"
    (finding,) = result.findings
    assert finding.code is Code.REQUEST_UNREADABLE and reason in finding.detail


def _chat_with_results(results: list[tuple[str, str]]) -> Ask:
    return openai_chat_request.ask({"model": "m", "messages": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}]},
        *({"role": "tool", "tool_call_id": link, "content": said} for link, said in results)],
        "tools": [{"type": "function", "function": {"name": "weather",
                                                    "parameters": {"type": "object"}}}]})


def _converse_with_results(results: list[tuple[str, str]]) -> Ask:
    return ask({"messages": [
        {"role": "user", "content": [{"text": "Weather in Paris and Rome?"}]},
        {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "call_1", "name": "weather", "input": {"city": "Paris"}}},
            {"toolUse": {"toolUseId": "call_2", "name": "weather", "input": {"city": "Rome"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": link, "content": [
            {"text": said}]}} for link, said in results]}],
        "toolConfig": {"tools": [{"toolSpec": {"name": "weather",
                                               "inputSchema": {"json": {"type": "object"}}}}]}},
        "/model/m/converse")


@pytest.mark.parametrize(("client", "provider", "codes"), [
    ([("call_1", "20 C"), ("call_2", "25 C")], [("call_1", "20 C"), ("call_2", "25 C")], []),
    ([("call_1", "20 C"), ("call_1", "20 C")], [("call_1", "20 C"), ("call_1", "20 C")], []),
    ([("call_1", "20 C"), ("call_1", "20 C")], [("call_1", "20 C")],
     [Code.HISTORY_TOOL_RESULT_CHANGED]),
    ([("call_1", "20 C"), ("call_2", "25 C")], [("call_1", "20 C"), ("call_1", "25 C")],
     [Code.HISTORY_TOOL_RESULT_CHANGED, Code.HISTORY_TOOL_RESULT_CHANGED]),
], ids=["faithful", "duplicates forwarded", "duplicates merged away", "relinked to one id"])
def test_the_comparison_sees_results_merged_under_one_id(
        client: list[tuple[str, str]], provider: list[tuple[str, str]],
        codes: list[Code]) -> None:
    """The shapes around LiteLLM #20047, read by this side and compared: duplicates forwarded as
    the client sent them are faithful; a result merged away, or a second result sent under the
    first call's id, is a changed history."""
    comparison = compare_requests(_chat_with_results(client), _converse_with_results(provider))
    assert [finding.code for finding in comparison.findings] == codes
