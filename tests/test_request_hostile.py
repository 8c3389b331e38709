"""Hostile request bodies: `read_ask` never raises on one, and neither does comparing what it read.

A body that is not JSON, is over MAX_REQUEST_BYTES, is nested past what the decoder follows, has a
schema whose `$ref`s go round in a cycle or branch exponentially, or has a value of the wrong type
in any field, reads as REQUEST_UNREADABLE or as a bounded Ask; the comparison of two such Asks
(and of one with the well-formed request it was damaged from) gives a verdict. How long they take
is measured in `bench/compare_requests.py`, not here.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from calltap.ask import Ask, HistoryCall, ToolResult, Turn
from calltap.codes import Code
from calltap.compare_requests import compare_requests
from calltap.dialects.asks import MAX_REQUEST_BYTES, read_ask
from calltap.schemas import MAX_DEPTH, normalize, schema_key
from dialect_helpers import damaged

CHAT = "/v1/chat/completions"
PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(16))).decode()
SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "enum": ["a", "b"]},
                                           "days": {"$ref": "#/$defs/days"}},
          "required": ["city"], "$defs": {"days": {"type": "integer", "minimum": 1}}}
REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai.chat": (CHAT, {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
                {"type": "input_audio", "input_audio": {"data": PNG_B64, "format": "wav"}},
                {"type": "file", "file": {"file_data": PNG_B64, "filename": "a.pdf"}}]},
            {"role": "assistant", "content": None, "reasoning_content": "think",
             "thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "s"}],
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "weather", "arguments": '{"city": "a"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "31 C"},
            {"role": "function", "name": "weather", "content": "31 C"},
        ],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": SCHEMA,
                                                    "strict": True}}],
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "parallel_tool_calls": False,
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}},
        "max_completion_tokens": 100, "stop": ["END"], "temperature": 0, "top_p": 1, "seed": 0,
        "reasoning_effort": "low", "thinking": {"type": "enabled", "budget_tokens": 1024},
        "stream": True, "stream_options": {"include_usage": True},
    }),
    "anthropic.messages": ("/v1/messages", {
        "model": "claude-sonnet-4-5", "max_tokens": 100, "system": [{"type": "text", "text": "x"}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": PNG_B64}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "a"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "is_error": False,
                 "content": [{"type": "text", "text": "31 C"}]}]},
        ],
        "tools": [{"name": "weather", "input_schema": SCHEMA}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "thinking": {"type": "enabled", "budget_tokens": 1024}, "temperature": 0,
        "output_config": {"effort": "low", "format": {"type": "json_schema", "schema": SCHEMA}},
    }),
    "bedrock.converse": ("/model/anthropic.claude-v2/converse", {
        "system": [{"text": "x"}],
        "messages": [
            {"role": "user", "content": [{"text": "Weather?"}, {"image": {
                "format": "png", "source": {"bytes": PNG_B64}}}]},
            {"role": "assistant", "content": [
                {"reasoningContent": {"reasoningText": {"text": "t", "signature": "s"}}},
                {"toolUse": {"toolUseId": "c1", "name": "weather", "input": {"city": "a"}}}]},
            {"role": "user", "content": [{"toolResult": {
                "toolUseId": "c1", "status": "error", "content": [{"text": "31 C"},
                                                                   {"json": {"t": 31}}]}}]},
        ],
        "toolConfig": {"tools": [{"toolSpec": {"name": "weather",
                                               "inputSchema": {"json": SCHEMA}}}],
                       "toolChoice": {"tool": {"name": "weather"}}},
        "inferenceConfig": {"maxTokens": 100, "temperature": 0, "stopSequences": ["END"]},
        "additionalModelRequestFields": {"top_k": 5, "thinking": {"type": "enabled",
                                                                  "budget_tokens": 1024}},
    }),
    "google.gemini": ("/v1beta/models/gemini-2.5-flash:generateContent", {
        "systemInstruction": {"parts": [{"text": "x"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather?"}, {"inlineData": {
                "mimeType": "image/png", "data": PNG_B64}}]},
            {"role": "model", "parts": [
                {"text": "t", "thought": True, "thoughtSignature": "s"},
                {"functionCall": {"name": "weather", "args": {"city": "a"}, "id": "c1"}}]},
            {"role": "user", "parts": [{"functionResponse": {
                "name": "weather", "id": "c1", "response": {"result": "31 C"}}}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "weather", "parameters": {
            "type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                                 "allowedFunctionNames": ["weather"]}},
        "generationConfig": {"temperature": 0, "topK": 5, "maxOutputTokens": 100,
                             "responseMimeType": "application/json",
                             "responseSchema": {"type": "OBJECT"},
                             "thinkingConfig": {"thinkingBudget": 1024}},
    }),
    "ollama.chat": ("/api/chat", {
        "model": "qwen3", "stream": False, "think": True, "format": SCHEMA,
        "messages": [
            {"role": "user", "content": "Weather?", "images": [PNG_B64]},
            {"role": "assistant", "content": "", "thinking": "t", "tool_calls": [
                {"function": {"name": "weather", "arguments": {"city": "a"}}}]},
            {"role": "tool", "tool_name": "weather", "content": "31 C"},
        ],
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": SCHEMA}}],
        "options": {"temperature": 0, "top_k": 5, "num_predict": 100, "stop": ["END"]},
    }),
    "openai.responses": ("/v1/responses", {
        "model": "gpt-4o", "instructions": "x",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"},
                                         {"type": "input_image",
                                          "image_url": f"data:image/png;base64,{PNG_B64}"}]},
            {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "t"}],
             "encrypted_content": "e"},
            {"type": "function_call", "call_id": "c1", "name": "weather",
             "arguments": '{"city": "a"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "31 C"},
        ],
        "tools": [{"type": "function", "name": "weather", "parameters": SCHEMA, "strict": True}],
        "tool_choice": "required", "parallel_tool_calls": False, "temperature": 0,
        "max_output_tokens": 100, "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_schema", "name": "a", "schema": SCHEMA}},
    }),
}


def read(request: Any, path: str = CHAT) -> Ask:
    return read_ask(orjson.dumps(request), path)


def assert_compares(client: Ask, provider: Ask) -> None:
    """Comparing the two, either way round and each with itself, gives a verdict."""
    for pair in ((client, provider), (provider, client), (client, client),
                 (provider, provider)):
        assert compare_requests(*pair).verdict in ("equal", "diverged", "inconclusive")


def assert_unreadable(ask: Ask, reason: str) -> None:
    assert not ask.readable
    assert [finding.code for finding in ask.findings] == [Code.REQUEST_UNREADABLE]
    assert reason in (ask.findings[0].detail or "")


@pytest.mark.parametrize("dialect", sorted(REQUESTS))
def test_each_well_formed_request_reads_and_equals_itself(dialect: str) -> None:
    path, request = REQUESTS[dialect]
    ask = read(request, path)
    assert (ask.dialect, ask.readable, ask.findings) == (dialect, True, [])
    comparison = compare_requests(ask, read(request, path))
    assert (comparison.verdict, comparison.findings) == ("equal", [])


@pytest.mark.parametrize("dialect", sorted(REQUESTS))
def test_a_field_of_any_wrong_type_anywhere_reads_and_compares(dialect: str) -> None:
    """Every field, in turn, set to a value of each wrong type or taken out."""
    path, request = REQUESTS[dialect]
    whole = read(request, path)
    for _path, broken in damaged([request], removing=True):
        ask = read(broken[0], path)
        assert ask.readable or [f.code for f in ask.findings] == [Code.REQUEST_UNREADABLE]
        assert_compares(whole, ask)


@pytest.mark.parametrize("body", [
    b"", b" ", b"{", b"}", b"\xff\xfe\x00", b"null", b"[]", b"[{}]", b'"messages"', b"1",
    b"true", b'{"messages": [}', b'{"a": 1} {"b": 2}', b"NaN", b'{"x": 1e999}',
])
@pytest.mark.parametrize("path", [path for path, _ in REQUESTS.values()] + [None, "/other"])
def test_a_body_that_is_not_a_json_object_is_unreadable(body: bytes, path: str | None) -> None:
    ask = read_ask(body, path)
    assert not ask.readable
    assert [finding.code for finding in ask.findings] == [Code.REQUEST_UNREADABLE]
    assert_compares(read(REQUESTS["openai.chat"][1]), ask)


def test_a_body_over_the_limit_is_not_read() -> None:
    assert MAX_REQUEST_BYTES < 80 * 2**20
    content = "w" * (80 * 2**20)
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": content}]})
    ask = read_ask(body, CHAT)
    assert_unreadable(ask, "over the limit")
    assert_compares(ask, read(REQUESTS["openai.chat"][1]))


def nested(levels: int, kind: str, leaf: bytes = b"1") -> bytes:
    """`levels` arrays or objects one in another around `leaf`, as JSON text."""
    if kind == "array":
        return b"[" * levels + leaf + b"]" * levels
    return b'{"a":' * levels + leaf + b"}" * levels


def chat_body(*, content: bytes = b'"hi"', schema: bytes = b'{"type": "object"}',
              arguments: bytes = b'"{}"') -> bytes:
    return (b'{"model": "m", "messages": [{"role": "user", "content": ' + content + b'},'
            b'{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function":'
            b'{"name": "f", "arguments": ' + arguments + b'}}]},'
            b'{"role": "tool", "tool_call_id": "c1", "content": ' + content + b'}],'
            b'"tools": [{"type": "function", "function": {"name": "f", "parameters": '
            + schema + b"}}]}")


@pytest.mark.parametrize("kind", ["array", "object"])
def test_ten_thousand_levels_of_nesting_are_unreadable(kind: str) -> None:
    deep = nested(10_000, kind)
    for body in (chat_body(content=deep), chat_body(schema=nested(10_000, kind, b"{}")),
                 chat_body(arguments=deep)):
        ask = read_ask(body, CHAT)
        assert_unreadable(ask, "")
        assert_compares(ask, read(REQUESTS["openai.chat"][1]))


@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("levels", [100, 400, 900, 1000])
def test_nesting_the_decoder_follows_reads_and_compares(kind: str, levels: int) -> None:
    """Nested as deep as the decoder goes, in a message, a call's arguments (an object, and a JSON
    text), a schema's own keyword, a `const`, an `enum`, and the nesting of subschemas: an Ask
    (or REQUEST_UNREADABLE), which compares with itself, with a copy and with the plain request."""
    deep = nested(levels, kind)
    wrapped = b'{"type": "object", "properties": {"a": ' * (levels // 2)
    bodies = [
        chat_body(content=b'[{"type": "text", "text": "hi", "x": ' + deep + b"}]"),
        chat_body(arguments=deep),
        chat_body(arguments=orjson.dumps(deep.decode())),
        chat_body(schema=b'{"type": "object", "x-extra": ' + deep + b"}"),
        chat_body(schema=b'{"properties": {"a": {"const": ' + deep + b"}}}"),
        chat_body(schema=b'{"properties": {"a": {"enum": [1, ' + deep + b"]}}}"),
        chat_body(schema=wrapped + b'{"type": "string"}' + b"}}" * (levels // 2)),
        chat_body(schema=b'{"anyOf": [' * levels + b"{}" + b"]}" * levels),
    ]
    plain = read(REQUESTS["openai.chat"][1])
    for body in bodies:
        ask = read_ask(body, CHAT)
        assert ask.readable or [f.code for f in ask.findings] == [Code.REQUEST_UNREADABLE]
        assert_compares(ask, read_ask(body, CHAT))
        assert_compares(ask, plain)


def schema_body(schema: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}


CYCLES = {
    "the root": {"type": "object", "properties": {"self": {"$ref": "#"}}},
    "two definitions": {"$ref": "#/$defs/a",
                        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}},
    "a list of itself": {"$ref": "#/$defs/node", "$defs": {"node": {
        "type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"},
                                                            {"type": "null"}]}}}}},
    "a definition of itself": {"$defs": {"a": {"$ref": "#/$defs/a"}},
                               "properties": {"x": {"$ref": "#/$defs/a"}}},
    "through definitions": {"definitions": {"a": {"items": {"$ref": "#/definitions/a"}}},
                            "properties": {"x": {"$ref": "#/definitions/a"}}},
}
BRANCHING = {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": {
    **{f"d{n}": {"anyOf": [{"$ref": f"#/$defs/d{n + 1}"},
                           {"type": "array", "items": {"$ref": f"#/$defs/d{n + 1}"}}]}
       for n in range(40)},
    "d40": {"type": "string"}}}
"""Each definition uses the next twice: inlined in full it would hold 2**40 subschemas."""
UNRESOLVABLE = [
    {"$ref": "https://example.com/schema.json"}, {"$ref": "#/$defs/missing"},
    {"$ref": "#/$defs/a/b/c", "$defs": {"a": 5}}, {"$ref": 5}, {"$ref": "#", "$defs": 5},
    {"$ref": "other.json#/x"}, {"$ref": "#/properties/x", "properties": {"x": []}},
]


@pytest.mark.parametrize("name", sorted(CYCLES))
def test_a_ref_cycle_reads_to_a_recursive_reference_and_equals_itself(name: str) -> None:
    schema = CYCLES[name]
    ask = read(schema_body(schema))
    assert ask.readable
    assert "$recursive" in orjson.dumps(ask.tools[0].schema).decode()
    assert ask.tools[0].schema_key == schema_key(normalize(schema))
    assert_compares(ask, read(schema_body(schema)))
    assert compare_requests(ask, read(schema_body(schema))).verdict == "equal"


def test_refs_that_branch_at_every_level_are_not_inlined_past_a_bound() -> None:
    ask = read(schema_body(BRANCHING))
    assert ask.readable
    assert '"$ref"' in orjson.dumps(ask.tools[0].schema).decode()
    assert compare_requests(ask, read(schema_body(BRANCHING))).verdict == "equal"
    narrowed = {**BRANCHING, "$defs": {**BRANCHING["$defs"], "d0": {"type": "string"}}}
    assert compare_requests(ask, read(schema_body(narrowed))).verdict == "diverged"


@pytest.mark.parametrize("schema", UNRESOLVABLE)
def test_a_ref_that_cannot_be_resolved_stays_a_reference(schema: dict[str, Any]) -> None:
    ask = read(schema_body({"type": "object", "properties": {"x": schema}}))
    assert ask.readable
    assert_compares(ask, read(schema_body({"type": "object"})))


def test_subschemas_nested_past_the_bound_read_as_deep() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_DEPTH * 3):
        schema = {"type": "array", "items": schema}
    ask = read(schema_body(schema))
    assert '"$deep"' in orjson.dumps(ask.tools[0].schema).decode()
    assert_compares(ask, read(schema_body(schema)))


def test_absurd_types_at_the_top_are_unreadable() -> None:
    absurd = {"model": 5, "messages": {"role": "user"}, "tools": "weather", "tool_choice": 7,
              "temperature": "hot", "stop": 3, "response_format": [], "stream": "yes"}
    for path, _request in REQUESTS.values():
        ask = read(absurd, path)
        assert not ask.readable
        assert_compares(ask, ask)


def test_an_id_or_a_name_that_is_not_a_string_links_nothing() -> None:
    """In what the Chat Completions side reads, and in an Ask whatever reader made it."""
    request = REQUESTS["openai.chat"][1]
    messages = [*request["messages"][:3],
                {"role": "tool", "tool_call_id": ["c1"], "content": "31 C"},
                {"role": "function", "name": {"n": 1}, "content": "31 C"}]
    messages[2] = {**messages[2], "tool_calls": [{**messages[2]["tool_calls"][0], "id": {}}]}
    ask = read({**request, "messages": messages})
    assert ask.readable
    assert [call.id for turn in ask.turns for call in turn.calls] == [None]
    assert [(result.call_id, result.name) for turn in ask.turns for result in turn.results] == [
        (None, None), (None, None)]
    odd = Ask("openai.chat", turns=[
        Turn("user", parts=[]),
        Turn("assistant", calls=[HistoryCall("f", None, ["c1"])]),  # type: ignore[arg-type]
        Turn("user", results=[ToolResult({"c": 1}, ["f"], (), None)]),  # type: ignore[arg-type]
    ])
    assert_compares(odd, ask)
