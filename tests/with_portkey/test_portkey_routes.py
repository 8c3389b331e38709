"""calltap around Portkey 1.15.2's chat routes, pairing by header: `openai`, `anthropic`, `google`
(Gemini) and `bedrock` (Converse), streamed and whole, each answered with two parallel tool calls
by calltap's fake provider behind calltap's back (`x-portkey-custom-host`).

Portkey re-serializes every answer (its own chunk ids, `provider` field, `created`); on the OpenAI,
Anthropic and Bedrock routes the meaning survives and the pair is `equal` (Anthropic's calls,
which follow a text block at index 0 upstream, are renumbered from 0: cosmetic). Its Google route
does not: `finishReason: STOP` after function calls reaches the client as `finish_reason: "stop"`
(the client is told the turn ended, with two calls in hand), its streams never end with
`data: [DONE]`, and parallel calls that Gemini streams one per chunk all reach the client at
tool-call index 0, merged into one (README.md in this folder traces each to the release's
source). The tests check the provider path Portkey really called, so a release that changed
route would not pass silently.

The requests are compared too (`test_what_the_client_asked_reaches_the_provider`): a forced
tool, a conversation with an image, tool calls and their results, and structured output. Most
reach the provider with no request finding but a cosmetic one, each named; where 1.15.2 changes
the request, the test names the change (README.md traces each to the release's source):
structured output is dropped on the Anthropic and Bedrock routes, and on the Google route an
assistant turn's text beside its calls is dropped and each tool result is named
`gateway-tool-filler-name` instead of its function.
"""

from __future__ import annotations

import pytest
from portkey_stack import ROUTES, Sent, Stack, parsed
from tests.with_litellm.litellm_stack import (
    ASKED,
    CLOCK,
    INDEXES_RENUMBERED,
    PARALLEL_CALLS,
    STREAM,
    TURNS,
    WEATHER,
    question,
)

from calltap.fakes.variants import GEMINI_CALLS_HEADER, SPLIT_HEADER

pytestmark = pytest.mark.asyncio(loop_scope="module")

FRAMINGS = {"openai": ("sse", "json"), "anthropic": ("sse", "json"),
            "google": ("json", "json"), "bedrock": ("eventstream", "json")}
"""The upstream leg's framing, streamed and whole: Portkey asks Gemini for
`:streamGenerateContent` without `alt=sse`, so the stream is one JSON array."""
COSMETIC = {"openai": frozenset(), "anthropic": INDEXES_RENUMBERED, "bedrock": frozenset()}


async def parallel_calls(stack: Stack, route: str, stream: bool, request_id: str) -> object:
    return await stack.chat(route, request_id, messages=question(), tools=[WEATHER, CLOCK],
                            **(STREAM if stream else {}))


def kind(stream: bool) -> str:
    return "stream" if stream else "json"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("route", ["openai", "anthropic", "bedrock"])
async def test_parallel_tool_calls_are_equal(forwarding: Stack, route: str, stream: bool) -> None:
    request_id = f"route-{route}-{kind(stream)}"
    sent = await parallel_calls(forwarding, route, stream, request_id)

    assert sent.reply.calls() == PARALLEL_CALLS
    assert sent.reply.finish_reason == "tool_calls"
    assert sent.reply.usage is not None and sent.reply.usage["completion_tokens"] > 0
    forwarding.expect_equal(sent, route, stream=stream, pairing="header",
                            cosmetic=COSMETIC[route])
    comparison = sent.pair["comparison"]
    assert comparison["upstream"]["framing"] == FRAMINGS[route][0 if stream else 1]
    assert (comparison["upstream"]["tool_calls"], comparison["downstream"]["tool_calls"]) == (2, 2)
    forwarded = sent.pair["legs"]["upstream"]["request_headers"]
    assert forwarded["x-request-id"] == request_id
    assert forwarded["traceparent"].startswith("00-"), "calltap's front adds a traceparent"
    if stream:
        assert forwarding.leg_file(sent, "downstream").endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_bedrock_api_key_auth_skips_sigv4(forwarding: Stack, stream: bool) -> None:
    """`x-portkey-aws-auth-type: apiKey`: Portkey sends the client's key as a bearer token and
    signs nothing, so no AWS credentials are needed to run the route."""
    sent = await parallel_calls(forwarding, "bedrock", stream, f"bedrock-auth-{kind(stream)}")

    headers = sent.pair["legs"]["upstream"]["request_headers"]
    assert headers["authorization"] == "[redacted]"
    assert "x-amz-date" not in headers and "x-amz-content-sha256" not in headers
    request = forwarding.provider.exchange_for(sent.request_id).request_headers
    assert request["Authorization"] == f"Bearer {forwarding.client.api_key}"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_gemini_calls_reach_the_client_as_stop(forwarding: Stack, stream: bool) -> None:
    """Both calls arrive, but `finish_reason` says `stop`: a client that runs tools on
    `tool_calls` ends the turn instead. The stream also lacks its `data: [DONE]`."""
    request_id = f"route-google-{kind(stream)}"
    sent = await parallel_calls(forwarding, "google", stream, request_id)

    assert sent.reply.calls() == PARALLEL_CALLS
    assert sent.reply.finish_reason == "stop"
    codes = {"FINISH_REASON_CHANGED", "DONE_MISSING"} if stream else {"FINISH_REASON_CHANGED"}
    forwarding.expect_diverged(sent, codes)
    pair = sent.pair
    assert pair["pairing"] == "header"
    upstream = pair["legs"]["upstream"]
    assert upstream["path"] == ROUTES["google"].path(stream)
    assert upstream["query"] == "key=[redacted]", "the key is in the URL, and never on disk"
    assert pair["comparison"]["upstream"]["framing"] == FRAMINGS["google"][0 if stream else 1]
    assert pair["comparison"]["upstream"]["findings"] == []
    downstream = forwarding.leg_file(sent, "downstream")
    assert b"[DONE]" not in downstream
    assert b'"finish_reason":"stop"' in downstream


@pytest.mark.parametrize("route", ["openai", "anthropic", "bedrock"])
async def test_streamed_text_is_equal(forwarding: Stack, route: str) -> None:
    sent = await forwarding.chat(route, f"text-{route}", messages=question("Say something."),
                                 **STREAM)

    assert sent.reply.text and sent.reply.finish_reason == "stop"
    forwarding.expect_equal(sent, route, stream=True, pairing="header")


async def test_gemini_streamed_text_lacks_only_done(forwarding: Stack) -> None:
    """A text answer keeps its finish reason (`STOP` is `stop`); only `[DONE]` is missing."""
    sent = await forwarding.chat("google", "text-google", messages=question("Say something."),
                                 **STREAM)

    assert sent.reply.text and sent.reply.finish_reason == "stop"
    (finding,) = forwarding.expect_diverged(sent, {"DONE_MISSING"})
    assert (finding["side"], finding["severity"]) == ("downstream", "fatal")


async def test_gemini_calls_streamed_apart_merge_into_one(forwarding: Stack) -> None:
    """Gemini may stream parallel calls one per chunk, each its chunk's `parts[0]`. Portkey numbers
    a call by its place in its chunk, so both reach the client at `index` 0 with their own ids:
    the openai SDK merges them into one call named `weatherclock` with two JSON objects for
    arguments, and the clock call is gone."""
    sent = await forwarding.chat("google", "google-calls-apart", messages=question(),
                                 tools=[WEATHER, CLOCK], extra={GEMINI_CALLS_HEADER: "apart"},
                                 **STREAM)

    assert sent.reply.tool_calls == {
        0: {"name": "weatherclock", "arguments": '{"city":"Taipei"}{"zone":"UTC"}'}}
    assert sent.reply.finish_reason == "stop"
    findings = forwarding.expect_diverged(sent, {
        "TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED", "TOOL_CALL_ARGUMENTS_CHANGED",
        "TOOL_CALL_ID_CONFLICT", "TOOL_ARGUMENTS_INVALID", "FINISH_REASON_CHANGED",
        "DONE_MISSING"})
    (dropped,) = [f for f in findings if f["code"] == "TOOL_CALLS_DROPPED"]
    assert (dropped["side"], dropped["count"]) == ("downstream", 1)
    assert sent.pair["comparison"]["upstream"]["findings"] == []
    assert sent.pair["comparison"]["upstream"]["tool_calls"] == 2
    deltas = [call for payload in parsed(forwarding.leg_file(sent, "downstream"))
              for choice in payload["choices"] for call in choice["delta"].get("tool_calls", ())]
    assert [(call["index"], call["function"]["name"]) for call in deltas] == [
        (0, "weather"), (0, "clock")]
    assert deltas[0]["id"] != deltas[1]["id"]


async def test_bedrock_read_boundary_inside_a_length_prefix_empties_the_stream(
    forwarding: Stack,
) -> None:
    """Portkey's event-stream reader takes a frame's length from the first 4 bytes of whatever
    it holds, even when a network read ended before all 4 arrived: it then parses an empty
    payload, throws, and closes the client's stream as if it had ended. Each event here reaches
    it in two reads, 2 bytes then the rest (how many events get through first depends on how
    the reads coalesce on the way; usually none, and the client gets HTTP 200 with an empty
    body): the client never sees both calls, a finish reason or `[DONE]`."""
    sent = await parallel_calls_split(forwarding, "bedrock-split-2", 2)

    assert len(sent.reply.tool_calls) < 2 and sent.reply.finish_reason is None
    downstream = forwarding.leg_file(sent, "downstream")
    assert b"[DONE]" not in downstream and b"finish_reason\":\"tool_calls" not in downstream
    assert sent.pair["legs"]["downstream"]["status"] == 200
    comparison = sent.pair["comparison"]
    assert comparison["verdict"] == "diverged"
    assert {"DONE_MISSING", "USAGE_MISSING"} <= forwarding.codes(sent)
    assert forwarding.codes(sent) & {"CHOICE_DROPPED", "TOOL_CALLS_DROPPED"}
    assert (comparison["upstream"]["tool_calls"], comparison["upstream"]["findings"]) == (2, [])
    assert "Error during stream processing: bedrock SyntaxError" in forwarding.portkey.log_tail()


async def test_bedrock_read_boundary_after_the_length_prefix_is_equal(forwarding: Stack) -> None:
    """The same answer in reads that end 4 bytes into each event: the length is whole, and
    Portkey waits for the rest of the frame."""
    sent = await parallel_calls_split(forwarding, "bedrock-split-4", 4)

    assert sent.reply.calls() == PARALLEL_CALLS
    forwarding.expect_equal(sent, "bedrock", stream=True, pairing="header")


async def parallel_calls_split(stack: Stack, request_id: str, at: int) -> Sent:
    return await stack.chat("bedrock", request_id, messages=question(), tools=[WEATHER, CLOCK],
                            extra={SPLIT_HEADER: str(at)}, **STREAM)


@pytest.mark.parametrize(("route", "raw"),
                         [("anthropic", "tool_use"), ("bedrock", "tool_use"), ("google", "STOP")])
async def test_strict_compliance_off_passes_provider_finish_reasons(
    forwarding: Stack, route: str, raw: str
) -> None:
    """`x-portkey-strict-open-ai-compliance: false` (strict is the default) hands the provider's
    own finish reason to an OpenAI client (`transformFinishReason` in src/providers/utils.ts
    maps it only when strict): the client waits for `tool_calls` and reads `tool_use`."""
    sent = await forwarding.chat(route, f"loose-{route}", messages=question(),
                                 tools=[WEATHER, CLOCK],
                                 extra={"x-portkey-strict-open-ai-compliance": "false"})

    assert sent.reply.calls() == PARALLEL_CALLS
    assert sent.reply.finish_reason == raw
    (changed,) = [f for f in forwarding.expect_diverged(sent, {"FINISH_REASON_CHANGED"}
                                                         | set(COSMETIC.get(route, ())))
                  if f["code"] == "FINISH_REASON_CHANGED"]
    assert changed["detail"].endswith(f"-> {raw}")


SCHEMA_UNSAID = ("REQUEST_PART_UNSUPPORTED",
                 "response_format: schema keywords the provider cannot say")
"""Gemini's schema subset has no `additionalProperties`: cosmetic."""
FORMAT_DROPPED = ("RESPONSE_FORMAT_CHANGED", "json_schema -> text")
"""1.15.2 maps no `response_format` to Anthropic (`output_format`) or Converse
(`outputConfig.textFormat`): the model is not told the answer's schema."""
ASKED_FINDINGS: dict[tuple[str, str], set[tuple[str, str]]] = {
    ("google", "structured"): {SCHEMA_UNSAID},
    ("anthropic", "structured"): {FORMAT_DROPPED},
    ("bedrock", "structured"): {FORMAT_DROPPED},
    ("google", "conversation"): {
        ("MESSAGE_CHANGED", "text: 20 chars -> 0 chars"),
        ("HISTORY_TOOL_RESULT_CHANGED", "a result is missing or linked to another call"),
        ("HISTORY_TOOL_RESULT_CHANGED", "a result upstream answers no call the client's did"),
    },
}
"""The request findings each route and request has on 1.15.2, by code and detail; any other
pair has none. On the Google route the assistant turn's "Let me look both up." (20 chars) beside
its calls is dropped, and both results are named `gateway-tool-filler-name` (a Chat tool message
names no function), which Gemini, linking results by name, cannot link to a call."""


@pytest.mark.parametrize("case", list(ASKED))
@pytest.mark.parametrize("route", ["openai", "anthropic", "google", "bedrock"])
async def test_what_the_client_asked_reaches_the_provider(forwarding: Stack, route: str,
                                                          case: str) -> None:
    request_id = f"asked-{route}-{case}"
    sent = await forwarding.chat(route, request_id, **ASKED[case])

    requests = sent.pair["comparison"]["requests"]
    assert (requests["downstream"]["dialect"], requests["upstream"]["dialect"]) == (
        "openai.chat", ROUTES[route].dialect)
    assert requests["downstream"]["turns"] == TURNS[case]
    said = {(f["code"], f["detail"]) for f in requests["findings"]}
    assert said == ASKED_FINDINGS.get((route, case), set()), requests["findings"]
    breaking = {f["code"] for f in requests["findings"] if f["severity"] != "cosmetic"}
    assert requests["verdict"] == ("diverged" if breaking else "equal")
    logged = {line["code"] for line in forwarding.log.lines("divergence", request_id)
              if line["side"] == "request"}
    assert logged == breaking
