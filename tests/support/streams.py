"""The chat bytes the scripted provider answers with and the requests the tests send."""

from __future__ import annotations

from typing import Any

import orjson


def chat_stream(text: str = "Hello there", tool_calls: int = 2, marker: str = "a") -> bytes:
    """A deterministic OpenAI chat stream: some text, `tool_calls` parallel calls in fragments,
    finish reason, usage, [DONE]."""
    base = {
        "id": f"chatcmpl-{marker}",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
    }

    def event(choices: list[Any], **extra: Any) -> bytes:
        return b"data: " + orjson.dumps({**base, "choices": choices, **extra}) + b"\n\n"

    out = [event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    for word in text.split(" "):
        out.append(event([{"index": 0, "delta": {"content": word + " "}}]))
    for index in range(tool_calls):
        out.append(
            event(
                [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": f"call_{marker}{index}",
                                    "type": "function",
                                    "function": {"name": f"tool_{index}", "arguments": ""},
                                }
                            ]
                        },
                    }
                ]
            )
        )
        for fragment in ('{"city": ', f'"Paris{index}"', "}"):
            out.append(
                event(
                    [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": index, "function": {"arguments": fragment}}
                                ]
                            },
                        }
                    ]
                )
            )
    reason = "tool_calls" if tool_calls else "stop"
    out.append(event([{"index": 0, "delta": {}, "finish_reason": reason}]))
    out.append(event([], usage={"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def chat_request(content: str = "What is the weather?", stream: bool = True) -> bytes:
    return orjson.dumps(
        {
            "model": "gpt-test",
            "stream": stream,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": content},
            ],
            "tools": [
                {"type": "function", "function": {"name": f"tool_{i}", "parameters": {}}}
                for i in range(2)
            ],
        }
    )
