"""The OpenAI Responses request side: `/v1/responses` bodies read to an `Ask`.

The official `openai` SDK is the oracle for the wire shapes it builds itself (a Pydantic model as
`text.format`); the Chat Completions request side is the reference a faithful translation must
read equal to, by `compare_requests`.
"""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

import httpx2
import pytest
from openai import OpenAI
from pydantic import BaseModel

from calltap.ask import Part, Reasoning, ReasoningSettings, ToolChoice, ToolResult
from calltap.codes import Code
from calltap.compare_requests import compare_requests
from calltap.dialects import openai_chat_request, openai_responses
from calltap.dialects.asks import read_ask
from calltap.dialects.openai_responses_request import CARRIES, ask
from calltap.dialects.request_common import (
    RequestUnreadable,
    arguments_key,
    inline_media,
    url_media,
)
from calltap.schemas import normalize, schema_key
from dialect_helpers import damaged

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
PDF_URL = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.7\n").decode()
SHELL_SCHEMA = {
    "type": "object",
    "properties": {"command": {"type": "array", "items": {"type": "string"}},
                   "workdir": {"$ref": "#/$defs/path"}},
    "required": ["command", "workdir"],
    "additionalProperties": False,
    "$defs": {"path": {"type": "string"}},
}
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
INPUT: list[dict[str, Any]] = [
    {"type": "message", "role": "developer",
     "content": [{"type": "input_text", "text": "Sandbox: read-only."}]},
    {"role": "user", "content": [
        {"type": "input_text", "text": "What is in this picture? List the files."},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_image", "file_id": "file-img"},
        {"type": "input_file", "file_data": PDF_URL, "filename": "a.pdf"},
        {"type": "input_file", "file_url": "https://example.com/b.pdf"},
    ]},
    {"type": "reasoning", "id": "rs_1",
     "summary": [{"type": "summary_text", "text": "Look first."},
                 {"type": "summary_text", "text": "Then list."}],
     "encrypted_content": "gAAAA-opaque"},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
     "content": [{"type": "output_text", "text": "A cat. Listing.", "annotations": []}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell",
     "arguments": '{"command": ["ls"], "workdir": "/w"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt"},
    {"type": "function_call", "call_id": "call_2", "name": "screenshot", "arguments": ""},
    {"type": "function_call_output", "call_id": "call_2", "output": [
        {"type": "input_text", "text": "the screen"},
        {"type": "input_image", "image_url": PNG_URL}]},
    {"type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch",
     "input": "*** Begin Patch\n*** End Patch"},
    {"type": "custom_tool_call_output", "call_id": "call_3", "output": "Done!"},
    {"type": "item_reference", "id": "ws_1"},
    {"type": "web_search_call", "id": "ws_2", "status": "completed"},
    {"role": "user", "content": "Thanks. Now summarize."},
]
REQUEST: dict[str, Any] = {
    "model": "gpt-5-codex",
    "instructions": "You are Codex.",
    "input": INPUT,
    "tools": [
        {"type": "function", "name": "shell", "description": "Runs a command",
         "parameters": SHELL_SCHEMA},
        {"type": "function", "name": "screenshot", "parameters": {"type": "object"},
         "strict": False},
        {"type": "custom", "name": "apply_patch", "description": "Patch files",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
        {"type": "web_search"},
        {"type": "mcp", "server_label": "deepwiki", "server_url": "https://mcp.example.com"},
    ],
    "tool_choice": "required",
    "parallel_tool_calls": False,
    "text": {"format": {"type": "json_schema", "name": "files", "strict": True,
                        "schema": {"type": "object", "properties": {"n": {"const": 1}}}},
             "verbosity": "low"},
    "max_output_tokens": 4000,
    "temperature": 0,
    "top_p": 0.5,
    "reasoning": {"effort": "high", "summary": "auto"},
    "include": ["reasoning.encrypted_content"],
    "store": False,
    "stream": True,
}


def test_a_whole_responses_request_reads_to_its_meaning() -> None:
    result = ask(REQUEST, "/v1/responses")
    assert (result.dialect, result.model, result.readable) == (
        "openai.responses", "gpt-5-codex", True)
    assert (result.stream, result.usage_requested) == (True, True)
    assert result.instructions == [Part("text", "You are Codex."),
                                   Part("text", "Sandbox: read-only.")]
    assert result.tool_choice == ToolChoice("required")
    assert result.parallel_tool_calls is False
    assert result.max_output_tokens == 4000
    assert result.sampling == {"temperature": 0, "top_p": 0.5}
    assert result.stop is None
    assert result.reasoning == ReasoningSettings("high")
    assert result.response_format is not None
    assert (result.response_format.kind, result.response_format.strict) == ("json_schema", True)
    assert result.response_format.schema == {"type": ["object"],
                                             "properties": {"n": {"enum": [1]}}}


def test_tools_are_read_by_name_and_a_function_without_strict_is_strict() -> None:
    shell, screenshot, patch, search, wiki = ask(REQUEST).tools
    assert (shell.name, shell.description, shell.strict) == ("shell", "Runs a command", True)
    assert shell.schema_key == schema_key(normalize(SHELL_SCHEMA))
    assert shell.schema["properties"]["workdir"] == {"type": ["string"]}
    assert shell.raw_schema == SHELL_SCHEMA
    assert (screenshot.name, screenshot.strict) == ("screenshot", False)
    assert (patch.name, patch.description, patch.schema, patch.strict) == (
        "apply_patch", "Patch files", None, None)
    assert (search.name, search.schema) == ("web_search", None)
    assert wiki.name == "mcp:deepwiki"


def test_strict_absent_is_the_apis_default_and_null_is_not_strict() -> None:
    """An absent `strict` is strict in the Responses API; LiteLLM's Chat-to-Responses bridge
    sends `strict: null` for a Chat tool without one, which OpenAI takes as not strict (it
    accepts the schemas strict mode refuses)."""
    function = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    assert ask({"input": [], "tools": [function]}).tools[0].strict is True
    assert ask({"input": [], "tools": [{**function, "strict": True}]}).tools[0].strict is True
    assert ask({"input": [], "tools": [{**function, "strict": None}]}).tools[0].strict is None
    assert ask({"input": [], "tools": [{**function, "strict": False}]}).tools[0].strict is False


def test_the_input_items_are_turns_in_order() -> None:
    turns = ask(REQUEST).turns
    assert [turn.role for turn in turns] == [
        "user", "assistant", "assistant", "assistant", "user", "assistant", "user", "assistant",
        "user", "user"]
    assert turns[0].parts == [
        Part("text", "What is in this picture? List the files."), inline_media("image", PNG),
        Part("image", digest="file:file-img"), url_media("document", PDF_URL),
        Part("document", digest="url:https://example.com/b.pdf")]
    assert turns[0].parts[3].kind == "document"
    assert turns[1].reasoning == [Reasoning("Look first.\n\nThen list.", signed=True)]
    assert turns[2].parts == [Part("text", "A cat. Listing.")]
    shell = turns[3].calls[0]
    assert (shell.name, shell.id, shell.arguments) == (
        "shell", "call_1", arguments_key({"workdir": "/w", "command": ["ls"]}))
    assert turns[4].results == [ToolResult("call_1", None, (Part("text", "a.txt\nb.txt"),), None)]
    assert turns[5].calls[0].arguments == arguments_key({})
    assert turns[6].results[0].parts == (Part("text", "the screen"), inline_media("image", PNG))
    patch = turns[7].calls[0]
    assert (patch.name, patch.id, patch.arguments) == (
        "apply_patch", "call_3", ("raw", "*** Begin Patch\n*** End Patch"))
    assert turns[8].results[0] == ToolResult("call_3", None, (Part("text", "Done!"),), None)
    assert turns[9].parts == [Part("text", "Thanks. Now summarize.")]


def test_a_string_input_is_one_user_turn_and_no_input_is_none() -> None:
    (turn,) = ask({"model": "m", "input": "Hi"}).turns
    assert (turn.role, turn.parts) == ("user", [Part("text", "Hi")])
    assert ask({"model": "m", "previous_response_id": "resp_1"}).turns == []


def test_reasoning_is_its_summary_else_its_content_and_signed_by_encrypted_content() -> None:
    def reasoning(item: dict[str, Any]) -> Reasoning:
        return ask({"input": [{"type": "reasoning", "id": "rs", **item}]}).turns[0].reasoning[0]

    assert reasoning({"summary": []}) == Reasoning("", signed=False)
    assert reasoning({"summary": [], "content": [{"type": "reasoning_text", "text": "raw"}]}
                     ) == Reasoning("raw", signed=False)
    assert reasoning({"summary": [{"type": "summary_text", "text": "s"}],
                      "content": [{"type": "reasoning_text", "text": "raw"}],
                      "encrypted_content": None}) == Reasoning("s", signed=False)
    assert reasoning({"summary": [], "encrypted_content": "e"}) == Reasoning("", signed=True)


@pytest.mark.parametrize(
    ("value", "meant"),
    [("none", ToolChoice("none")), ("auto", ToolChoice("auto")),
     ("required", ToolChoice("required")),
     ({"type": "function", "name": "shell"}, ToolChoice("function", "shell")),
     ({"type": "custom", "name": "apply_patch"}, ToolChoice("function", "apply_patch")),
     ({"type": "web_search_preview"}, ToolChoice("function", "web_search_preview")),
     ({"type": "mcp", "server_label": "deepwiki", "name": "ask"},
      ToolChoice("function", "mcp:deepwiki")),
     ({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "a"}]},
      ToolChoice("auto")),
     ({"type": "allowed_tools", "mode": "required",
       "tools": [{"type": "function", "name": "a"}, {"type": "image_generation"}]},
      ToolChoice("required")),
     ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "a"}]},
      ToolChoice("function", "a")),
     ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "image_generation"}]},
      ToolChoice("function", "image_generation")),
     (None, None)],
)
def test_tool_choice_on_the_asks_scale(value: Any, meant: ToolChoice | None) -> None:
    assert ask({"input": [], "tool_choice": value}).tool_choice == meant


@pytest.mark.parametrize(
    ("kind", "expected"),
    [({"type": "json_object"}, "json_object"), ({"type": "text"}, "text"), (None, None)],
)
def test_text_format_kinds(kind: dict[str, Any] | None, expected: str | None) -> None:
    read = ask({"input": [], "text": {"format": kind}}).response_format
    assert (read.kind if read else None) == expected


def test_responses_has_no_field_for_stop_seed_top_k_or_penalties() -> None:
    """The API reference has no stop sequences, seed or penalties: a body that sends them anyway
    asks nothing of them, and a gateway that drops them on the way to Responses loses nothing."""
    result = ask({"input": [], "stop": ["x"], "seed": 1, "top_k": 3, "frequency_penalty": 1.0,
                  "presence_penalty": 0})
    assert (result.stop, result.sampling) == (None, {})
    assert not {"stop", "sampling.seed", "sampling.top_k", "sampling.frequency_penalty",
                "sampling.presence_penalty", "reasoning.thinking", "reasoning.budget",
                "result.error"} & CARRIES
    chat = openai_chat_request.ask({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                    "stop": ["END"], "seed": 7, "temperature": 0})
    provider = ask({"model": "m", "input": "x", "temperature": 0})
    findings = compare_requests(chat, provider).findings
    assert [finding.code for finding in findings] == [Code.REQUEST_PART_UNSUPPORTED] * 2


def test_a_chat_request_translated_faithfully_reads_equal_but_for_strict() -> None:
    """A Chat request as a gateway sends it on to Responses: the system message as an input
    message, the call and its output as items, the tool flat. Tools, choice, history and limit
    are kept; `strict` is left out, which in Responses makes a tool strict: a client that asked
    for no strict tool gets one."""
    chat = {
        "model": "m", "max_tokens": 300, "stream": True, "tool_choice": "required",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "-3 C"},
        ],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": WEATHER}}],
    }
    responses = {
        "model": "m", "max_output_tokens": 300, "stream": True, "tool_choice": "required",
        "input": [
            {"type": "message", "role": "system",
             "content": [{"type": "input_text", "text": "Be brief."}]},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "function_call", "call_id": "c1", "name": "weather",
             "arguments": '{"city":"Oslo"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "-3 C"},
        ],
        "tools": [{"type": "function", "name": "weather", "description": "",
                   "parameters": WEATHER}],
    }
    comparison = compare_requests(openai_chat_request.ask(chat), ask(responses, "/v1/responses"))
    assert [(finding.code, finding.tool) for finding in comparison.findings] == [
        (Code.TOOL_STRICT_CHANGED, "weather")]


def test_a_responses_client_bridged_to_chat_without_strict_loses_its_strict_tools() -> None:
    """LiteLLM's Responses bridge sends a Responses function tool on as a Chat tool with no
    `strict`: the client's strict tool (the Responses default) is not strict any more."""
    client = ask({"model": "m", "input": "Weather?", "tools": [
        {"type": "function", "name": "weather", "parameters": {"type": "object"}}]})
    bridged = openai_chat_request.ask({"model": "m", "messages": [
        {"role": "user", "content": "Weather?"}], "tools": [{"type": "function", "function": {
            "name": "weather", "parameters": {"type": "object"}}}]})
    comparison = compare_requests(client, bridged)
    assert [finding.code for finding in comparison.findings] == [Code.TOOL_STRICT_CHANGED]
    assert comparison.verdict == "diverged"


class Files(BaseModel):
    names: list[str]
    total: int


def _sent(call: str, **create: Any) -> tuple[str, dict[str, Any]]:
    """The path and body the official SDK sends for `client.<call>(**create)`."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append((request.url.raw_path.decode(), json.loads(request.content)))
        return httpx2.Response(400, json={"error": {"message": "x", "type": "x"}})

    client = OpenAI(api_key="key", base_url="http://127.0.0.1:9/v1", max_retries=0,
                    http_client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    method: Any = client
    for name in call.split("."):
        method = getattr(method, name)
    with pytest.raises(Exception, match="400"):
        method(**create)
    return seen[0]


def test_the_sdks_structured_output_reads_alike_in_responses_and_chat() -> None:
    """`responses.parse(text_format=…)` sends the strict schema flat in `text.format`,
    `chat.completions.parse(response_format=…)` nested in `response_format.json_schema`: one
    response format."""
    path, body = _sent("responses.parse", model="gpt-5", input="List the files.",
                       text_format=Files)
    assert path == "/v1/responses" and body["text"]["format"]["type"] == "json_schema"
    _, chat = _sent("chat.completions.parse", model="gpt-5", response_format=Files,
                    messages=[{"role": "user", "content": "List the files."}])
    mine, theirs = ask(body, path), openai_chat_request.ask(chat)
    assert mine.response_format == theirs.response_format
    assert mine.response_format is not None and mine.response_format.strict is True
    assert [turn.parts for turn in mine.turns] == [turn.parts for turn in theirs.turns]


def test_the_sdks_create_body_reads_as_the_body_it_was_given() -> None:
    create = {key: REQUEST[key] for key in ("model", "instructions", "input", "tools",
                                            "tool_choice", "parallel_tool_calls", "text",
                                            "max_output_tokens", "temperature", "top_p",
                                            "reasoning", "stream")}
    path, body = _sent("responses.create", **create)
    assert read_ask(json.dumps(body).encode(), path) == ask(REQUEST)


@pytest.mark.parametrize(
    "request_body",
    [
        {"input": 5},
        {"input": [{"content": "no type, no role"}]},
        {"input": [{"type": "message", "role": "tool", "content": "x"}]},
        {"input": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]},
        {"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
        {"input": [{"role": "user", "content": {"type": "input_text"}}]},
        {"input": [], "tools": [{"type": "function", "parameters": {}}]},
        {"input": [], "tool_choice": 5},
        {"input": [], "tool_choice": {"type": "allowed_tools", "mode": "none", "tools": []}},
        {"input": [], "text": "json"},
        {"input": [], "text": {"format": {"type": "yaml"}}},
        {"input": [], "instructions": ["a"]},
        {"input": [], "max_output_tokens": "10"},
        {"input": [], "temperature": "hot"},
        {"input": [], "reasoning": "high"},
    ],
)
def test_a_body_that_is_no_responses_request_is_unreadable(request_body: dict[str, Any]) -> None:
    result = read_ask(json.dumps(request_body).encode(), "/v1/responses")
    assert not result.readable
    assert [finding.code for finding in result.findings] == [Code.REQUEST_UNREADABLE]
    assert result.dialect == "openai.responses"


def test_a_responses_path_or_shape_picks_this_reader() -> None:
    body = json.dumps({"model": "m", "input": "Hi"}).encode()
    assert read_ask(body, "/openai/v1/responses").dialect == "openai.responses"
    assert read_ask(body, None).dialect == "openai.responses"
    assert openai_responses.REQUEST.NAME == openai_responses.NAME


def test_a_wrong_or_missing_field_anywhere_is_unreadable_never_an_error() -> None:
    """Every field of a whole request, in turn, set to a value of each wrong type or taken out:
    the reader gives an Ask or says RequestUnreadable, and never fails in another way (which
    `read_ask` would have to catch for it)."""
    for _path, broken in damaged(REQUEST, removing=True):
        with contextlib.suppress(RequestUnreadable):
            ask(broken, "/v1/responses")
