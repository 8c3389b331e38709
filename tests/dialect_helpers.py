"""What the reducer tests of every dialect share: reading a body, what it found, hostile payloads.

`damaged` is the law every reducer obeys: a field of any wrong type (or a missing one) anywhere in
a well-formed stream never makes a reducer raise; it yields a transcript that compares and checks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from hypothesis import strategies as st

from calltap.codes import Code
from calltap.compare import check, compare
from calltap.dialects import transcribe
from calltap.transcript import Capture, Choice, Transcript

ARGUMENTS = st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.one_of(st.integers(-1000, 1000), st.text(max_size=8), st.booleans(), st.none()),
    max_size=4,
)
"""Argument objects of a tool call: short keys, scalar values of every JSON kind."""
CUTS = st.lists(st.integers(0, 80), max_size=6)
"""Where to cut an argument text into fragments (see `split`)."""
HOSTILE = [None, True, -1, 1.5, "", "x", [], [1], {}, {"a": 1}]
"""Values of the wrong type for any field a reducer reads."""
REMOVED = object()
"""Stands for a field taken out of its object."""


def read(body: bytes, **capture: Any) -> Transcript:
    return transcribe(Capture(body, **capture))


def record_starts(body: bytes, end: bytes) -> list[int]:
    """The byte offset of each record of a body whose records each end with `end` (`b"\\n\\n"`
    for SSE, `b"\\r\\n\\r\\n"` for Gemini's, `b"\\n"` for NDJSON): where positions point."""
    offsets, at = [], 0
    for record in body.split(end)[:-1]:
        offsets.append(at)
        at += len(record) + len(end)
    return offsets


def codes(transcript: Transcript) -> list[Code]:
    return [finding.code for finding in transcript.findings]


def token_counts(transcript: Transcript) -> tuple[int | None, int | None, int | None]:
    """Prompt, completion and total tokens of a transcript that has a usage."""
    usage = transcript.usage
    assert usage is not None
    return usage.prompt_tokens, usage.completion_tokens, usage.total_tokens


def clean_choice(transcript: Transcript, dialect: str, *, streaming: bool) -> Choice:
    """Choice 0 of a transcript that reads as `dialect` (a stream or not) without a finding."""
    assert (transcript.dialect, transcript.streaming) == (dialect, streaming)
    assert transcript.findings == []
    return transcript.choices[0]


def split(text: str, cuts: Iterable[int]) -> list[str]:
    """`text` cut at the given positions (out-of-range and repeated cuts are ignored)."""
    points = sorted({cut for cut in cuts if 0 < cut < len(text)})
    return [text[start:end] for start, end in zip([0, *points], [*points, len(text)], strict=True)]


def paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every key or list position in a JSON value, as a path from the root."""
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    else:
        children = []
    found = []
    for key, child in children:
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key)))
    return found


def damaged(
    payloads: list, *, depth: int = 1, removing: bool = False
) -> Iterator[tuple[tuple, list]]:
    """Copies of `payloads`, each with one field at `depth` or deeper set to a HOSTILE value (or
    taken out, when `removing` and the field has a name), with the path of that field."""
    for path in paths(payloads):
        if len(path) < depth:
            continue
        for value in [*HOSTILE, REMOVED] if removing and isinstance(path[-1], str) else HOSTILE:
            copy = json.loads(json.dumps(payloads))
            parent = copy
            for key in path[:-1]:
                parent = parent[key]
            if value is REMOVED:
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
            yield path, copy


def assert_survives(transcript: Transcript, dialect: str) -> None:
    """The transcript of a damaged body still belongs to its dialect, compares and checks."""
    assert transcript.dialect == dialect
    assert compare(transcript, transcript).verdict in ("equal", "inconclusive")
    assert check(transcript).verdict in ("clean", "defective", "inconclusive")
