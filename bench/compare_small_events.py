"""The comparator's cost per pair on a chat stream of small events, the shape most pairs have.

The first pair is two OpenAI Chat Completions streams of 204 events (a role chunk, 200 text
deltas of a word each, the finish chunk, the usage chunk and `[DONE]`, about 54 KB), the
downstream one as a gateway re-emits it with every chunk's `id` rewritten, so that the legs
differ and are really compared. The second is an agent's turn: one tool call whose arguments
stream in 400 fragments, the downstream leg as a gateway re-serializes it (`json.dumps`'s
spacing, nulls dropped, `"type": "function"` on every fragment). The worker compares every
finished pair, so its fixed cost per pair is what matters here, not MB/s.

Both ways to read such a body, taking turns on the same pair: `compare_captures` as it runs (the
body cut into its plain `data:` blocks, each chunk decoded into a typed envelope), and the general
way (the SSE parser, orjson on every payload, the reducer's dict path), which reads every other
body. Prints the CPU time of a pair (`time.process_time`: other work on the machine counts
less than in wall time) for each, best and median of REPEATS rounds, and the ratio of the two in
each round (the rounds take turns, so a busy machine slows both alike). The target, for the text
pair, is at most 0.45 ms a pair. Run with `python bench/compare_small_events.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from itertools import pairwise
from statistics import median
from typing import Any
from unittest import mock

import orjson

from _captures import WORDS, _delta, _envelope, _events, as_forwarded
from calltap.compare import Comparison, compare_captures
from calltap.dialects import framing
from calltap.report import comparison_json
from calltap.transcript import Capture

PATH = "/v1/chat/completions"
DELTAS = 200
REQUEST = orjson.dumps({
    "model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "a benchmark request"}],
})
REPEATS = 9
PAIRS = 200
"""Pairs compared in a round, one after the other."""
TARGET_MS = 0.45


def small_events(chunk_id: str) -> bytes:
    """A stream of DELTAS one-word text deltas between its role chunk and its finish and usage
    chunks, every chunk carrying `chunk_id`."""
    payloads = [_delta({"role": "assistant", "content": "", "refusal": None})]
    payloads += [_delta({"content": f" {WORDS[n % len(WORDS)]}"}) for n in range(DELTAS)]
    payloads.append(_delta({}, finish_reason="stop"))
    payloads.append(_envelope([], {"prompt_tokens": 36, "completion_tokens": DELTAS,
                                   "total_tokens": 36 + DELTAS}))
    blocks = [b"data: " + orjson.dumps({**payload, "id": chunk_id}) + b"\n\n"
              for payload in payloads]
    return b"".join([*blocks, b"data: [DONE]\n\n"])


FRAGMENTS = 400


def argument_fragments() -> bytes:
    """One call to `write_file`, its arguments (a path and about 1.6 KB of text) streamed in
    FRAGMENTS pieces, then the finish and usage chunks."""
    arguments = orjson.dumps({"path": "notes/plan.md", "content": " ".join(
        WORDS[n % len(WORDS)] for n in range(280))}).decode()
    payloads = [_delta({"role": "assistant", "content": None}),
                _delta({"tool_calls": [{"index": 0, "id": "call_Qx3b0nD4kUe1", "type": "function",
                                        "function": {"name": "write_file", "arguments": ""}}]})]
    cuts = [len(arguments) * n // FRAGMENTS for n in range(FRAGMENTS + 1)]
    payloads += [_delta({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                 for piece in (arguments[start:end] for start, end in pairwise(cuts))]
    payloads.append(_delta({}, finish_reason="tool_calls"))
    payloads.append(_envelope([], {"prompt_tokens": 212, "completion_tokens": FRAGMENTS,
                                   "total_tokens": 212 + FRAGMENTS}))
    return _events(orjson.dumps(payload).decode() for payload in payloads)


def compared(upstream: bytes, downstream: bytes) -> Comparison:
    return compare_captures(Capture(upstream, PATH, status=200),
                            Capture(downstream, PATH, status=200), downstream_request=REQUEST)


def the_general_way() -> AbstractContextManager[Any]:
    """Every body read as one that is not plain blocks is."""
    return mock.patch.object(framing.SSEFrames, "blocks", lambda self: None)


def round_ms(way: Callable[[], AbstractContextManager[Any]], upstream: bytes,
             downstream: bytes) -> float:
    with way():
        started = time.process_time()
        for _ in range(PAIRS):
            compared(upstream, downstream)
        return (time.process_time() - started) / PAIRS * 1e3


def main() -> None:
    upstream = argument_fragments()
    pairs = {
        "text deltas": (small_events("chatcmpl-a7853543ddddf0a3bb2bcf56"),
                        small_events("gatewayx-a7853543ddddf0a3bb2bcf56")),
        "argument fragments": (upstream, as_forwarded(upstream)),
    }
    for name, (upstream, downstream) in pairs.items():
        measure(name, upstream, downstream)


def measure(name: str, upstream: bytes, downstream: bytes) -> None:
    ours = compared(upstream, downstream)
    assert ours.verdict == "equal", ours.verdict
    with the_general_way():
        assert comparison_json(ours) == comparison_json(compared(upstream, downstream))
    print(f"{name}: two streams of {upstream.count(b'data: ')} events, {len(upstream)} and"
          f" {len(downstream)} bytes; verdict {ours.verdict}; {REPEATS} rounds of {PAIRS} pairs")
    stages = {"compare_captures": nullcontext, "the general way": the_general_way}
    rounds: dict[str, list[float]] = {stage: [] for stage in stages}
    for _ in range(REPEATS):
        for stage, way in stages.items():
            rounds[stage].append(round_ms(way, upstream, downstream))
    for stage, times in rounds.items():
        print(f"  {stage:18} CPU a pair: best {min(times):.3f} ms, median {median(times):.3f} ms")
    ratios = [ours / general for ours, general
              in zip(rounds["compare_captures"], rounds["the general way"], strict=True)]
    target = f"; target: at most {TARGET_MS} ms a pair" if name == "text deltas" else ""
    print(f"  compare_captures / the general way, round by round: median {median(ratios):.2f}"
          f" ({min(ratios):.2f}-{max(ratios):.2f}){target}")


if __name__ == "__main__":
    main()
