"""Comparator throughput on a ~15 MB OpenAI chat stream, against a naive reducer.

calltap compares every recorded pair, so its parse+reduce+compare has to keep up with the proxy.
The baseline is what people write first: split on newlines, `json.loads` each `data:` line,
accumulate text and tool-call arguments per index and compare the results. It ignores the
WHATWG rules (CR line endings, multi-line data, comments), decodes no argument strictly and
positions nothing. calltap does all of that and aims to run at least 1.5 times as fast.

Prints MB/s (both legs' bytes per second) for each stage of calltap and for the baseline, best of
a few runs, and the ratio. Run with `python bench/compare_throughput.py`.
"""

from __future__ import annotations

import gc
import json
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from _captures import as_forwarded, chat_stream
from calltap.compare import compare_captures
from calltap.jsonvalues import JsonInvalid, load_envelope
from calltap.sse import parse
from calltap.transcript import Capture

PATH = "/v1/chat/completions"
REPEATS = 7
TARGET = 1.5


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


def best_seconds(
    stages: dict[str, Callable[[bytes, bytes], Any]], upstream: bytes, downstream: bytes
) -> dict[str, float]:
    """Each stage's fastest of REPEATS runs. Stages take turns, so a busy machine slows them
    alike, and each run starts from a collected heap."""
    best = dict.fromkeys(stages, float("inf"))
    for _ in range(REPEATS):
        for name, run in stages.items():
            gc.collect()
            started = time.perf_counter()
            run(upstream, downstream)
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def main() -> None:
    upstream = chat_stream()
    downstream = as_forwarded(upstream)
    total_mb = (len(upstream) + len(downstream)) / 1e6
    verdict = calltap_compare(upstream, downstream)
    assert verdict == "equal", verdict
    assert naive_compare(upstream, downstream)
    print(
        f"capture: upstream {len(upstream) / 1e6:.1f} MB, downstream"
        f" {len(downstream) / 1e6:.1f} MB, {upstream.count(b'data: ')} events;"
        f" verdict {verdict}; best of {REPEATS}"
    )
    stages = {
        "calltap sse.parse": parse_only,
        "calltap sse.parse + load_envelope": parse_and_load,
        "calltap compare_captures": calltap_compare,
        "naive line-split + json.loads": naive_compare,
    }
    seconds = best_seconds(stages, upstream, downstream)
    for name, elapsed in seconds.items():
        print(f"{name:36} {elapsed * 1e3:8.1f} ms  {total_mb / elapsed:7.1f} MB/s")
    ratio = seconds["naive line-split + json.loads"] / seconds["calltap compare_captures"]
    print(f"calltap / naive: {ratio:.2f}x (target {TARGET}x)")


if __name__ == "__main__":
    main()
