"""Real loopback servers that stand in for a provider and a gateway: for the demo, tests and bench.

`FakeProvider` answers Chat Completions, Anthropic Messages (`/v1/messages`), OpenAI Responses
(`/v1/responses`), Ollama (`/api/chat`), Bedrock Converse (`/model/{id}/converse-stream`,
`/model/{id}/converse`), Anthropic on Bedrock (`/model/{id}/invoke-with-response-stream`,
`/model/{id}/invoke`) and Google Gemini (`…/models/{model}:streamGenerateContent`,
`:generateContent`, on the Gemini API's and Vertex AI's paths) deterministically (parallel tool
calls when tools are offered, text otherwise); `FakeGateway` relays to an upstream faithfully or
injects one of `DEFECTS` when a request carries `X-Fake-Gateway-Defect: <name>`, and translates
Chat Completions into any of those dialects, as LiteLLM does, when it carries
`X-Fake-Gateway-Translate: anthropic|responses|ollama|converse|gemini|bedrock-invoke`.
`TOOLS_REQUEST` is the request each stream defect's expectations are written for (the request
defects' are in `calltap.fakes.conversation`); `TEXT_REQUEST` asks for plain text.
"""

from calltap.fakes.defects import DEFECTS, FAITHFUL, Defect, defect_named
from calltap.fakes.gateway import DEFECT_HEADER, FakeGateway
from calltap.fakes.provider import CHAT_PATH, TEXT_REQUEST, TOOLS_REQUEST, Exchange, FakeProvider

__all__ = [
    "CHAT_PATH",
    "DEFECTS",
    "DEFECT_HEADER",
    "FAITHFUL",
    "TEXT_REQUEST",
    "TOOLS_REQUEST",
    "Defect",
    "Exchange",
    "FakeGateway",
    "FakeProvider",
    "defect_named",
]
