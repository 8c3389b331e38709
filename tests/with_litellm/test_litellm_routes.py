"""calltap around LiteLLM's translating routes: `gemini/`, `ollama_chat/`, `bedrock/` (Converse)
and `bedrock/invoke/` (an Anthropic model on InvokeModel), with calltap's fake provider behind
calltap's back (each route's `api_base`; fake AWS credentials for the SigV4 signature).

On each route the back leg speaks the provider's dialect in its own framing (Gemini's SSE or one
JSON object, Ollama's NDJSON, Bedrock's binary event stream, Anthropic events inside it) and the
front leg Chat Completions. LiteLLM re-serializes every answer; a faithful pair must still compare
`equal`, with at most the cosmetic renumbering of calls on the Anthropic stream (its tool blocks
follow a text block). The tests check the route LiteLLM really took (the provider's path and the
request shape) so that a LiteLLM that changed route would not pass silently.

The requests are compared too: what the client asked (a forced tool, a conversation with an
image, tool calls and their results, structured output) must reach the provider on the
`anthropic/`, `gemini/`, `bedrock/` (Converse) and `openai/responses/` routes with no request
finding but a cosmetic one, each named (`test_what_the_client_asked_reaches_the_provider`), and
be answered alike (`test_what_the_client_asked_is_answered_alike`): structured output carried to
Claude as a forced `json_tool_call` tool is answered by a call of it, which LiteLLM hands the client
as its message text, and compares so.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from litellm_stack import (
    ANTHROPIC_MODEL,
    ASKED,
    BEDROCK_MODEL_ID,
    CLOCK,
    CONVERSE_MODEL,
    GEMINI_CURRENT_MODEL,
    GEMINI_MODEL,
    INDEXES_RENUMBERED,
    INVOKE_MODEL,
    OLLAMA_MODEL,
    PARALLEL_CALLS,
    RESPONSES_MODEL,
    STREAM,
    TURNS,
    WEATHER,
    Stack,
    question,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

GEMINI_BASE = "/v1beta/models/gemini-2.0-flash"


def upstream_request(stack: Stack, request_id: str) -> dict[str, Any]:
    (path,) = stack.tap.recordings.glob(f"*/{request_id}/upstream.request")
    return orjson.loads(path.read_bytes())


async def parallel_calls(stack: Stack, request_id: str, model: str, stream: bool) -> Any:
    sent = await stack.chat(request_id, model=model, messages=question(),
                            tools=[WEATHER, CLOCK], **(STREAM if stream else {}))
    assert sent.reply.calls() == PARALLEL_CALLS
    assert sent.reply.finish_reason == "tool_calls"
    return sent


@pytest.mark.parametrize(
    ("stream", "path", "framing"),
    [(True, f"{GEMINI_BASE}:streamGenerateContent", "sse"),
     (False, f"{GEMINI_BASE}:generateContent", "json")],
    ids=["stream", "json"],
)
async def test_gemini_route_is_equal(forwarding: Stack, stream: bool, path: str,
                                     framing: str) -> None:
    request_id = f"route-gemini-{framing}"
    sent = await parallel_calls(forwarding, request_id, GEMINI_MODEL, stream)

    forwarding.expect_faithful(sent, pairing="header", upstream_path=path,
                               upstream_dialect="google.gemini")
    assert sent.pair["comparison"]["upstream"]["framing"] == framing
    upstream = sent.pair["legs"]["upstream"]
    assert upstream["request_headers"]["x-goog-api-key"] == "[redacted]"
    request = upstream_request(forwarding, request_id)
    (tool,) = request["tools"]
    declarations = tool.get("function_declarations") or tool.get("functionDeclarations")
    assert [declaration["name"] for declaration in declarations] == ["weather", "clock"]


@pytest.mark.parametrize(("stream", "framing"), [(True, "ndjson"), (False, "json")],
                         ids=["stream", "json"])
async def test_ollama_chat_route_is_equal(forwarding: Stack, stream: bool, framing: str) -> None:
    request_id = f"route-ollama-{framing}"
    sent = await parallel_calls(forwarding, request_id, OLLAMA_MODEL, stream)

    forwarding.expect_faithful(sent, pairing="header", upstream_path="/api/chat",
                               upstream_dialect="ollama.chat")
    assert sent.pair["comparison"]["upstream"]["framing"] == framing
    request = upstream_request(forwarding, request_id)
    assert (request["model"], request["stream"]) == ("llama3.1", stream)


@pytest.mark.parametrize(
    ("stream", "suffix", "framing"),
    [(True, "converse-stream", "eventstream"), (False, "converse", "json")],
    ids=["stream", "json"],
)
async def test_bedrock_converse_route_is_equal(forwarding: Stack, stream: bool, suffix: str,
                                               framing: str) -> None:
    request_id = f"route-converse-{framing}"
    sent = await parallel_calls(forwarding, request_id, CONVERSE_MODEL, stream)

    forwarding.expect_faithful(sent, pairing="header",
                               upstream_path=f"/model/{BEDROCK_MODEL_ID}/{suffix}",
                               upstream_dialect="bedrock.converse")
    assert sent.pair["comparison"]["upstream"]["framing"] == framing
    headers = sent.pair["legs"]["upstream"]["request_headers"]
    assert headers["authorization"] == "[redacted]", "LiteLLM signs with SigV4"
    assert "x-amz-date" in headers
    request = upstream_request(forwarding, request_id)
    names = [tool["toolSpec"]["name"] for tool in request["toolConfig"]["tools"]]
    assert names == ["weather", "clock"]


@pytest.mark.parametrize(
    ("stream", "suffix", "framing", "cosmetic"),
    [(True, "invoke-with-response-stream", "eventstream", INDEXES_RENUMBERED),
     (False, "invoke", "json", frozenset())],
    ids=["stream", "json"],
)
async def test_bedrock_invoke_anthropic_route_is_equal(
    forwarding: Stack, stream: bool, suffix: str, framing: str, cosmetic: frozenset[str]
) -> None:
    request_id = f"route-invoke-{framing}"
    sent = await parallel_calls(forwarding, request_id, INVOKE_MODEL, stream)

    forwarding.expect_faithful(sent, pairing="header",
                               upstream_path=f"/model/{BEDROCK_MODEL_ID}/{suffix}",
                               upstream_dialect="anthropic.messages", cosmetic=cosmetic)
    assert sent.pair["comparison"]["upstream"]["framing"] == framing
    request = upstream_request(forwarding, request_id)
    assert request["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in request
    assert [tool["name"] for tool in request["tools"]] == ["weather", "clock"]


@pytest.mark.parametrize("model", [GEMINI_MODEL, OLLAMA_MODEL, CONVERSE_MODEL, INVOKE_MODEL])
async def test_streamed_text_is_equal_on_every_route(forwarding: Stack, model: str) -> None:
    sent = await forwarding.chat(f"route-text-{model}", model=model,
                                 messages=question("Say something."), **STREAM)

    assert sent.reply.text and sent.reply.finish_reason == "stop"
    comparison = sent.pair["comparison"]
    assert comparison["verdict"] == "equal", comparison
    assert comparison["findings"] == []
    assert forwarding.log.lines("divergence", f"route-text-{model}") == []


ASKING_ROUTES = {
    "anthropic": (ANTHROPIC_MODEL, "anthropic.messages"),
    "gemini": (GEMINI_CURRENT_MODEL, "google.gemini"),
    "converse": (CONVERSE_MODEL, "bedrock.converse"),
    "responses": (RESPONSES_MODEL, "openai.responses"),
}
COSMETIC_ASKED: dict[tuple[str, str], set[tuple[str, str]]] = {}
"""The cosmetic request findings each route and request may have, by code and detail."""
ROUTE_CASES = [pytest.param(route, case, id=f"{route}-{case}")
               for route in ASKING_ROUTES for case in ASKED]
"""Every request of ASKED on every route of ASKING_ROUTES."""


@pytest.mark.parametrize(("route", "case"), ROUTE_CASES)
async def test_what_the_client_asked_reaches_the_provider(forwarding: Stack, route: str,
                                                          case: str) -> None:
    model, dialect = ASKING_ROUTES[route]
    request_id = f"asked-{route}-{case}"
    await forwarding.chat(request_id, model=model, **ASKED[case], **STREAM)

    (pair,) = [pair for pair in forwarding.pair_files() if pair["request_id"] == request_id]
    requests = pair["comparison"]["requests"]
    assert (requests["downstream"]["dialect"], requests["upstream"]["dialect"]) == (
        "openai.chat", dialect)
    assert requests["downstream"]["turns"] == TURNS[case]
    assert requests["verdict"] == "equal", requests["findings"]
    said = {(f["code"], f["detail"]) for f in requests["findings"]}
    assert said == COSMETIC_ASKED.get((route, case), set()), requests["findings"]
    assert {f["severity"] for f in requests["findings"]} <= {"cosmetic"}
    assert [line for line in forwarding.log.lines("divergence", request_id)
            if line["side"] == "request"] == []


COSMETIC_ANSWERS = {("anthropic", "conversation"): INDEXES_RENUMBERED,
                    ("converse", "structured"): {"FINISH_REASON_CHANGED"}}
"""What each answer may say besides `equal`. The Anthropic answer to the conversation starts with a
text block: its calls are renumbered (cosmetic). The Converse answer to structured output is the
stand-in's call, which LiteLLM hands the client as text but with `finish_reason: "tool_calls"`
(its Anthropic route says `stop`): a client that follows `tool_calls` finds none to run, so
FINISH_REASON_CHANGED (tool_calls read as the stop it stands for -> tool_calls) is a finding."""


@pytest.mark.parametrize(("route", "case"), ROUTE_CASES)
async def test_what_the_client_asked_is_answered_alike(forwarding: Stack, route: str,
                                                       case: str) -> None:
    """The same requests, the answers' side: only cosmetic findings."""
    model, _ = ASKING_ROUTES[route]
    request_id = f"answered-{route}-{case}"
    sent = await forwarding.chat(request_id, model=model, **ASKED[case], **STREAM)

    answers = {f["code"] for f in sent.pair["comparison"]["findings"] if f["side"] != "request"}
    assert answers == COSMETIC_ANSWERS.get((route, case), frozenset()), sent.pair["comparison"]
