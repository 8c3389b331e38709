"""Comparator throughput on a ~15 MB OpenAI chat stream, against a naive reducer.

calltap compares every recorded pair, so its parse+reduce+compare has to keep up with the proxy.
The baseline is what people write first: split on newlines, `json.loads` each `data:` line,
accumulate text and tool-call arguments per index and compare the results. It ignores the
WHATWG rules (CR line endings, multi-line data, comments), decodes no argument strictly and
positions nothing. calltap does all of that and aims to run at least 1.5 times as fast.

Prints MB/s (both legs' bytes per second) for each stage of calltap and for the baseline, best of
a few runs, and the ratio. Run with `python bench/compare_throughput.py`.

Then the same ratio on a stream of tool-call argument fragments alone (no text): 48 parallel calls
whose fragments interleave round-robin, about 140,000 of them a leg (`--fragments N` for another
count, 0 to skip; `--fragments-only` for this phase alone), where every chunk is a fragment of
another call than the one before it.

Then the same for the other two stream framings, each on a pair of captures of a few MB that a
pass-through gateway would relay (the downstream is the upstream as forwarded):
- NDJSON: an Ollama `/api/chat` stream (a line per token, then two whole tool calls, then the
  `done` line with its counts) compared by `compare_captures`, against a naive reducer that splits
  lines and `json.loads` each, accumulating content, calls, `done_reason` and counts;
- the AWS event stream: a Bedrock ConverseStream answer (a text block in token-sized deltas, a
  tool call in fragments, `messageStop`, `metadata`) compared by `compare_captures`, against a
  naive reducer on botocore's own `EventStreamBuffer` that `json.loads` each payload and
  accumulates text, tool input fragments, stop reason and usage (what a boto3 user writes).
The target there is a cost per MB within 1.5 times the naive reducer's (a ratio of at least
0.67), as for SSE. Each framing's decode alone is printed too: `calltap.ndjson` with `orjson.loads`
per line against `json.loads` per split line, `calltap.eventstream` against `EventStreamBuffer`,
both event stream decoders fed the 64 KiB pieces botocore's own client reads.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import orjson
from botocore.eventstream import EventStreamBuffer

from _captures import WORDS, as_forwarded, chat_stream
from calltap import eventstream, ndjson
from calltap.compare import compare_captures
from calltap.fakes import eventstream as fake_eventstream
from calltap.jsonvalues import JsonInvalid, load_envelope
from calltap.sse import parse
from calltap.transcript import Capture

PATH = "/v1/chat/completions"
REPEATS = 7
TARGET = 1.5
FRAMING_TARGET = 1 / 1.5
PIECE = 64 * 1024
"""What botocore's client reads from the socket at a time (urllib3's default `stream()` amount)."""
FRAGMENTS = 140_000
FRAGMENT_CALLS = 48
FRAGMENT_CHARS = 4.45
"""The characters of `_captures.chat_stream`'s `argument_chars` an argument fragment carries on
average (its fragments are 2 to 9 characters of JSON, and its `\\u` escapes add some)."""


def naive_reduce(body: bytes) -> dict[str, Any]:
    """Text, finish reason, usage and decoded tool-call arguments per index, the simple way."""
    text: list[str] = []
    names: dict[int, str] = {}
    arguments: defaultdict[int, list[str]] = defaultdict(list)
    finish_reason = usage = None
    for line in body.split(b"\n"):
        if not line.startswith(b"data: "):
            continue
        if line == b"data: [DONE]":
            break
        chunk = json.loads(line[6:])
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            for fragment in delta.get("tool_calls") or ():
                function = fragment.get("function") or {}
                if function.get("name"):
                    names[fragment["index"]] = function["name"]
                if function.get("arguments"):
                    arguments[fragment["index"]].append(function["arguments"])
            finish_reason = choice.get("finish_reason") or finish_reason
    calls = {
        index: (names.get(index), json.loads("".join(parts))) for index, parts in arguments.items()
    }
    return {"text": "".join(text), "calls": calls, "finish": finish_reason, "usage": usage}


def naive_compare(upstream: bytes, downstream: bytes) -> bool:
    return naive_reduce(upstream) == naive_reduce(downstream)


def parse_only(upstream: bytes, downstream: bytes) -> int:
    return sum(len(parse(body)[0]) for body in (upstream, downstream))


def parse_and_load(upstream: bytes, downstream: bytes) -> int:
    loaded = 0
    for body in (upstream, downstream):
        for event in parse(body)[0]:
            try:
                load_envelope(event.data)
            except JsonInvalid:
                continue
            loaded += 1
    return loaded


def calltap_compare(upstream: bytes, downstream: bytes) -> str:
    return compare_captures(Capture(upstream, PATH), Capture(downstream, PATH)).verdict


def ollama_stream(lines: int = 30_000, seed: int = 7) -> bytes:
    """An Ollama `/api/chat` answer: one compact JSON line per token, two whole tool calls, then
    the final line with the reason and the counts."""
    rng = random.Random(seed)
    chunk = {"model": "llama3.2", "created_at": "", "message": {"role": "assistant", "content": ""}}
    out = []
    for index in range(lines):
        chunk["created_at"] = f"2025-08-04T08:52:{index % 60:02d}.{rng.randrange(10**9):09d}Z"
        chunk["message"]["content"] = rng.choice(WORDS)
        out.append(orjson.dumps({**chunk, "done": False}))
    for name in ("read_file", "run_tests"):
        arguments = {"path": f"src/{rng.choice(WORDS)}.py", "words": WORDS[:12], "retries": 3}
        call = {"function": {"name": name, "arguments": arguments}}
        message = {"role": "assistant", "content": "", "tool_calls": [call]}
        out.append(orjson.dumps({**chunk, "message": message, "done": False}))
    final = {
        **chunk,
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 4120,
        "eval_count": lines + 2,
    }
    return b"\n".join([*out, orjson.dumps(final), b""])


def converse_stream(deltas: int = 30_000, seed: int = 7) -> bytes:
    """A Bedrock ConverseStream answer: a text block, a tool call in fragments, stop, metadata."""
    rng = random.Random(seed)
    event = fake_eventstream.event
    messages = [event("messageStart", {"role": "assistant"})]
    for _ in range(deltas):
        delta = {"delta": {"text": rng.choice(WORDS)}, "contentBlockIndex": 0}
        messages.append(event("contentBlockDelta", delta))
    start = {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "run_tests"}}
    messages.append(event("contentBlockStart", {"start": start, "contentBlockIndex": 1}))
    arguments = json.dumps({"path": "tests/test_relay.py", "content": " ".join(WORDS * 20)})
    for start in range(0, len(arguments), 8):
        fragment = {"toolUse": {"input": arguments[start : start + 8]}}
        messages.append(event("contentBlockDelta", {"delta": fragment, "contentBlockIndex": 1}))
    messages.append(event("messageStop", {"stopReason": "tool_use"}))
    usage = {"inputTokens": 4120, "outputTokens": deltas, "totalTokens": 4120 + deltas}
    messages.append(event("metadata", {"usage": usage, "metrics": {"latencyMs": 9000}}))
    return b"".join(messages)


def naive_ollama(body: bytes) -> dict[str, Any]:
    """Text, whole calls, the done reason and the counts of an Ollama stream, the simple way."""
    text: list[str] = []
    calls: list[tuple[Any, Any]] = []
    reason = counts = None
    for line in body.split(b"\n"):
        if not line.strip():
            continue
        chunk = json.loads(line)
        message = chunk.get("message") or {}
        if message.get("content"):
            text.append(message["content"])
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            calls.append((function.get("name"), function.get("arguments")))
        if chunk.get("done"):
            reason = chunk.get("done_reason")
            counts = (chunk.get("prompt_eval_count"), chunk.get("eval_count"))
    return {"text": "".join(text), "calls": calls, "finish": reason, "usage": counts}


def naive_converse(body: bytes) -> dict[str, Any]:
    """Text, calls with their joined input, stop reason and usage of a ConverseStream answer, as
    a boto3 user reads it: botocore's buffer fed the client's pieces, `json.loads` per payload."""
    text: list[str] = []
    names: dict[int, str] = {}
    inputs: defaultdict[int, list[str]] = defaultdict(list)
    reason = usage = None
    buffer = EventStreamBuffer()
    for piece in in_pieces(body):
        buffer.add_data(piece)
        for message in buffer:
            kind = message.headers.get(":event-type")
            event = json.loads(message.payload)
            if kind == "contentBlockStart":
                tool = event["start"].get("toolUse") or {}
                names[event["contentBlockIndex"]] = tool.get("name")
            elif kind == "contentBlockDelta":
                delta = event["delta"]
                if "text" in delta:
                    text.append(delta["text"])
                elif "toolUse" in delta:
                    inputs[event["contentBlockIndex"]].append(delta["toolUse"]["input"])
            elif kind == "messageStop":
                reason = event.get("stopReason")
            elif kind == "metadata":
                usage = event.get("usage")
    calls = {
        index: (names.get(index), json.loads("".join(parts))) for index, parts in inputs.items()
    }
    return {"text": "".join(text), "calls": calls, "finish": reason, "usage": usage}


def naive_pair(reduce: Callable[[bytes], dict[str, Any]]) -> Callable[[bytes, bytes], bool]:
    return lambda upstream, downstream: reduce(upstream) == reduce(downstream)


def calltap_pair(path: str, media_type: str) -> Callable[[bytes, bytes], str]:
    def compared(upstream: bytes, downstream: bytes) -> str:
        return compare_captures(
            Capture(upstream, path, content_type=media_type),
            Capture(downstream, path, content_type=media_type),
        ).verdict

    return compared


def naive_ndjson(body: bytes) -> int:
    return sum(1 for line in body.split(b"\n") if line.strip() and json.loads(line) is not None)


def calltap_ndjson(body: bytes) -> int:
    return sum(1 for line in ndjson.parse(body)[0] if orjson.loads(line.text) is not None)


def in_pieces(body: bytes) -> list[bytes]:
    return [body[start : start + PIECE] for start in range(0, len(body), PIECE)]


def botocore_eventstream(pieces: list[bytes]) -> int:
    buffer = EventStreamBuffer()
    count = 0
    for piece in pieces:
        buffer.add_data(piece)
        count += sum(1 for _ in buffer)
    return count


def calltap_eventstream(pieces: list[bytes]) -> int:
    decoder = eventstream.EventStreamDecoder()
    return sum(len(decoder.feed(piece)) for piece in pieces)


def best_seconds(stages: dict[str, Callable[..., Any]], *bodies: Any) -> dict[str, float]:
    """Each stage's fastest of REPEATS runs. Stages take turns, so a busy machine slows them
    alike, and each run starts from a collected heap."""
    best = dict.fromkeys(stages, float("inf"))
    for _ in range(REPEATS):
        for name, run in stages.items():
            gc.collect()
            started = time.perf_counter()
            run(*bodies)
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def fragment_stream(fragments: int) -> bytes:
    """A stream of about `fragments` argument fragments of FRAGMENT_CALLS parallel calls, in
    turns, and no text."""
    per_call = fragments / FRAGMENT_CALLS * FRAGMENT_CHARS
    size = max(int(per_call) - 170, 0)  # what `_arguments` writes around its `size` characters
    return chat_stream(text_chars=0, calls=FRAGMENT_CALLS, argument_chars=size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, default=FRAGMENTS,
                        help="argument fragments a leg of the fragment stream (0: skip it)")
    parser.add_argument("--fragments-only", action="store_true",
                        help="only the stream of argument fragments")
    arguments = parser.parse_args()
    if not arguments.fragments_only:
        sse_pair("capture", chat_stream(), {
            "calltap sse.parse": parse_only,
            "calltap sse.parse + load_envelope": parse_and_load,
        })
    if arguments.fragments:
        sse_pair("tool-call fragments", fragment_stream(arguments.fragments), {})
    if not arguments.fragments_only:
        framed_pairs()
        framings()


def sse_pair(title: str, upstream: bytes, stages: dict[str, Callable[..., Any]]) -> None:
    """`stages`, then compare_captures and the naive reducer, on an SSE pair: `upstream` and
    the same stream as a gateway forwards it."""
    downstream = as_forwarded(upstream)
    total_mb = (len(upstream) + len(downstream)) / 1e6
    verdict = calltap_compare(upstream, downstream)
    assert verdict == "equal", verdict
    assert naive_compare(upstream, downstream)
    fragments = upstream.count(b'"arguments"')
    print(
        f"{title}: upstream {len(upstream) / 1e6:.1f} MB, downstream"
        f" {len(downstream) / 1e6:.1f} MB, {upstream.count(b'data: ')} events"
        f" ({fragments} tool-call fragments);"
        f" verdict {verdict}; best of {REPEATS}"
    )
    stages = {**stages, "calltap compare_captures": calltap_compare,
              "naive line-split + json.loads": naive_compare}
    seconds = best_seconds(stages, upstream, downstream)
    for name, elapsed in seconds.items():
        print(f"{name:36} {elapsed * 1e3:8.1f} ms  {total_mb / elapsed:7.1f} MB/s")
    ratio = seconds["naive line-split + json.loads"] / seconds["calltap compare_captures"]
    print(f"calltap / naive: {ratio:.2f}x (target {TARGET}x)")


def framed_pairs() -> None:
    """parse + reduce + compare of an NDJSON pair and an event stream pair against the naive
    reducer of each framing."""
    for title, body, path, media_type, naive in (
        ("NDJSON pair, Ollama /api/chat", ollama_stream(), "/api/chat", "application/x-ndjson",
         naive_ollama),
        ("event stream pair, ConverseStream", converse_stream(),
         "/model/us.amazon.nova-pro-v1:0/converse-stream", "application/vnd.amazon.eventstream",
         naive_converse),
    ):
        downstream = bytes(body)
        stages = {"calltap compare_captures": calltap_pair(path, media_type),
                  "naive reducer": naive_pair(naive)}
        verdict = stages["calltap compare_captures"](body, downstream)
        assert verdict == "equal", verdict
        assert stages["naive reducer"](body, downstream)
        size_mb = 2 * len(body) / 1e6
        print(f"{title}: {size_mb:.1f} MB (both legs); verdict {verdict}; best of {REPEATS}")
        seconds = best_seconds(stages, body, downstream)
        for name, elapsed in seconds.items():
            print(f"{name:36} {elapsed * 1e3:8.1f} ms  {size_mb / elapsed:7.1f} MB/s")
        ours, baseline = seconds.values()
        print(f"calltap / naive: {baseline / ours:.2f}x (target at least {FRAMING_TARGET:.2f}x)")


def framings() -> None:
    """Decode throughput of the NDJSON and event stream framings against their baselines."""
    lines = ollama_stream()
    assert naive_ndjson(lines) == calltap_ndjson(lines)
    pieces = in_pieces(converse_stream())
    assert botocore_eventstream(pieces) == calltap_eventstream(pieces)
    for title, body, stages in (
        ("NDJSON, Ollama lines", lines, {
            "calltap ndjson + orjson.loads": calltap_ndjson,
            "naive split + json.loads": naive_ndjson,
        }),
        ("event stream, ConverseStream", pieces, {
            "calltap eventstream": calltap_eventstream,
            "botocore EventStreamBuffer": botocore_eventstream,
        }),
    ):
        size_mb = (len(body) if isinstance(body, bytes) else sum(map(len, body))) / 1e6
        print(f"{title}: {size_mb:.1f} MB; best of {REPEATS}")
        seconds = best_seconds(stages, body)
        for name, elapsed in seconds.items():
            print(f"{name:36} {elapsed * 1e3:8.1f} ms  {size_mb / elapsed:7.1f} MB/s")
        ours, naive = seconds.values()
        print(f"calltap / naive: {naive / ours:.2f}x (target at least {FRAMING_TARGET:.2f}x)")


if __name__ == "__main__":
    main()
