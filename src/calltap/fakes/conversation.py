"""The conversations the request defects are written for: what an agent sends on its second turn.

`CONVERSATION_REQUEST` (Chat Completions) carries everything a request defect can lose, and
nothing a faithful relay or translation may change: a system message, a user question, the
assistant's earlier `weather` call and its tool result, a follow-up question; the `weather` tool
with an `enum` in its schema and the `clock` tool; a named `tool_choice`; `temperature: 0`; a
stream with usage. The provider answers it with one call, of `weather`, the function the choice
names; where the name is lost (`named-choice-required`, or Ollama, which has no tool choice) with
a call of each tool, as it answers `TOOLS_REQUEST`. `NONE_CHOICE_CONVERSATION_REQUEST` is the same
conversation with `tool_choice: "none"`, answered with text: what `drop-none-choice` is written
for.

`MESSAGES_CONVERSATION_REQUEST` is an Anthropic Messages conversation whose tool result carries an
image beside its text (the radar picture a `radar` tool returned). Chat Completions cannot say
that (a `tool` message's content is text), so this one is sent to `/v1/messages` untranslated;
the provider answers it with text that quotes the tool result.
"""

from __future__ import annotations

from typing import Any

from calltap.fakes.model import DEFAULT_MODEL
from calltap.fakes.provider import CLOCK_TOOL

PNG_PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG, base64: the smallest image a tool result can carry."""
MESSAGES_MODEL = "claude-sonnet-4-5"

UNIT_WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
"""The weather tool with a unit the model must pick from an `enum`."""

CONVERSATION_REQUEST: dict[str, Any] = {
    "model": DEFAULT_MODEL,
    "messages": [
        {"role": "system", "content": "Answer briefly; use the tools for facts."},
        {"role": "user", "content": "What is the weather in Taipei?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_weather_1",
                    "type": "function",
                    "function": {
                        "name": "weather",
                        "arguments": '{"city":"Taipei","unit":"celsius"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_weather_1", "content": "22 C, light rain"},
        {"role": "user", "content": "And in fahrenheit? What time is it in UTC?"},
    ],
    "tools": [UNIT_WEATHER_TOOL, CLOCK_TOOL],
    "tool_choice": {"type": "function", "function": {"name": "weather"}},
    "temperature": 0,
    "stream": True,
    "stream_options": {"include_usage": True},
}
"""A second turn in Chat Completions: history with a call and its result, an enum, a named tool
choice and `temperature: 0`."""

NONE_CHOICE_CONVERSATION_REQUEST: dict[str, Any] = {**CONVERSATION_REQUEST, "tool_choice": "none"}
"""The second turn with every call forbidden: the tools stay offered, the answer is text."""

RADAR_TOOL: dict[str, Any] = {
    "name": "radar",
    "description": "The latest rain radar picture of a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}

MESSAGES_CONVERSATION_REQUEST: dict[str, Any] = {
    "model": MESSAGES_MODEL,
    "max_tokens": 1024,
    "system": "Answer briefly; use the tools for facts.",
    "messages": [
        {"role": "user", "content": "Is it raining in Taipei right now?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look at the radar."},
                {"type": "tool_use", "id": "toolu_radar_1", "name": "radar",
                 "input": {"city": "Taipei"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_radar_1",
                    "content": [
                        {"type": "text", "text": "Radar for Taipei, 12:00 UTC"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": PNG_PIXEL,
                            },
                        },
                    ],
                }
            ],
        },
    ],
    "tools": [RADAR_TOOL],
    "stream": True,
}
"""An Anthropic Messages conversation whose tool result holds a picture beside its text."""
