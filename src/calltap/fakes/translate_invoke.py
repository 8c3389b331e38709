"""Chat Completions to an Anthropic model on Bedrock's InvokeModel and back, as LiteLLM's
`bedrock/invoke/` route does.

The request is the Anthropic Messages request of `translate_request.to_messages` in Bedrock's
form (LiteLLM's `AmazonAnthropicClaudeConfig`): `anthropic_version: "bedrock-2023-05-31"` added,
`model` and `stream` left out, since the path holds both:
`/model/{model}/invoke-with-response-stream` for a stream, `/model/{model}/invoke` else.

The answer is Messages events inside AWS event stream `chunk` messages (each `{"bytes": base64}`),
which `FromInvoke` unwraps and hands to `translate.FromMessages`; a whole body is a Messages body.
An `exception` message is passed on as an error.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any
from urllib.parse import quote

import orjson

from calltap.fakes.defects import Payload

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"


def to_invoke(messages_request: dict[str, Any]) -> dict[str, Any]:
    """A Messages request as the body InvokeModel takes for an Anthropic model."""
    body = {key: value for key, value in messages_request.items() if key not in ("model", "stream")}
    return {"anthropic_version": BEDROCK_ANTHROPIC_VERSION, **body}


def invoke_path(chat: dict[str, Any]) -> str:
    """`invoke-with-response-stream` or `invoke` by the client's `stream`, the model id quoted."""
    model = quote(str(chat.get("model")), safe="")
    suffix = "invoke-with-response-stream" if chat.get("stream") is True else "invoke"
    return f"/model/{model}/{suffix}"


def unwrap(payload: Payload) -> Payload | None:
    """The Messages event a `chunk` message carries; an error as it is; None for anything else
    (another event type, bytes that are not base64 JSON)."""
    if not isinstance(payload, dict):
        return None
    if "error" in payload:
        return {"type": "error", "error": payload["error"]}
    chunk = payload.get("chunk")
    if not isinstance(chunk, dict) or not isinstance(chunk.get("bytes"), str):
        return None
    try:
        event = orjson.loads(base64.b64decode(chunk["bytes"], validate=True))
    except (binascii.Error, orjson.JSONDecodeError):
        return None
    return event if isinstance(event, dict) else None
