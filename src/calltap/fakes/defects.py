"""The gateway defects the fake gateway can inject, and what calltap must say about each.

Each defect reproduces a shape from a public bug report (named in DEFECTS). Stream defects are
transforms over parsed Chat Completions payloads: the gateway parses the provider's SSE events,
hands each payload (a decoded JSON object, or the raw data text such as "[DONE]") to the transform
and serializes what comes back. Transforms are deterministic: the same stream in gives the same
bytes out.

Request defects rewrite the client's decoded body before the gateway relays or translates it (a
defect may change the request, the answer, or both): a tool left out, a named tool choice sent as
"required", `tool_choice: "none"` left out, a tool result's image dropped, `temperature: 0`
dropped as if unset, a schema's `enum` lost. The gateway re-serializes the body; the answer is
relayed as it comes.

Names joined by commas (`change-two-values,drop-none-choice`) are one gateway with all those bugs
(`combined`): what `calltap probe --demo-broken` probes.

The expectations (`verdict`, `codes`, `pairing`, `attempts`) of the stream defects are those for a
streamed request that offers two tools with `stream_options.include_usage`, so the provider
answers with two parallel tool calls: the request the demo and the end-to-end tests send. The
request defects' are those for `calltap.fakes.conversation.CONVERSATION_REQUEST`,
`drop-none-choice`'s for its twin that says `tool_choice: "none"`, and `drop-result-image`'s for
its Anthropic Messages twin, whose tool result carries an image.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from calltap.codes import Code

Payload = dict[str, Any] | str
"""One event's data: a decoded JSON object, or the raw text when it is not one (`[DONE]`)."""

DONE = "[DONE]"


class Relay:
    """The faithful transform: every payload passes unchanged. Defects override `feed`/`end`, and
    `whole` (setting `changes_whole`) when they also change a JSON (non-streamed) answer."""

    changes_whole = False

    def feed(self, payload: Payload) -> list[Payload]:
        return [payload]

    def whole(self, body: Any) -> Any:
        """A whole JSON answer as the gateway passes it on."""
        return body

    def end(self) -> list[Payload]:
        """Payloads to send after the upstream stream ended."""
        return []


def deltas(payload: Payload) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each (choice, delta) of a chunk."""
    if not isinstance(payload, dict):
        return
    for choice in payload.get("choices") or ():
        if isinstance(choice, dict) and isinstance(choice.get("delta"), dict):
            yield choice, choice["delta"]


def tool_deltas(payload: Payload) -> Iterator[dict[str, Any]]:
    """Each tool-call fragment of a chunk."""
    for _, delta in deltas(payload):
        for fragment in delta.get("tool_calls") or ():
            if isinstance(fragment, dict):
                yield fragment


def chunk_like(template: dict[str, Any], choices: list[Any], usage: Any = None) -> dict[str, Any]:
    """A new chunk with the template's envelope (id, object, created, model, …, in its key order)
    and these choices; `usage` replaces the template's (null, as on every chunk but the usage
    chunk) and is added when given."""
    chunk: dict[str, Any] = {}
    for key, value in template.items():
        chunk[key] = choices if key == "choices" else usage if key == "usage" else value
    chunk.setdefault("choices", choices)
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def is_empty_chunk(payload: Payload) -> bool:
    """A chunk that says nothing any more: no choice has a delta field or a finish reason."""
    if not isinstance(payload, dict) or payload.get("usage") or not payload.get("choices"):
        return False
    return all(not delta and not choice.get("finish_reason") for choice, delta in deltas(payload))


class DropSecondCall(Relay):
    """The second parallel call is lost, in whichever dialect the stream speaks.

    Chat Completions: every fragment of the second tool-call index seen is dropped. Anthropic
    Messages and OpenAI Responses (the streams of `/v1/messages` and `/v1/responses`, told apart
    from chunks by their `type`): see `DropSecondItem`.
    """

    def __init__(self) -> None:
        self.indexes: list[Any] = []
        self.items = DropSecondItem()

    def feed(self, payload: Payload) -> list[Payload]:
        if isinstance(payload, dict) and isinstance(payload.get("type"), str):
            return self.items.feed(payload)
        touched = False
        for _, delta in deltas(payload):
            fragments = delta.get("tool_calls")
            if not isinstance(fragments, list):
                continue
            kept = []
            for fragment in fragments:
                index = fragment.get("index") if isinstance(fragment, dict) else None
                if index not in self.indexes:
                    self.indexes.append(index)
                if self.indexes.index(index) != 1:
                    kept.append(fragment)
            if len(kept) != len(fragments):
                touched = True
                if kept:
                    delta["tool_calls"] = kept
                else:
                    del delta["tool_calls"]
        return [] if touched and is_empty_chunk(payload) else [payload]


CALL_STARTS = {"content_block_start": ("content_block", "tool_use"),
               "response.output_item.added": ("item", "function_call")}
"""The event that starts a call in each event-typed dialect: (where the call is, its type)."""


class DropSecondItem(Relay):
    """The second `tool_use` block of an Anthropic Messages stream, or the second `function_call`
    item of a Responses stream, is dropped with every event of it (start, deltas, stop or done),
    and from the response a terminal `response.*` event carries. Later blocks and items move down
    one index and Responses sequence numbers close the gap: what the client gets is a valid stream
    with one call fewer, as when a gateway ends the turn on the first call (ocp #478)."""

    def __init__(self) -> None:
        self.calls = 0
        self.dropped: int | None = None
        """The block index (Messages) or output_index (Responses) of the dropped call."""
        self.dropped_id: Any = None
        self.removed = 0

    def feed(self, payload: Payload) -> list[Payload]:
        assert isinstance(payload, dict)
        kind = payload["type"]
        key = "output_index" if kind.startswith("response.") else "index"
        where, call_type = CALL_STARTS.get(kind, ("", ""))
        started = payload.get(where)
        if isinstance(started, dict) and started.get("type") == call_type:
            self.calls += 1
            if self.calls == 2 and isinstance(payload.get(key), int):
                self.dropped, self.dropped_id = payload[key], started.get("id")
        position = payload.get(key)
        if self.dropped is None or not isinstance(position, int) or position < self.dropped:
            return [self._renumbered(payload)]
        if position == self.dropped:
            self.removed += 1
            return []
        payload[key] = position - 1
        return [self._renumbered(payload)]

    def _renumbered(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The event with the sequence number it has once the dropped ones are gone, and without
        the dropped item in the response a `response.*` event carries."""
        if isinstance(payload.get("sequence_number"), int):
            payload["sequence_number"] -= self.removed
        response = payload.get("response")
        output = response.get("output") if isinstance(response, dict) else None
        if isinstance(output, list) and self.dropped is not None:
            response["output"] = [item for item in output if not self._is_dropped(item)]
        return payload

    def _is_dropped(self, item: Any) -> bool:
        return (isinstance(item, dict) and item.get("type") == "function_call"
                and item.get("id") == self.dropped_id)


class OmitFirstIndex(Relay):
    """`index` is removed from every tool-call fragment of call 0."""

    def feed(self, payload: Payload) -> list[Payload]:
        for fragment in tool_deltas(payload):
            if fragment.get("index") == 0:
                del fragment["index"]
        return [payload]


class MergeIndexes(Relay):
    """Every tool-call fragment is put on index 0, so clients merge the calls into one."""

    def feed(self, payload: Payload) -> list[Payload]:
        for fragment in tool_deltas(payload):
            fragment["index"] = 0
        return [payload]


class StripDone(Relay):
    """`data: [DONE]` is never sent."""

    def feed(self, payload: Payload) -> list[Payload]:
        return [] if payload == DONE else [payload]


class NullFinishReason(Relay):
    """Every finish_reason is sent as null."""

    def feed(self, payload: Payload) -> list[Payload]:
        for choice, _ in deltas(payload):
            if choice.get("finish_reason") is not None:
                choice["finish_reason"] = None
        return [payload]


GATEWAY_ERROR = {
    "error": {"message": "upstream connection interrupted", "type": "server_error", "code": 502}
}


class ErrorAfter200(Relay):
    """The first `keep` chunks pass, then an error object ends the stream (no `[DONE]`).

    The rest of the provider's stream is read and discarded, so the provider's leg completes.
    """

    def __init__(self, keep: int = 3) -> None:
        self.keep = keep
        self.sent = 0

    def feed(self, payload: Payload) -> list[Payload]:
        self.sent += 1
        if self.sent <= self.keep:
            return [payload]
        if self.sent == self.keep + 1:
            return [copy.deepcopy(GATEWAY_ERROR)]
        return []

    def end(self) -> list[Payload]:
        return [copy.deepcopy(GATEWAY_ERROR)] if self.sent < self.keep + 1 else []


ESTIMATED_USAGE = {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
"""What a masking gateway reports instead of the provider's usage, which it never received."""


class MaskEof(Relay):
    """The first `keep` chunks pass, then the stream is closed as if it had ended well.

    What a gateway does when it masks an upstream EOF: a fabricated final chunk with
    `finish_reason: "stop"`, an estimated usage chunk, `[DONE]`. The provider's real remainder is
    read and discarded.
    """

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self.seen = 0
        self.template: dict[str, Any] = {}

    def feed(self, payload: Payload) -> list[Payload]:
        self.seen += 1
        if self.seen > self.keep:
            return []
        if isinstance(payload, dict):
            self.template = payload
        return [payload] if self.seen < self.keep else [payload, *self._fake_ending()]

    def end(self) -> list[Payload]:
        return self._fake_ending() if self.seen < self.keep else []

    def _fake_ending(self) -> list[Payload]:
        choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
        ending: list[Payload] = [chunk_like(self.template, [choice])]
        if "usage" in self.template:
            ending.append(chunk_like(self.template, [], ESTIMATED_USAGE))
        return [*ending, DONE]


class RewriteIds(Relay):
    """Tool-call ids are replaced by the gateway's own (`call_gw_1`, `call_gw_2`, …)."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}

    def feed(self, payload: Payload) -> list[Payload]:
        for fragment in tool_deltas(payload):
            original = fragment.get("id")
            if isinstance(original, str) and original:
                fragment["id"] = self.ids.setdefault(original, f"call_gw_{len(self.ids) + 1}")
        return [payload]


class RechunkArguments(Relay):
    """Argument fragments are re-cut into pieces of `width` characters on the gateway's own
    boundaries (short fragments merged, long ones split); the calls' text is unchanged.

    A call's first fragment (with id and name) passes with `arguments: ""`; the argument text is
    buffered per call and sent as `{"index": N, "function": {"arguments": piece}}` chunks as pieces
    fill up; what remains is flushed before the chunk with the finish reason.
    """

    def __init__(self, width: int = 5) -> None:
        self.width = width
        self.buffers: dict[tuple[int, Any], str] = {}
        self.template: dict[str, Any] = {}

    def feed(self, payload: Payload) -> list[Payload]:
        if not isinstance(payload, dict):
            return [*self._flush(everything=True), payload]
        self.template = payload
        finishing = False
        for choice, delta in deltas(payload):
            finishing = finishing or bool(choice.get("finish_reason"))
            fragments = delta.get("tool_calls")
            if not isinstance(fragments, list):
                continue
            headers = []
            for fragment in fragments:
                function = fragment.get("function") or {}
                key = (choice.get("index", 0), fragment.get("index"))
                self.buffers[key] = self.buffers.get(key, "") + (function.get("arguments") or "")
                if "id" in fragment or "name" in function:
                    headers.append({**fragment, "function": {**function, "arguments": ""}})
            if headers:
                delta["tool_calls"] = headers
            else:
                del delta["tool_calls"]
        pieces = self._flush(everything=finishing)
        kept = [] if is_empty_chunk(payload) else [payload]
        return [*pieces, *kept] if finishing else [*kept, *pieces]

    def end(self) -> list[Payload]:
        return self._flush(everything=True)

    def _flush(self, *, everything: bool) -> list[Payload]:
        """Chunks for every piece that is ready (all that is buffered when `everything`)."""
        chunks: list[Payload] = []
        for (choice_index, call_index), text in self.buffers.items():
            cut = len(text) if everything else len(text) - len(text) % self.width
            for start in range(0, cut, self.width):
                fragment = {
                    "index": call_index,
                    "function": {"arguments": text[start : start + self.width]},
                }
                choice = {
                    "index": choice_index,
                    "delta": {"tool_calls": [fragment]},
                    "logprobs": None,
                    "finish_reason": None,
                }
                chunks.append(chunk_like(self.template, [choice]))
            self.buffers[(choice_index, call_index)] = text[cut:]
        return chunks


def altered(value: Any) -> Any:
    """A value as a careless gateway re-types it: `true` becomes `1`, a number its text, a string
    loses its last character, null becomes the empty string."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return orjson.dumps(value).decode()
    if isinstance(value, str):
        return value[:-1] if value else None
    return "" if value is None else value


class ChangeTwoValues(Relay):
    """The first two argument values of the answer (leaves in document order, across its calls)
    are re-typed (`altered`); everything else passes.

    A stream's argument text is buffered per call, as a gateway that parses arguments must, and
    each call's arguments go out in one fragment before the chunk with the finish reason; a JSON
    answer has its `message.tool_calls` rewritten. Arguments that are not JSON pass unchanged.
    """

    changes_whole = True

    def __init__(self, count: int = 2) -> None:
        self.left = count
        self.buffers: dict[tuple[Any, Any], str] = {}
        self.template: dict[str, Any] = {}

    def feed(self, payload: Payload) -> list[Payload]:
        if not isinstance(payload, dict):
            return [*self._flush(), payload]
        self.template = payload
        finishing = False
        for choice, delta in deltas(payload):
            finishing = finishing or bool(choice.get("finish_reason"))
            if isinstance(delta.get("tool_calls"), list):
                self._buffer(choice.get("index", 0), delta)
        if finishing:
            return [*self._flush(), payload]
        return [] if is_empty_chunk(payload) else [payload]

    def end(self) -> list[Payload]:
        return self._flush()

    def _buffer(self, choice_index: Any, delta: dict[str, Any]) -> None:
        """Take a delta's argument text into the buffers; only call starts (id, name) stay."""
        starts = []
        for fragment in delta["tool_calls"]:
            function = fragment.get("function") if isinstance(fragment, dict) else None
            if not isinstance(function, dict):
                continue
            key = (choice_index, fragment.get("index"))
            self.buffers[key] = self.buffers.get(key, "") + (function.get("arguments") or "")
            if "id" in fragment or "name" in function:
                starts.append({**fragment, "function": {**function, "arguments": ""}})
        if starts:
            delta["tool_calls"] = starts
        else:
            del delta["tool_calls"]

    def whole(self, body: Any) -> Any:
        for choice in body.get("choices") or () if isinstance(body, dict) else ():
            message = choice.get("message") if isinstance(choice, dict) else None
            calls = message.get("tool_calls") if isinstance(message, dict) else None
            for call in calls if isinstance(calls, list) else ():
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    function["arguments"] = self._change(function["arguments"])
        return body

    def _flush(self) -> list[Payload]:
        chunks: list[Payload] = []
        for (choice_index, call_index), text in self.buffers.items():
            fragment = {"index": call_index, "function": {"arguments": self._change(text)}}
            choice = {
                "index": choice_index,
                "delta": {"tool_calls": [fragment]},
                "logprobs": None,
                "finish_reason": None,
            }
            chunks.append(chunk_like(self.template, [choice]))
        self.buffers.clear()
        return chunks

    def _change(self, arguments: str) -> str:
        try:
            value = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
        return orjson.dumps(self._walk(value)).decode()

    def _walk(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {name: self._walk(item) for name, item in value.items()}
        if isinstance(value, list):
            return [self._walk(item) for item in value]
        if self.left <= 0:
            return value
        self.left -= 1
        return altered(value)


Request = dict[str, Any]
"""A request body as the client sent it, decoded: what a request defect rewrites."""
SAMPLING = ("temperature", "top_p", "top_k", "seed", "frequency_penalty", "presence_penalty")


def drop_last_tool(request: Request) -> Request:
    """`tools` without its last tool: what a gateway that keeps only the tools it can map sends."""
    changed = copy.deepcopy(request)
    tools = changed.get("tools")
    if isinstance(tools, list) and tools:
        changed["tools"] = tools[:-1]
    return changed


def named_choice_as_required(request: Request) -> Request:
    """A named `tool_choice` sent as "required": the model must call a tool, any tool, instead
    of the one the client named."""
    changed = copy.deepcopy(request)
    if isinstance(changed.get("tool_choice"), dict):
        changed["tool_choice"] = "required"
    return changed


def drop_none_choice(request: Request) -> Request:
    """`tool_choice: "none"` left out, as a translator that maps only the choices that ask for a
    call does: with tools offered, silence means "auto", and the model calls the tools the client
    forbade."""
    changed = copy.deepcopy(request)
    if changed.get("tool_choice") == "none":
        del changed["tool_choice"]
    return changed


def drop_result_images(request: Request) -> Request:
    """Anthropic Messages `tool_result` blocks keep their text and lose their images, as a
    translator that reads a result's text parts only does."""
    changed = copy.deepcopy(request)
    for message in changed.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            parts = block.get("content")
            if isinstance(parts, list):
                block["content"] = [
                    part for part in parts
                    if not (isinstance(part, dict) and part.get("type") == "image")
                ]
    return changed


def drop_zero_sampling(request: Request) -> Request:
    """Sampling parameters tested for truth instead of presence (`if temperature:`): a 0 is left
    out as if the client had set nothing, and the provider samples at its default."""
    changed = copy.deepcopy(request)
    for key in SAMPLING:
        if key in changed and changed[key] is not None and not changed[key]:
            del changed[key]
    return changed


def drop_enums(request: Request) -> Request:
    """Every `enum` list in the tools' schemas removed, as an over-eager schema sanitizer does:
    the model may then send any string where the client allowed a few."""
    changed = copy.deepcopy(request)
    if "tools" in changed:
        changed["tools"] = without_enums(changed["tools"])
    return changed


def without_enums(value: Any) -> Any:
    """A copy of a JSON value without any `enum` list (a property named `enum` stays)."""
    if isinstance(value, dict):
        return {
            key: without_enums(item)
            for key, item in value.items()
            if not (key == "enum" and isinstance(item, list))
        }
    if isinstance(value, list):
        return [without_enums(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class Defect:
    """One injectable gateway defect and what calltap must report for it."""

    name: str
    summary: str
    seen_in: str
    verdict: str
    """The expected comparison verdict."""
    codes: frozenset[Code] = frozenset()
    """Codes that must be among the comparison's findings."""
    transform: Callable[[], Relay] | None = None
    """The stream transform, or None when the defect is not in the stream."""
    strips_headers: bool = False
    """Forward none of the client's headers but Content-Type (calltap must pair by content)."""
    retries: bool = False
    """Abandon the first upstream attempt after its response headers and try again."""
    request: Callable[[Request], Request] | None = None
    """The request transform: the client's decoded body in, the body the gateway relays (or
    translates) out; None when the defect leaves the request alone."""

    @property
    def pairing(self) -> str:
        """How calltap should pair the two legs."""
        return "fingerprint" if self.strips_headers else "header"

    @property
    def attempts(self) -> int:
        """How many upstream attempts calltap should record."""
        return 2 if self.retries else 1

    @property
    def expectations(self) -> list[str]:
        """The verdict, then each code and pairing fact calltap must report."""
        notes = [self.verdict, *sorted(self.codes)]
        if self.strips_headers:
            notes.append("paired by fingerprint")
        if self.retries:
            notes.append("2 attempts")
        return notes

    @property
    def expected(self) -> str:
        """The expectation in one line."""
        verdict, *notes = self.expectations
        return verdict + (f": {', '.join(notes)}" if notes else "")


FAITHFUL = Defect(
    name="none",
    summary="relays the provider's bytes unchanged",
    seen_in="",
    verdict="equal",
    transform=None,
)

DEFECTS: dict[str, Defect] = {
    defect.name: defect
    for defect in (
        Defect(
            "drop-second-call",
            "drops every fragment of the second parallel tool call (its block or item on Messages"
            " and Responses streams)",
            "ocp #478",
            "diverged",
            frozenset({Code.TOOL_CALLS_DROPPED, Code.TOOL_CALL_SET_CHANGED}),
            DropSecondCall,
        ),
        Defect(
            "omit-index",
            "omits `index` on the tool-call fragments of call 0",
            "ollama #7881",
            "diverged",
            frozenset({Code.TOOL_CALL_INDEX_MISSING}),
            OmitFirstIndex,
        ),
        Defect(
            "merge-indexes",
            "puts every parallel call on index 0",
            "litellm #21331",
            "diverged",
            frozenset({Code.TOOL_CALLS_DROPPED, Code.TOOL_CALL_ID_CONFLICT}),
            MergeIndexes,
        ),
        Defect(
            "strip-done",
            "never sends `data: [DONE]`",
            "litellm PR #39748",
            "diverged",
            frozenset({Code.DONE_MISSING}),
            StripDone,
        ),
        Defect(
            "null-finish-reason",
            "sends the final finish_reason as null",
            "finish-reason mishandling, e.g. litellm #35663",
            "diverged",
            frozenset({Code.FINISH_REASON_MISSING}),
            NullFinishReason,
        ),
        Defect(
            "error-after-200",
            "streams three chunks, then an error object, and ends",
            "OpenRouter's documented mid-stream errors",
            "diverged",
            frozenset({Code.ERROR_IN_STREAM}),
            ErrorAfter200,
        ),
        Defect(
            "mask-eof",
            "cuts the stream and ends it as if it had finished: finish_reason stop, usage, [DONE]",
            "litellm #40260",
            "diverged",
            frozenset({Code.FINISH_REASON_CHANGED}),
            MaskEof,
        ),
        Defect(
            "change-two-values",
            "re-types the first two argument values: true as 1, a number as text, a string cut",
            "type-coercing gateways, e.g. arguments parsed and re-serialized",
            "diverged",
            frozenset({Code.TOOL_CALL_ARGUMENTS_CHANGED, Code.TOOL_CALL_SET_CHANGED}),
            ChangeTwoValues,
        ),
        Defect(
            "rewrite-ids",
            "replaces tool-call ids with its own",
            "translating gateways (LiteLLM's Anthropic route)",
            "equal",
            frozenset({Code.TOOL_CALL_IDS_REMAPPED}),
            RewriteIds,
        ),
        Defect(
            "rechunk-arguments",
            "re-cuts argument fragments on its own boundaries",
            "any re-buffering gateway",
            "equal",
            frozenset(),
            RechunkArguments,
        ),
        Defect(
            "strip-headers",
            "forwards none of the client's headers (no X-Request-ID, no traceparent)",
            "LiteLLM's default",
            "equal",
            strips_headers=True,
        ),
        Defect(
            "retry-once",
            "abandons the first upstream attempt after its headers and relays a second one",
            "any gateway with retries",
            "equal",
            retries=True,
        ),
        Defect(
            "drop-tool",
            "sends `tools` without the last tool the client offered",
            "tools stripped in transit, e.g. litellm PR #38265",
            "diverged",
            frozenset({Code.REQUEST_TOOL_DROPPED}),
            request=drop_last_tool,
        ),
        Defect(
            "named-choice-required",
            "sends a `tool_choice` naming one function as \"required\" (any tool)",
            "litellm PR #29812",
            "diverged",
            frozenset({Code.TOOL_CHOICE_CHANGED}),
            request=named_choice_as_required,
        ),
        Defect(
            "drop-none-choice",
            "leaves out `tool_choice: \"none\"`, so the model may call the tools (auto)",
            "Portkey gateway #1474, PR #1477",
            "diverged",
            frozenset({Code.TOOL_CHOICE_CHANGED}),
            request=drop_none_choice,
        ),
        Defect(
            "drop-result-image",
            "keeps a tool result's text and drops its image (an Anthropic Messages request)",
            "axonhub PR #2117, bifrost PR #2658",
            "diverged",
            frozenset({Code.HISTORY_TOOL_RESULT_CHANGED}),
            request=drop_result_images,
        ),
        Defect(
            "drop-zero-temperature",
            "leaves out `temperature: 0` (any sampling value of 0) as if it were unset",
            "litellm #822, Portkey gateway #1423",
            "diverged",
            frozenset({Code.SAMPLING_CHANGED}),
            request=drop_zero_sampling,
        ),
        Defect(
            "drop-schema-enum",
            "removes every `enum` from the tools' parameter schemas",
            "schema sanitizers, e.g. hermes-agent PR #15082",
            "diverged",
            frozenset({Code.TOOL_SCHEMA_CHANGED}),
            request=drop_enums,
        ),
    )
}
"""Every injectable defect by name, in the order the demo sends them."""


COMBINE = ","
"""What joins the names of defects injected together."""


def defect_named(name: str | None) -> Defect:
    """The defect for a request header value; FAITHFUL for none; several joined by commas,
    combined. Raises KeyError if one is unknown, ValueError if they cannot combine."""
    if not name or name == FAITHFUL.name:
        return FAITHFUL
    if COMBINE in name:
        return combined([DEFECTS[part.strip()] for part in name.split(COMBINE)])
    return DEFECTS[name]


def combined(parts: list[Defect]) -> Defect:
    """One gateway with several bugs: the request through each part's request transform in turn,
    the answer through the one stream transform among them (ValueError for two: which order a
    gateway would apply them in is not known); its expectations are every part's."""
    streams = [part.transform for part in parts if part.transform is not None]
    rewrites = [part.request for part in parts if part.request is not None]
    if len(streams) > 1:
        raise ValueError("at most one combined defect may change the answer")

    def request(body: Request) -> Request:
        for rewrite in rewrites:
            body = rewrite(body)
        return body

    return Defect(
        name=COMBINE.join(part.name for part in parts),
        summary="; ".join(part.summary for part in parts),
        seen_in="; ".join(part.seen_in for part in parts if part.seen_in),
        verdict="diverged" if any(part.verdict == "diverged" for part in parts) else "equal",
        codes=frozenset().union(*(part.codes for part in parts)),
        transform=streams[0] if streams else None,
        strips_headers=any(part.strips_headers for part in parts),
        retries=any(part.retries for part in parts),
        request=request if rewrites else None,
    )
