"""The request comparator's cost per pair, beside the response comparator's.

Every compared pair now has its requests compared too: the client's body and the body the
provider received, each read to an `Ask` (`read_ask`) and the two compared (`compare_requests`).
Two pairs, each a Chat Completions request and the Anthropic Messages body a faithful gateway
makes of it (so that both readers run and the comparison is really made, and reads equal):

- small: one user message and two tools, the shape of most requests;
- agent: a long agent conversation of 40 turns: a system prompt, a user message with an image,
  19 rounds of assistant tool calls (one or two, with ids) and their results, a final answer,
  and five tools with parameter schemas.

For scale, the response comparator's pair of `compare_small_events` (two Chat Completions streams
of 204 text deltas each) is measured in the same rounds: the rounds take turns, so a busy machine
slows all alike, and each pair's cost is printed as a ratio to that pair's in the same round.
Prints the CPU time of a pair (`time.process_time`) for reading both requests and for comparing
them, best and median of REPEATS rounds, and the ratio to the response pair, median and range.

Then what hostile bodies cost (the tests in `tests/test_request_hostile.py` only check that they
never raise): the CPU of reading a client's body and a provider's and comparing them, best of
three, in seconds: 80 MiB (over MAX_REQUEST_BYTES), 10,000 levels of nesting, a schema whose 40
definitions each use the next twice, 60 nested `anyOf`s around an enum of 100,000 values, 16,000
alternating turns and the same with two dropped in the middle, 8,000 tools and the same reversed,
8,000 tool results in one turn and the same reversed, 8,000 images and the same reversed.
Run with `python bench/compare_requests.py` (`--no-hostile` to skip them).
"""

from __future__ import annotations

import argparse
import base64
import time
from collections.abc import Callable
from statistics import median
from typing import Any

import orjson

from _captures import WORDS
from calltap.compare_history import merged_turns
from calltap.compare_requests import compare_requests
from calltap.dialects.asks import MAX_REQUEST_BYTES, read_ask
from compare_small_events import compared as compared_responses
from compare_small_events import small_events

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
REPEATS = 9
ROUND_S = 0.15
"""About how long each measured stage runs in a round: the number of pairs follows from it."""
IMAGE = bytes(range(256)) * 96
"""A 24 KiB image, sent inline."""


def schema(*names: str, required: int = 1) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False,
            "properties": {name: {"type": "string", "description": f"the {name}"}
                           for name in names},
            "required": list(names[:required])}


TOOLS = {
    "read_file": schema("path", "encoding"),
    "write_file": schema("path", "content", required=2),
    "search_code": {**schema("query"), "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "kind": {"enum": ["symbol", "text", "regex"]}}},
    "run_tests": {**schema("target"), "properties": {
        "target": {"type": "string"}, "flags": {"type": "array", "items": {"type": "string"}}}},
    "get_weather": schema("city", "unit"),
}


def sentence(start: int, words: int) -> str:
    return " ".join(WORDS[(start + n) % len(WORDS)] for n in range(words))


def chat_tools(names: list[str]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": name, "description": sentence(n, 8),
                                              "parameters": TOOLS[name]}}
            for n, name in enumerate(names)]


def small_request() -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": sentence(0, 30)}],
            "tools": chat_tools(["get_weather", "read_file"]), "temperature": 0,
            "max_completion_tokens": 1024, "stream": True,
            "stream_options": {"include_usage": True}}


def agent_request() -> dict[str, Any]:
    """40 turns: the user's question with an image, 19 rounds of calls and results, the answer."""
    image = "data:image/png;base64," + base64.b64encode(IMAGE).decode()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": sentence(3, 120)},
        {"role": "user", "content": [{"type": "text", "text": sentence(5, 40)},
                                     {"type": "image_url", "image_url": {"url": image}}]},
    ]
    names = sorted(TOOLS)
    for round_ in range(19):
        calls = [{"id": f"call_{round_:02d}{k}", "type": "function", "function": {
            "name": names[(round_ + k) % len(names)],
            "arguments": orjson.dumps({"path": f"src/module_{round_}/file_{k}.py",
                                       "query": sentence(round_ + k, 6)}).decode()}}
            for k in range(1 + round_ % 2)]
        messages.append({"role": "assistant", "content": sentence(round_, 12),
                         "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": call["id"],
                      "content": sentence(round_ * 7 + n, 80)} for n, call in enumerate(calls)]
    messages.append({"role": "assistant", "content": sentence(11, 60)})
    return {"model": "gpt-4o", "messages": messages, "tools": chat_tools(names),
            "tool_choice": "auto", "parallel_tool_calls": True, "temperature": 0.2,
            "max_completion_tokens": 4096, "stream": True}


def as_messages(request: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic Messages body a faithful gateway makes of a Chat Completions request:
    system apart, tool messages as `tool_result` blocks merged into one user turn, calls as
    `tool_use` blocks, an image as a base64 block."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += blocks
        else:
            messages.append({"role": role, "content": blocks})

    for message in request["messages"]:
        content = message.get("content")
        if message["role"] == "system":
            system.append(content)
        elif message["role"] == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": message["tool_call_id"],
                          "content": content}])
        else:
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else [
                {"type": "text", "text": part["text"]} if part["type"] == "text" else
                {"type": "image", "source": {
                    "type": "base64", "media_type": "image/png",
                    "data": part["image_url"]["url"].partition(",")[2]}}
                for part in content or []]
            parts += [{"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                       "input": orjson.loads(call["function"]["arguments"])}
                      for call in message.get("tool_calls") or []]
            add(message["role"], parts)
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5", "max_tokens": request["max_completion_tokens"],
        "messages": messages, "temperature": request["temperature"], "stream": True,
        "tools": [{"name": tool["function"]["name"],
                   "description": tool["function"]["description"],
                   "input_schema": tool["function"]["parameters"]} for tool in request["tools"]],
    }
    if system:
        body["system"] = "\n".join(system)
    if request.get("tool_choice") == "auto":
        body["tool_choice"] = {"type": "auto"}
    return body


def per_pair_ms(work: Callable[[], object], pairs: int) -> float:
    started = time.process_time()
    for _ in range(pairs):
        work()
    return (time.process_time() - started) / pairs * 1e3


def pairs_for(work: Callable[[], object]) -> int:
    """How many pairs make about ROUND_S of CPU."""
    once = per_pair_ms(work, 3) / 1e3
    return max(3, int(ROUND_S / max(once, 1e-6)))


def hostile_bodies() -> dict[str, tuple[bytes, bytes]]:
    """Each hostile case as a client body and a provider body (Chat Completions both)."""
    def body(messages: list[Any], **fields: Any) -> bytes:
        return orjson.dumps({"model": "m", "messages": messages, **fields})

    hi = [{"role": "user", "content": "hi"}]
    deep = b"[" * 10_000 + b"]" * 10_000
    branching = {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": {
        **{f"d{n}": {"anyOf": [{"$ref": f"#/$defs/d{n + 1}"},
                               {"type": "array", "items": {"$ref": f"#/$defs/d{n + 1}"}}]}
           for n in range(40)}, "d40": {"type": "string"}}}
    nested: dict[str, Any] = {"enum": list(range(100_000))}
    for _ in range(60):
        nested = {"anyOf": [nested, {"type": "null"}]}
    turns = [{"role": "user" if n % 2 == 0 else "assistant", "content": "x"}
             for n in range(16_000)]
    tools = [{"type": "function", "function": {"name": f"t{n}", "parameters": {
        "type": "object"}}} for n in range(8_000)]
    calls = [{"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
             for n in range(8_000)]
    results = [{"role": "tool", "tool_call_id": f"c{n}", "content": "r"} for n in range(8_000)]
    images = [{"type": "image_url", "image_url": {"url": f"https://example.com/{n}.png"}}
              for n in range(8_000)]

    def tool_body(schema: Any) -> bytes:
        return body(hi, tools=[{"type": "function", "function": {"name": "f",
                                                                 "parameters": schema}}])

    over = b" " * max(80 * 2**20, MAX_REQUEST_BYTES + 1)
    agent = [*hi, {"role": "assistant", "tool_calls": calls}]
    return {
        "over the size limit": (over, over),
        "10,000 levels of nesting": (b'{"messages": ' + deep + b"}",) * 2,
        "refs that branch, 40 levels": (tool_body(branching),) * 2,
        "anyOf x60 around 100,000 values": (tool_body(nested),) * 2,
        "16,000 turns, 2 dropped": (body(turns), body(turns[:8_000] + turns[8_002:])),
        "8,000 tools reversed": (body(hi, tools=tools), body(hi, tools=tools[::-1])),
        "8,000 results reversed": (body(agent + results), body(agent + results[::-1])),
        "8,000 images reversed": (body([{"role": "user", "content": images}]),
                                  body([{"role": "user", "content": images[::-1]}])),
    }


def hostile() -> None:
    print("hostile bodies: CPU of reading both and comparing, best of 3")
    for name, (client, provider) in hostile_bodies().items():
        times = []
        for _ in range(3):
            started = time.process_time()
            comparison = compare_requests(read_ask(client, CHAT), read_ask(provider, CHAT))
            times.append(time.process_time() - started)
        print(f"  {name:34} {min(times):7.3f} s; {len(client)} bytes;"
              f" verdict {comparison.verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-hostile", action="store_true", help="skip the hostile bodies")
    options = parser.parse_args()
    pairs()
    if not options.no_hostile:
        hostile()


def pairs() -> None:
    upstream = small_events("chatcmpl-a7853543ddddf0a3bb2bcf56")
    downstream = small_events("gatewayx-a7853543ddddf0a3bb2bcf56")
    assert compared_responses(upstream, downstream).verdict == "equal"
    stages: dict[str, Callable[[], object]] = {
        "responses: 204 text deltas": lambda: compared_responses(upstream, downstream)}
    for name, request in (("small", small_request()), ("agent", agent_request())):
        client, provider = orjson.dumps(request), orjson.dumps(as_messages(request))
        asks = (read_ask(client, CHAT), read_ask(provider, MESSAGES))
        comparison = compare_requests(*asks)
        assert (comparison.verdict, comparison.findings) == ("equal", []), comparison.findings
        turns = len(merged_turns(asks[0].turns))
        print(f"requests {name}: {turns} turns, {len(request['tools'])} tools; client"
              f" {len(client)} bytes (chat), provider {len(provider)} bytes (messages);"
              f" verdict {comparison.verdict}")
        stages[f"requests {name}: read both"] = (
            lambda client=client, provider=provider: (read_ask(client, CHAT),
                                                      read_ask(provider, MESSAGES)))
        stages[f"requests {name}: compare"] = lambda asks=asks: compare_requests(*asks)
        stages[f"requests {name}: read and compare"] = (
            lambda client=client, provider=provider: compare_requests(
                read_ask(client, CHAT), read_ask(provider, MESSAGES)))
    counts = {stage: pairs_for(work) for stage, work in stages.items()}
    rounds: dict[str, list[float]] = {stage: [] for stage in stages}
    for _ in range(REPEATS):
        for stage, work in stages.items():
            rounds[stage].append(per_pair_ms(work, counts[stage]))
    baseline = rounds["responses: 204 text deltas"]
    print(f"{REPEATS} rounds; CPU a pair, and its ratio to the response pair's in the same round")
    for stage, times in rounds.items():
        ratios = [mine / theirs for mine, theirs in zip(times, baseline, strict=True)]
        print(f"  {stage:34} best {min(times):7.3f} ms, median {median(times):7.3f} ms;"
              f" x{median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
