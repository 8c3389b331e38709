"""What a dialect declares: the one interface every dialect module satisfies.

A dialect is a module, not a class: its reducers and request readers are module-level names, and
the registry in `calltap.dialects` holds the modules themselves. The interface is therefore a
`typing.Protocol`, which a module satisfies structurally (a type checker verifies the registry's
entries against it) without instances, base classes or registration code; an ABC would force
every dialect into a class that is instantiated once and adds nothing.

Response side:
  NAME          the transcript's `dialect` ("ollama.chat"), the value a capture may force
  PATHS         request-path suffixes that name it when the content says nothing (a segment,
                `/v1/messages`, or a Google custom method, `:generateContent`)
  FRAMING       how its streams are cut into frames: "sse" (`sse.Event`), "ndjson"
                (`ndjson.Line`), "eventstream" (`eventstream.Message`), or "json" for a dialect
                that never streams. Any dialect also reads a whole JSON body. A JSON array
                streamed element by element ("jsonarray", Gemini's stream without `alt=sse`)
                hands each element out as an `sse.Event`: the "sse" dialects read it.
  sniff         does this decoded payload belong to it: a JSON body, or one frame's payload as
                `calltap.dialects.framing` decodes it for its framing
  reduce_events frames of its framing, in order, to a Transcript
  reduce_json   a whole decoded JSON body to a Transcript

Request side:
  conversation      the request's conversation entries, in the vocabulary the fingerprint reads,
                    and its tool names; None when the body is no chat-like request of this
                    dialect
  usage_requested   whether the client's request asked for usage in its answer
  REQUEST           the module that reads a request body to an `Ask` (`RequestSide`): its own
                    module beside the dialect's (`openai_chat_request`), so that neither grows
                    past what one reader can hold; two dialect modules of one NAME share one

Adding a dialect is its own module and one entry in the registry's DIALECTS.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NamedTuple, Protocol

from calltap.ask import Ask
from calltap.transcript import Transcript

Framing = Literal["sse", "ndjson", "eventstream", "jsonarray", "json"]
FRAMINGS: tuple[Framing, ...] = ("sse", "ndjson", "eventstream", "jsonarray", "json")


class Conversation(NamedTuple):
    """A request's conversation as the fingerprint reads it.

    `entries` are messages in the shape Chat Completions, Messages and Responses share: a dict
    with `role` (`user`, `assistant`, `tool`, `function`; others are skipped) and `content`, a
    string or a list of typed parts (`{"type": "text", "text"}`, `{"type": "tool_result",
    "content"}`), or a Responses input item (`{"type": "function_call_output", "output"}`, ...).
    A dialect whose requests are shaped otherwise rewrites them into this vocabulary.
    `tools` are the names of the tools the request offers, in any order.
    """

    entries: list[Any]
    tools: list[str]


class RequestSide(Protocol):
    """A dialect's request side: how it reads a request body, and what it can carry.

    NAME          the dialect's NAME
    ask           a decoded request body (and its path, which names the model and whether it
                  streams in some dialects) to an Ask; RequestUnreadable for another shape
    CARRIES       the parts of an Ask the dialect has a field for, by the names in
                  `calltap.ask.PARTS`: a part a provider's dialect cannot carry, dropped by the
                  gateway, is REQUEST_PART_UNSUPPORTED, not a loss
    SCHEMA_LACKS  JSON Schema keywords its tool schemas cannot say (Gemini's subset)
    REQUIRES      parts a request of it must carry, which a gateway adds when the client sent
                  none (Anthropic's `max_tokens`)
    """

    NAME: str
    CARRIES: frozenset[str]
    SCHEMA_LACKS: frozenset[str]
    REQUIRES: frozenset[str]

    def ask(self, request: dict[str, Any], path: str) -> Ask: ...


class Dialect(Protocol):
    """A dialect module; see the module docstring for what each member means."""

    NAME: str
    PATHS: tuple[str, ...]
    FRAMING: Framing

    def sniff(self, payload: Any) -> bool: ...

    def reduce_events(self, events: Iterable[Any], *, status: int | None = None) -> Transcript: ...

    def reduce_json(self, payload: Any, *, status: int | None = None) -> Transcript: ...

    def conversation(self, request: dict[str, Any]) -> Conversation | None: ...

    def usage_requested(self, request: bytes) -> bool: ...

    REQUEST: RequestSide
