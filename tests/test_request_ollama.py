"""The Ollama request side: `/api/chat` bodies read to an `Ask`.

Ollama's own Python client (`ollama`) is the oracle for the wire shapes: it builds the bodies here
over a transport that answers locally (images from bytes as base64, a Python function as a tool,
`think` and `format` as sent). The Chat Completions request side is the reference a faithful
translation must read equal to, by `compare_requests`.
"""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

import httpx
import ollama
import pytest

from calltap.ask import Part, Reasoning, ReasoningSettings, ResponseFormat, ToolResult
from calltap.codes import Code
from calltap.compare_requests import compare_requests
from calltap.dialects import ollama as ollama_dialect
from calltap.dialects import openai_chat_request
from calltap.dialects.asks import read_ask
from calltap.dialects.ollama_request import CARRIES, SCHEMA_LACKS, ask
from calltap.dialects.request_common import RequestUnreadable, arguments_key, inline_media
from calltap.schemas import normalize, schema_key
from dialect_helpers import damaged

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PNG_B64 = base64.b64encode(PNG).decode()
ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"},
                                               "b": {"type": "integer"}},
              "required": ["a", "b"]}
REQUEST: dict[str, Any] = {
    "model": "qwen3:8b",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 1+2, and what is this?", "images": [PNG_B64]},
        {"role": "assistant", "content": "", "thinking": "Use the tool.", "tool_calls": [
            {"id": "call_a", "function": {"index": 0, "name": "add",
                                          "arguments": {"a": 1, "b": 2}}},
            {"function": {"name": "add", "arguments": {"b": 4, "a": 3}}}]},
        {"role": "tool", "content": "3", "tool_name": "add", "tool_call_id": "call_a"},
        {"role": "tool", "content": "7", "tool_name": "add"},
        {"role": "Assistant", "content": "3 and 7; a picture."},
        {"role": "user", "content": "Thanks."},
    ],
    "tools": [{"type": "function", "function": {"name": "add", "description": "Add",
                                                "parameters": ADD_SCHEMA, "strict": True}}],
    "format": {"type": "object", "properties": {"sum": {"type": "integer"}}},
    "options": {"temperature": 0, "top_p": 0.9, "top_k": 0, "seed": 0, "frequency_penalty": 0.5,
                "presence_penalty": 0.0, "num_predict": 256, "stop": ["END"], "num_ctx": 8192},
    "think": "high",
    "keep_alive": "5m",
}


def test_a_whole_ollama_request_reads_to_its_meaning() -> None:
    result = ask(REQUEST, "/api/chat")
    assert (result.dialect, result.model, result.readable) == ("ollama.chat", "qwen3:8b", True)
    assert (result.stream, result.usage_requested) == (True, True)
    assert result.instructions == [Part("text", "Be brief.")]
    assert (result.tool_choice, result.parallel_tool_calls) == (None, None)
    (add,) = result.tools
    assert (add.name, add.description, add.strict) == ("add", "Add", None)
    assert add.schema_key == schema_key(normalize(ADD_SCHEMA))
    assert result.sampling == {"temperature": 0, "top_p": 0.9, "top_k": 0, "seed": 0,
                               "frequency_penalty": 0.5, "presence_penalty": 0.0}
    assert (result.max_output_tokens, result.stop) == (256, ("END",))
    schema = {"type": ["object"], "properties": {"sum": {"type": ["integer"]}}}
    assert result.response_format == ResponseFormat("json_schema", schema, schema_key(schema))
    assert result.reasoning == ReasoningSettings("high", True, None)


def test_messages_are_turns_and_tool_results_are_named_and_linked_when_an_id_came() -> None:
    user, assistant, first, second, answer, last = ask(REQUEST).turns
    assert [turn.role for turn in (user, assistant, first, second, answer, last)] == [
        "user", "assistant", "user", "user", "assistant", "user"]
    assert user.parts == [Part("text", "What is 1+2, and what is this?"),
                          inline_media("image", PNG)]
    assert assistant.parts == []
    assert assistant.reasoning == [Reasoning("Use the tool.", signed=False)]
    assert [(call.name, call.arguments, call.id) for call in assistant.calls] == [
        ("add", arguments_key({"a": 1, "b": 2}), "call_a"),
        ("add", arguments_key({"a": 3, "b": 4}), None)]
    assert first.results == [ToolResult("call_a", "add", (Part("text", "3"),), None)]
    assert second.results == [ToolResult(None, "add", (Part("text", "7"),), None)]
    assert answer.parts == [Part("text", "3 and 7; a picture.")]
    assert last.parts == [Part("text", "Thanks.")]


@pytest.mark.parametrize(("stream", "meant"), [(None, True), (True, True), (False, False)])
def test_ollama_streams_unless_told_not_to(stream: bool | None, meant: bool) -> None:
    request: dict[str, Any] = {"model": "m", "messages": []}
    if stream is not None:
        request["stream"] = stream
    assert ask(request).stream is meant


@pytest.mark.parametrize(
    ("think", "settings"),
    [(True, ReasoningSettings(None, True)), (False, ReasoningSettings(None, False)),
     ("low", ReasoningSettings("low", True)), ("max", ReasoningSettings("max", True)),
     (None, ReasoningSettings())],
)
def test_think_is_a_switch_or_a_level(think: Any, settings: ReasoningSettings) -> None:
    assert ask({"messages": [], "think": think}).reasoning == settings


@pytest.mark.parametrize(
    ("value", "kind"),
    [("json", "json_object"), ({"type": "object"}, "json_schema"), ("", None), (None, None)],
)
def test_format_is_any_json_or_a_schema(value: Any, kind: str | None) -> None:
    read = ask({"messages": [], "format": value}).response_format
    assert (read.kind if read else None) == kind


@pytest.mark.parametrize(("limit", "meant"), [(0, 0), (100, 100), (-1, None), (-2, None)])
def test_a_negative_num_predict_is_no_limit(limit: int, meant: int | None) -> None:
    assert ask({"messages": [], "options": {"num_predict": limit}}).max_output_tokens == meant


def test_ollama_has_no_tool_choice_parallel_flag_or_strict() -> None:
    assert not {"tool_choice.none", "tool_choice.required", "tool_choice.function",
                "parallel_tool_calls", "strict", "reasoning.budget", "history.signature",
                "result.media", "result.error", "media.audio"} & CARRIES
    assert {"sampling.top_k", "sampling.seed", "sampling.frequency_penalty", "stop",
            "response_format", "reasoning.thinking", "history.reasoning", "media.image"} <= CARRIES
    assert {"additionalProperties", "minimum", "pattern", "oneOf"} <= SCHEMA_LACKS
    assert not {"type", "properties", "required", "items", "enum", "anyOf", "const",
                "description"} & SCHEMA_LACKS
    body = {"messages": [], "tool_choice": "required", "parallel_tool_calls": False}
    assert (ask(body).tool_choice, ask(body).parallel_tool_calls) == (None, None)


CHAT: dict[str, Any] = {
    "model": "qwen3:8b",
    "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "What is 1+2?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add",
                                                          "arguments": '{"a":1,"b":2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
    ],
    "tools": [{"type": "function", "function": {"name": "add", "parameters": ADD_SCHEMA}}],
    "tool_choice": "required",
    "parallel_tool_calls": False,
    "temperature": 0,
    "max_tokens": 100,
    "stop": "END",
}


OLLAMA: dict[str, Any] = {
    "model": "qwen3:8b",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 1+2?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]},
        {"role": "tool", "content": "3", "tool_name": "add"},
    ],
    "stream": False,
    "tools": [{"type": "function", "function": {"name": "add", "parameters": ADD_SCHEMA}}],
    "options": {"temperature": 0, "num_predict": 100, "stop": ["END"]},
}


def test_a_chat_request_translated_to_ollama_loses_only_what_ollama_cannot_say() -> None:
    """As LiteLLM's `ollama_chat/` route translates it: calls without ids, the result named by
    its function (linked by name), `tool_choice` and `parallel_tool_calls` left out because
    Ollama has no field for them."""
    comparison = compare_requests(openai_chat_request.ask(CHAT), ask(OLLAMA, "/api/chat"))
    assert [(finding.code, finding.detail.partition(":")[0])
            for finding in comparison.findings] == [
        (Code.REQUEST_PART_UNSUPPORTED, "tool_choice"),
        (Code.REQUEST_PART_UNSUPPORTED, "parallel_tool_calls")]
    assert comparison.verdict == "equal"


def test_a_dropped_zero_temperature_is_a_change_ollama_could_have_carried() -> None:
    dropped = {**OLLAMA, "options": {"num_predict": 100, "stop": ["END"]}}
    comparison = compare_requests(openai_chat_request.ask(CHAT), ask(dropped, "/api/chat"))
    assert [finding.code for finding in comparison.findings if finding.code
            is not Code.REQUEST_PART_UNSUPPORTED] == [Code.SAMPLING_CHANGED]
    assert comparison.verdict == "diverged"


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
      a: the first
      b: the second
    """
    return a + b


def _sent(**chat: Any) -> tuple[str, dict[str, Any]]:
    """The path and body Ollama's client sends for `chat(**chat)`."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.raw_path.decode(), json.loads(request.content)))
        return httpx.Response(400, json={"error": "x"})

    client = ollama.Client(host="http://127.0.0.1:9", transport=httpx.MockTransport(answer))
    with pytest.raises(ollama.ResponseError):
        client.chat(**chat)
    return seen[0]


def test_ollamas_client_body_reads_to_what_it_was_asked() -> None:
    """The client sends images given as bytes in base64, a function as its tool, `stream:
    false` unless told otherwise (the API itself streams by default), and leaves an empty
    assistant content out."""
    path, body = _sent(
        model="qwen3:8b", tools=[add], think=True, format="json",
        options={"temperature": 0, "seed": 0, "num_predict": -1, "stop": ["END"]},
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "1+2? And this?", "images": [PNG]},
            {"role": "assistant", "content": "", "thinking": "Add.", "tool_calls": [
                {"function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]},
            {"role": "tool", "content": "3", "tool_name": "add"},
        ])
    assert path == "/api/chat" and "content" not in body["messages"][2]
    result = read_ask(json.dumps(body).encode(), path)
    assert (result.dialect, result.model, result.stream) == ("ollama.chat", "qwen3:8b", False)
    assert result.instructions == [Part("text", "Be brief.")]
    user, assistant, outcome = result.turns
    assert user.parts == [Part("text", "1+2? And this?"), inline_media("image", PNG)]
    assert assistant.calls[0].arguments == arguments_key({"a": 1, "b": 2})
    assert assistant.reasoning == [Reasoning("Add.", signed=False)]
    assert outcome.results == [ToolResult(None, "add", (Part("text", "3"),), None)]
    (tool,) = result.tools
    assert tool.name == "add" and tool.schema == normalize(
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
         "required": ["a", "b"]})
    assert result.sampling == {"temperature": 0, "seed": 0}
    assert (result.max_output_tokens, result.stop) == (None, ("END",))
    assert result.response_format == ResponseFormat("json_object")
    assert result.reasoning == ReasoningSettings(None, True)


@pytest.mark.parametrize(
    "request_body",
    [
        {},
        {"messages": {"role": "user"}},
        {"messages": ["Hi"]},
        {"messages": [{"content": "no role"}]},
        {"messages": [{"role": "developer", "content": "x"}]},
        {"messages": [{"role": "user", "content": ["parts"]}]},
        {"messages": [{"role": "user", "content": "x", "images": "abc"}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": {}}}]}]},
        {"messages": [], "tools": [{"type": "function", "function": {"description": "x"}}]},
        {"messages": [], "format": "yaml"},
        {"messages": [], "options": []},
        {"messages": [], "options": {"temperature": "0"}},
        {"messages": [], "options": {"num_predict": 1.5}},
        {"messages": [], "think": 1},
        {"messages": [], "stream": "yes"},
    ],
)
def test_a_body_that_is_no_ollama_request_is_unreadable(request_body: dict[str, Any]) -> None:
    result = read_ask(json.dumps(request_body).encode(), "/api/chat")
    assert not result.readable
    assert [finding.code for finding in result.findings] == [Code.REQUEST_UNREADABLE]
    assert result.dialect == "ollama.chat"


def test_the_ollama_path_picks_this_reader() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Hi"}]}).encode()
    assert read_ask(body, "/api/chat").dialect == "ollama.chat"
    assert ollama_dialect.REQUEST.NAME == ollama_dialect.NAME


def test_a_wrong_or_missing_field_anywhere_is_unreadable_never_an_error() -> None:
    """Every field of a whole request, in turn, set to a value of each wrong type or taken out:
    the reader gives an Ask or says RequestUnreadable, and never fails in another way (which
    `read_ask` would have to catch for it)."""
    for _path, broken in damaged(REQUEST, removing=True):
        with contextlib.suppress(RequestUnreadable):
            ask(broken, "/api/chat")
