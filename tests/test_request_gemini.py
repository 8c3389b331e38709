"""The Gemini request side (Gemini API and Vertex AI): `GenerateContentRequest` bodies read to an
`Ask`.

Google's own SDK (`google-genai`) is the oracle for the wire shapes: it builds the bodies and
paths here over a transport that answers locally, for the Gemini API and for Vertex AI, and it
writes some fields in camelCase and others in snake_case within one body, which the reader must
take alike. The Chat Completions request side is the reference a faithful translation must read
equal to, by `compare_requests`.
"""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from calltap.ask import Part, Reasoning, ReasoningSettings, ResponseFormat, ToolChoice
from calltap.codes import Code
from calltap.compare_requests import compare_requests
from calltap.dialects import gemini, openai_chat_request
from calltap.dialects.asks import read_ask
from calltap.dialects.gemini_request import CARRIES, SCHEMA_LACKS, ask
from calltap.dialects.request_common import (
    RequestUnreadable,
    arguments_key,
    inline_media,
    url_media,
)
from calltap.schemas import normalize, schema_key
from dialect_helpers import damaged

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PNG_B64 = base64.b64encode(PNG).decode()
PATH = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
VERTEX = ("/v1/projects/p/locations/us-central1/publishers/google/models/"
          "gemini-2.5-flash:generateContent")
WEATHER = {"type": "OBJECT", "properties": {"city": {"type": "STRING"},
                                            "unit": {"type": "STRING", "nullable": True,
                                                     "enum": ["C", "F"]}},
           "required": ["city"], "propertyOrdering": ["city", "unit"]}
WEATHER_JSON = {"type": "object", "properties": {"city": {"type": "string"},
                                                 "unit": {"type": ["string", "null"],
                                                          "enum": ["C", "F"]}},
                "required": ["city"]}
CONTENTS: list[dict[str, Any]] = [
    {"role": "user", "parts": [
        {"text": "Weather here, and what is this?"},
        {"inlineData": {"mimeType": "image/png", "data": PNG_B64}},
        {"fileData": {"mimeType": "video/mp4", "fileUri": "gs://bucket/clip.mp4"}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.com/a.pdf"}},
    ]},
    {"role": "model", "parts": [
        {"text": "I should call both.", "thought": True, "thoughtSignature": "c2ln"},
        {"functionCall": {"name": "weather", "args": {"city": "Oslo"}, "id": "c1"},
         "thoughtSignature": "c2lnMg=="},
        {"functionCall": {"name": "clock", "args": {}}},
    ]},
    {"role": "user", "parts": [
        {"functionResponse": {"name": "weather", "id": "c1",
                              "response": {"output": {"temp": -3, "unit": "C"}}}},
        {"functionResponse": {"name": "clock", "response": {"error": "clock broke"},
                              "parts": [{"inlineData": {"mimeType": "image/png",
                                                        "data": PNG_B64}}]}},
    ]},
    {"role": "model", "parts": [{"text": "Cold, and a cat.", "thoughtSignature": "c2lnMw=="}]},
    {"parts": [{"text": "Thanks."}]},
]
REQUEST: dict[str, Any] = {
    "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use tools."}]},
    "contents": CONTENTS,
    "tools": [
        {"functionDeclarations": [
            {"name": "weather", "description": "Weather in a city", "parameters": WEATHER},
            {"name": "clock", "parametersJsonSchema": {"type": "object",
                                                       "additionalProperties": False}},
        ]},
        {"googleSearch": {}},
        {"code_execution": {}},
    ],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                             "allowedFunctionNames": ["weather", "clock"]}},
    "generationConfig": {
        "temperature": 0, "topP": 0.5, "topK": 0, "seed": 0, "presencePenalty": 0.0,
        "frequencyPenalty": 0.5, "maxOutputTokens": 1024, "stopSequences": ["END"],
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object", "properties": {"ok": {"const": True}}},
        "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True},
    },
}


def test_a_whole_gemini_request_reads_to_its_meaning() -> None:
    result = ask(REQUEST, PATH)
    assert (result.dialect, result.model, result.readable) == (
        "google.gemini", "gemini-2.5-pro", True)
    assert (result.stream, result.usage_requested) == (True, True)
    assert result.instructions == [Part("text", "Be brief."), Part("text", "Use tools.")]
    assert result.tool_choice == ToolChoice("required")
    assert result.parallel_tool_calls is None
    assert (result.max_output_tokens, result.stop) == (1024, ("END",))
    assert result.sampling == {"temperature": 0, "top_p": 0.5, "top_k": 0, "seed": 0,
                               "presence_penalty": 0.0, "frequency_penalty": 0.5}
    assert result.reasoning == ReasoningSettings(None, True, 2048)
    schema = {"type": ["object"], "properties": {"ok": {"enum": [True]}}}
    assert result.response_format == ResponseFormat("json_schema", schema, schema_key(schema))


def test_function_declarations_and_built_in_tools_are_read_by_name() -> None:
    weather, clock, search, code = ask(REQUEST, PATH).tools
    assert (weather.name, weather.description, weather.strict) == (
        "weather", "Weather in a city", None)
    assert weather.schema_key == schema_key(normalize(WEATHER_JSON))
    assert weather.raw_schema == WEATHER
    assert (clock.name, clock.schema) == ("clock", {"type": ["object"],
                                                    "additionalProperties": False})
    assert [(tool.name, tool.schema) for tool in (search, code)] == [
        ("googleSearch", None), ("codeExecution", None)]


def test_contents_are_turns_with_media_calls_results_and_reasoning() -> None:
    user, model, results, answer, last = ask(REQUEST, PATH).turns
    assert [turn.role for turn in (user, model, results, answer, last)] == [
        "user", "assistant", "user", "assistant", "user"]
    assert user.parts == [Part("text", "Weather here, and what is this?"),
                          inline_media("image", PNG),
                          Part("video", digest="url:gs://bucket/clip.mp4"),
                          Part("document", digest="url:https://example.com/a.pdf")]
    assert model.reasoning == [Reasoning("I should call both.", signed=True),
                               Reasoning("", signed=True)]
    assert [(call.name, call.arguments, call.id) for call in model.calls] == [
        ("weather", arguments_key({"city": "Oslo"}), "c1"), ("clock", arguments_key({}), None)]
    weather, clock = results.results
    assert (weather.call_id, weather.name, weather.is_error) == ("c1", "weather", None)
    assert weather.parts == (Part("text", '{"temp":-3,"unit":"C"}'),)
    assert (clock.call_id, clock.name, clock.is_error) == (None, "clock", True)
    assert clock.parts == (Part("text", "clock broke"), inline_media("image", PNG))
    assert answer.parts == [Part("text", "Cold, and a cat.")]
    assert answer.reasoning == [Reasoning("", signed=True)]
    assert last.parts == [Part("text", "Thanks.")]


def _snake(value: Any, *, keep: bool = False) -> Any:
    """A request in proto (snake_case) field names; arguments, responses and schemas as sent."""
    if isinstance(value, list):
        return [_snake(item, keep=keep) for item in value]
    if not isinstance(value, dict) or keep:
        return value
    return {"".join("_" + c.lower() if c.isupper() else c for c in key): _snake(
        item, keep=key in ("args", "response", "parameters", "parametersJsonSchema",
                           "responseJsonSchema")) for key, item in value.items()}


def test_snake_case_field_names_read_as_camel_case_ones() -> None:
    snake = _snake(REQUEST)
    assert "system_instruction" in snake and "function_declarations" in snake["tools"][0]
    assert snake["contents"][1]["parts"][1]["thought_signature"] == "c2lnMg=="
    assert ask(snake, PATH) == ask(REQUEST, PATH)


def test_a_single_part_object_stands_for_a_list_of_one() -> None:
    request = {"system_instruction": {"parts": {"text": "Be brief."}},
               "contents": [{"role": "user", "parts": {"text": "Hi"}}]}
    result = ask(request, PATH)
    assert (result.instructions, result.turns[0].parts) == (
        [Part("text", "Be brief.")], [Part("text", "Hi")])


@pytest.mark.parametrize(
    ("config", "meant"),
    [({"mode": "AUTO"}, ToolChoice("auto")), ({"mode": "VALIDATED"}, ToolChoice("auto")),
     ({"mode": "NONE"}, ToolChoice("none")), ({"mode": "ANY"}, ToolChoice("required")),
     ({"mode": "ANY", "allowedFunctionNames": ["a"]}, ToolChoice("function", "a")),
     ({"mode": "any", "allowed_function_names": ["a"]}, ToolChoice("function", "a")),
     ({"mode": "ANY", "allowedFunctionNames": ["a", "b"]}, ToolChoice("required")),
     ({"mode": "AUTO", "allowedFunctionNames": ["a"]}, ToolChoice("auto")),
     ({"mode": "MODE_UNSPECIFIED"}, None), ({}, None), (None, None)],
)
def test_the_function_calling_mode_on_the_asks_scale(
        config: dict[str, Any] | None, meant: ToolChoice | None) -> None:
    request = {"contents": [], "toolConfig": {"functionCallingConfig": config}}
    assert ask(request, PATH).tool_choice == meant


@pytest.mark.parametrize(
    ("thinking", "settings"),
    [({"thinkingBudget": 0}, ReasoningSettings(None, False, None)),
     ({"thinkingBudget": -1}, ReasoningSettings(None, True, None)),
     ({"thinking_budget": 512, "include_thoughts": False}, ReasoningSettings(None, True, 512)),
     ({"includeThoughts": True}, ReasoningSettings(None, True, None)),
     ({"includeThoughts": False}, ReasoningSettings()),
     ({"thinkingLevel": "HIGH"}, ReasoningSettings("high", None, None))],
)
def test_thinking_config(thinking: dict[str, Any], settings: ReasoningSettings) -> None:
    request = {"contents": [], "generationConfig": {"thinkingConfig": thinking}}
    assert ask(request, PATH).reasoning == settings


@pytest.mark.parametrize(
    ("config", "kind"),
    [({"responseMimeType": "application/json"}, "json_object"),
     ({"responseMimeType": "text/plain"}, "text"),
     ({"responseMimeType": "application/json", "responseSchema": WEATHER}, "json_schema"),
     ({}, None)],
)
def test_the_response_format(config: dict[str, Any], kind: str | None) -> None:
    read = ask({"contents": [], "generationConfig": config}, PATH).response_format
    assert (read.kind if read else None) == kind
    if kind == "json_schema":
        assert read is not None and read.schema_key == schema_key(normalize(WEATHER_JSON))


@pytest.mark.parametrize(
    ("response", "said"),
    [("plain", "plain"), ({"content": "31 C"}, "31 C"), ({"output": "31 C"}, "31 C"),
     ({"result": 31}, '{"result":31}'), ({}, "{}"), (None, "")],
)
def test_a_function_response_as_text(response: Any, said: str) -> None:
    part = {"functionResponse": {"name": "f", "response": response}}
    result = ask({"contents": [{"role": "user", "parts": [part]}]}, PATH).turns[0].results[0]
    assert result.parts == ((Part("text", said),) if said else ())
    assert result.is_error is None


def test_a_result_name_is_read_as_given_even_portkeys_filler() -> None:
    """Portkey up to 1.15.2 names a result `gateway-tool-filler-name` when the Chat tool message
    had no name: the reader keeps the name; linking it (or not) is the comparator's work."""
    part = {"functionResponse": {"name": "gateway-tool-filler-name",
                                 "response": {"content": "31 C"}}}
    (result,) = ask({"contents": [{"role": "user", "parts": [part]}]}, PATH).turns[0].results
    assert (result.name, result.call_id) == ("gateway-tool-filler-name", None)


def test_signatures_on_any_part_and_signature_only_parts_are_signed_reasoning() -> None:
    parts = [{"text": "visible", "thoughtSignature": "s1"}, {"thoughtSignature": "s2"},
             {"text": "", "thought": True}, {"executableCode": {"code": "1+1"}}]
    (turn,) = ask({"contents": [{"role": "model", "parts": parts}]}, PATH).turns
    assert turn.parts == [Part("text", "visible")]
    assert turn.reasoning == [Reasoning("", True), Reasoning("", True), Reasoning("", False)]


@pytest.mark.parametrize(
    ("path", "body_model", "model", "stream"),
    [(PATH, None, "gemini-2.5-pro", True), (VERTEX, None, "gemini-2.5-flash", False),
     ("/v1beta/models/tuned%2Fx:generateContent", None, "tuned/x", False),
     ("/v1/projects/p/locations/l/endpoints/123:streamGenerateContent", "models/m", "m", True),
     ("", "models/gemini-2.0-flash", "gemini-2.0-flash", None), ("", None, None, None)],
)
def test_the_model_and_streaming_come_from_the_path(
        path: str, body_model: str | None, model: str | None, stream: bool | None) -> None:
    request: dict[str, Any] = {"contents": []}
    if body_model:
        request["model"] = body_model
    result = ask(request, path)
    assert (result.model, result.stream) == (model, stream)


def _sent(vertex: bool, stream: bool, **call: Any) -> tuple[str, dict[str, Any]]:
    """The path and body Google's SDK sends for `models.generate_content(**call)`."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.raw_path.decode(), json.loads(request.content)))
        return httpx.Response(400, json={"error": {"code": 400, "message": "x",
                                                   "status": "INVALID_ARGUMENT"}})

    options = types.HttpOptions(base_url="http://127.0.0.1:9",
                                client_args={"transport": httpx.MockTransport(answer)})
    client = (genai.Client(vertexai=True, project="p", location="us-central1",
                           credentials=Credentials(token="t"), http_options=options)
              if vertex else genai.Client(api_key="key", http_options=options))
    with pytest.raises(Exception, match="400"):
        if stream:
            list(client.models.generate_content_stream(**call))
        else:
            client.models.generate_content(**call)
    return seen[0]


SDK_CALL: dict[str, Any] = {
    "model": "gemini-2.5-pro",
    "contents": [
        types.Content(role="user", parts=[types.Part(text="Weather here, and what is this?"),
                                          types.Part.from_bytes(data=PNG, mime_type="image/png"),
                                          types.Part.from_uri(file_uri="gs://bucket/clip.mp4",
                                                              mime_type="video/mp4")]),
        types.Content(role="model", parts=[
            types.Part(text="I should call both.", thought=True, thought_signature=b"sig"),
            types.Part(function_call=types.FunctionCall(name="weather", args={"city": "Oslo"},
                                                        id="c1"), thought_signature=b"sig2")]),
        types.Content(role="user", parts=[types.Part.from_function_response(
            name="weather", response={"output": {"temp": -3, "unit": "C"}})]),
    ],
    "config": types.GenerateContentConfig(
        system_instruction="Be brief.", temperature=0, top_p=0.5, top_k=3, seed=0,
        presence_penalty=0.0, max_output_tokens=1024, stop_sequences=["END"],
        response_mime_type="application/json",
        response_schema={"type": "OBJECT", "properties": {"ok": {"type": "BOOLEAN"}}},
        thinking_config=types.ThinkingConfig(thinking_budget=0),
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
            name="weather", description="Weather in a city", parameters_json_schema=WEATHER_JSON
        )]), types.Tool(google_search=types.GoogleSearch())],
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
            mode="ANY", allowed_function_names=["weather"])),
    ),
}


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini-api", "vertex-ai"])
@pytest.mark.parametrize("stream", [False, True])
def test_the_sdks_request_reads_to_what_it_was_asked(vertex: bool, stream: bool) -> None:
    """Google's SDK mixes spellings within one body (`inlineData` holding `mime_type`,
    `thinkingConfig` holding `thinking_budget`) and names the model in the path."""
    path, body = _sent(vertex, stream, **SDK_CALL)
    assert ("/projects/p/locations/us-central1/" in path) is vertex
    result = read_ask(json.dumps(body).encode(), path)
    assert (result.dialect, result.model, result.stream) == (
        "google.gemini", "gemini-2.5-pro", stream)
    assert result.instructions == [Part("text", "Be brief.")]
    user, model, results = result.turns
    assert user.parts[1:] == [inline_media("image", PNG),
                              Part("video", digest="url:gs://bucket/clip.mp4")]
    assert model.reasoning == [Reasoning("I should call both.", True), Reasoning("", True)]
    assert model.calls[0].arguments == arguments_key({"city": "Oslo"})
    assert results.results[0].parts == (Part("text", '{"temp":-3,"unit":"C"}'),)
    assert sorted(tool.name for tool in result.tools) == ["googleSearch", "weather"]
    weather = result.tool("weather")
    assert weather is not None and weather.schema_key == schema_key(normalize(WEATHER_JSON))
    assert result.tool_choice == ToolChoice("function", "weather")
    assert result.sampling == {"temperature": 0, "top_p": 0.5, "top_k": 3, "seed": 0,
                               "presence_penalty": 0}
    assert (result.max_output_tokens, result.stop) == (1024, ("END",))
    assert result.reasoning == ReasoningSettings(None, False, None)
    assert result.response_format is not None and result.response_format.kind == "json_schema"


CHAT: dict[str, Any] = {
    "model": "gemini-2.5-pro",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "Weather?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG_B64}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"},
    ],
    "tools": [{"type": "function", "function": {
        "name": "weather", "strict": True,
        "parameters": {**WEATHER_JSON, "additionalProperties": False}}}],
    "tool_choice": {"type": "function", "function": {"name": "weather"}},
    "parallel_tool_calls": False,
    "max_tokens": 300,
    "stop": ["END"],
}


GEMINI: dict[str, Any] = {
    "system_instruction": {"parts": [{"text": "Be brief."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Weather?"},
                                   {"inline_data": {"mime_type": "image/png", "data": PNG_B64}}]},
        {"role": "model", "parts": [{"function_call": {"name": "weather",
                                                       "args": {"city": "Oslo"}}}]},
        {"role": "user", "parts": [{"function_response": {"name": "weather",
                                                          "response": {"content": "-3 C"}}}]},
    ],
    "tools": [{"function_declarations": [{"name": "weather", "parameters": WEATHER_JSON}]}],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                             "allowed_function_names": ["weather"]}},
    "generationConfig": {"max_output_tokens": 300, "stop_sequences": ["END"]},
}


def test_a_chat_request_translated_to_gemini_loses_only_what_gemini_cannot_say() -> None:
    """As LiteLLM's `gemini/` route translates it: the forced function as ANY with one name,
    the result named after its call, `strict`, `additionalProperties` and
    `parallel_tool_calls: false` left out because Gemini has no field for them. That is no
    loss: every finding is REQUEST_PART_UNSUPPORTED and the requests compare equal."""
    comparison = compare_requests(openai_chat_request.ask(CHAT),
                                  ask(GEMINI, "/v1beta/models/gemini-2.5-pro:generateContent"))
    assert comparison.verdict == "equal"
    assert sorted(finding.detail.partition(":")[0] for finding in comparison.findings) == [
        "parallel_tool_calls", "schema", "strict"]
    assert {finding.code for finding in comparison.findings} == {Code.REQUEST_PART_UNSUPPORTED}


def test_what_gemini_cannot_carry() -> None:
    assert not {"parallel_tool_calls", "strict"} & CARRIES
    assert {"tool_choice.function", "sampling.seed", "sampling.top_k", "stop",
            "history.signature", "result.error", "reasoning.budget"} <= CARRIES
    assert "additionalProperties" in SCHEMA_LACKS
    assert not {"type", "properties", "required", "items", "enum", "anyOf", "minimum",
                "maxItems", "pattern", "format"} & SCHEMA_LACKS


def test_gemini_types_and_nullable_read_as_the_json_schema_they_mean() -> None:
    request = {"contents": [], "tools": [{"functionDeclarations": [
        {"name": "weather", "parameters": WEATHER}]}]}
    chat = openai_chat_request.ask({"messages": [], "tools": [
        {"type": "function", "function": {"name": "weather", "parameters": WEATHER_JSON}}]})
    assert ask(request, PATH).tools[0].schema_key == chat.tools[0].schema_key


def test_inline_data_is_the_same_media_as_a_chat_data_url() -> None:
    part = {"inlineData": {"mimeType": "image/png", "data": PNG_B64}}
    gemini_media = ask({"contents": [{"parts": [part]}]}, PATH).turns[0].parts
    chat_media = openai_chat_request.ask(CHAT).turns[0].parts[1:]
    assert gemini_media == chat_media == [url_media("image", "data:image/png;base64," + PNG_B64)]


@pytest.mark.parametrize(
    "request_body",
    [
        {},
        {"contents": {"role": "user"}},
        {"contents": ["Hi"]},
        {"contents": [{"role": "system", "parts": [{"text": "x"}]}]},
        {"contents": [{"role": "user", "parts": ["Hi"]}]},
        {"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]},
        {"contents": [{"role": "user", "parts": [{"inlineData": {"data": 5}}]}]},
        {"contents": [], "systemInstruction": "Be brief."},
        {"contents": [], "tools": [{"functionDeclarations": [{"description": "no name"}]}]},
        {"contents": [], "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}},
        {"contents": [], "generationConfig": {"topK": "3"}},
        {"contents": [], "generationConfig": {"maxOutputTokens": 1.5}},
        {"contents": [], "generationConfig": {"thinkingConfig": {"thinkingBudget": "0"}}},
        {"contents": [], "generationConfig": []},
    ],
)
def test_a_body_that_is_no_gemini_request_is_unreadable(request_body: dict[str, Any]) -> None:
    result = read_ask(json.dumps(request_body).encode(), PATH)
    assert not result.readable
    assert [finding.code for finding in result.findings] == [Code.REQUEST_UNREADABLE]
    assert result.dialect == "google.gemini"


def test_a_gemini_path_or_shape_picks_this_reader() -> None:
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}).encode()
    assert read_ask(body, VERTEX).dialect == "google.gemini"
    assert read_ask(body, None).dialect == "google.gemini"
    assert gemini.REQUEST.NAME == gemini.NAME


def test_a_wrong_or_missing_field_anywhere_is_unreadable_never_an_error() -> None:
    """Every field of a whole request, in turn, set to a value of each wrong type or taken out:
    the reader gives an Ask or says RequestUnreadable, and never fails in another way (which
    `read_ask` would have to catch for it)."""
    for _path, broken in damaged(REQUEST, removing=True):
        with contextlib.suppress(RequestUnreadable):
            ask(broken, PATH)
