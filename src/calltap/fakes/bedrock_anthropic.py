"""The fake provider's Anthropic models on Bedrock: `POST /model/{id}/invoke-with-response-stream`
and `POST /model/{id}/invoke`.

The request is an Anthropic Messages body as Bedrock takes it (AWS's "Anthropic Claude Messages
API" parameters page): `anthropic_version` (`bedrock-2023-05-31`) instead of `model`, which is in
the path, no `stream`, since the path says whether to stream, and the required `max_tokens`. It is
answered as `calltap.fakes.anthropic_messages` answers `/v1/messages`, the same events and the
same body, framed the way InvokeModelWithResponseStream frames them (the `ResponseStream` of
botocore's `bedrock-runtime` model): each Messages event is one AWS event stream `chunk` event
whose JSON payload is `{"bytes": <base64 of the event's JSON>}`, served as
`application/vnd.amazon.eventstream`. As Bedrock does, the `message_stop` event also carries
`amazon-bedrock-invocationMetrics` (input and output token counts, latencies). `/invoke` answers
the Messages body as JSON. A request that Bedrock would refuse is a 400 with Bedrock's
`{"message": "..."}` body.
"""

from __future__ import annotations

from typing import Any

from calltap.fakes import anthropic_messages, eventstream
from calltap.fakes.model import Answer

STREAM_PATH = "/model/{model}/invoke-with-response-stream"
PATH = "/model/{model}/invoke"
MEDIA_TYPE = "application/vnd.amazon.eventstream"
FIRST_BYTE_LATENCY_MS = 290
INVOCATION_LATENCY_MS = 412
"""The latencies in every answer's metrics: fixed, like the other dialects' timestamps."""


def chat_view(request: dict[str, Any]) -> dict[str, Any]:
    """The request in the fake model's Chat Completions terms; ValueError when Bedrock would
    reject it."""
    if not isinstance(request.get("anthropic_version"), str):
        raise ValueError("Malformed input request: #: required key [anthropic_version] not found")
    return anthropic_messages.chat_view(request)


def stream_events(reply: Answer, view: dict[str, Any]) -> list[bytes]:
    """The answer as `chunk` events, `message_stop` last; each item is one whole message."""
    payloads = anthropic_messages.stream_payloads(reply, view)
    payloads[-1] = {**payloads[-1], "amazon-bedrock-invocationMetrics": metrics(reply, view)}
    return [eventstream.chunk(payload) for payload in payloads]


def metrics(reply: Answer, view: dict[str, Any]) -> dict[str, int]:
    return {
        "inputTokenCount": reply.usage["prompt_tokens"],
        "outputTokenCount": anthropic_messages.output_tokens(reply, view),
        "invocationLatency": INVOCATION_LATENCY_MS,
        "firstByteLatency": FIRST_BYTE_LATENCY_MS,
    }


def json_body(reply: Answer, view: dict[str, Any]) -> bytes:
    """The answer as the Messages body `/invoke` returns."""
    return anthropic_messages.json_body(reply, view)
