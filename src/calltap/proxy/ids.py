"""Request identity: which client ids we accept, how we mint ours, where a capture lives.

A request id names a directory on disk and travels through the gateway in `X-Request-ID`,
so an accepted id is a short run of `[A-Za-z0-9._-]` that can never climb out of the
recordings tree. Minted ids sort by creation time, so `ls` lists captures in order. A
capture key is the id, or `<id>+N` when that id already has a capture that day: `+` never
occurs in an id, so a suffixed key cannot collide with a client's id.

The W3C `traceparent` helpers give the second pairing method its trace id.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import time
from pathlib import Path

REQUEST_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
"""What a client's `X-Request-ID` must look like to be used as a directory name (use
`fullmatch`: `$` alone would let a trailing newline through)."""

_DOT_NAMES = frozenset({".", ".."})
_SUFFIX_SEPARATOR = "+"
_DIR_MODE = 0o700
_sequence = itertools.count()


def is_request_id(value: str) -> bool:
    """True when `value` is safe and accepted as a request id."""
    return REQUEST_ID_PATTERN.fullmatch(value) is not None and value not in _DOT_NAMES


def accept_client_id(value: str | None) -> str | None:
    """The client's `X-Request-ID` when it is usable as a request id, else None."""
    if value is None or not is_request_id(value):
        return None
    return value


def new_request_id(now: float | None = None) -> str:
    """A fresh id like `20261130T041150123Z-0000002a-9f3c1e`: UTC time to the millisecond, a
    per-process sequence number (fixed width, so ids from one process sort in creation order
    even within a millisecond) and random hex (so two processes never mint the same id). The
    randomness is `random`'s, seeded from the OS at start and again after a fork: an id names a
    directory and is no secret, and a getrandom call per id is a syscall on the hot path."""
    millis = int((time.time() if now is None else now) * 1000)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(millis // 1000))
    sequence = next(_sequence) & 0xFFFFFFFF
    return f"{stamp}{millis % 1000:03d}Z-{sequence:08x}-{random.getrandbits(24):06x}"


def reserve_capture_dir(day_dir: Path, request_id: str) -> tuple[str, Path]:
    """Claim a new, empty capture directory in `day_dir` (created 0700 with its missing
    parents) and return (capture key, directory).

    The key is `request_id` when free, else `<id>+2`, `<id>+3`, …; a capture never reuses
    or overwrites an existing directory. `mkdir` without exist_ok is the atomic claim, so
    threads and processes racing on one id each get their own directory. A client reusing
    one id all day costs a logarithmic number of probes per request, not a linear scan.
    """
    if not is_request_id(request_id):
        raise ValueError(f"not a request id: {request_id!r}")
    _make_private_dirs(day_dir)
    number = 1
    while True:
        key = _capture_key(request_id, number)
        path = day_dir / key
        if path.parent != day_dir or path.name != key:
            raise ValueError(f"capture key {key!r} escapes {day_dir}")
        try:
            path.mkdir(mode=_DIR_MODE)
        except FileExistsError:
            number = _next_free_guess(day_dir, request_id, number)
            continue
        return key, path


def _capture_key(request_id: str, number: int) -> str:
    return request_id if number == 1 else f"{request_id}{_SUFFIX_SEPARATOR}{number}"


def _next_free_guess(day_dir: Path, request_id: str, taken: int) -> int:
    """A suffix number above `taken` that is probably free: gallop over existing keys, then
    bisect. Only a hint (the mkdir that follows decides), so a gap left by a deleted
    capture or a concurrent claim costs nothing but another try."""

    def exists(number: int) -> bool:
        return os.path.lexists(day_dir / _capture_key(request_id, number))

    low, step = taken, 1
    while exists(low + step):
        low, step = low + step, step * 2
    high = low + step
    while high - low > 1:
        middle = (low + high) // 2
        if exists(middle):
            low = middle
        else:
            high = middle
    return high


def _make_private_dirs(directory: Path) -> None:
    """Create `directory` and any missing parents, each 0700; existing ones are left as is."""
    missing: list[Path] = []
    current = directory
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        path.mkdir(mode=_DIR_MODE, exist_ok=True)


_TRACEPARENT = re.compile(
    r"(?P<version>[0-9a-f]{2})-(?P<trace_id>[0-9a-f]{32})-(?P<parent_id>[0-9a-f]{16})"
    r"-(?P<flags>[0-9a-f]{2})(?P<rest>-.*)?",
    re.DOTALL,
)
_ZERO_TRACE_ID = "0" * 32
_ZERO_PARENT_ID = "0" * 16


def parse_traceparent(value: str | None) -> str | None:
    """The trace id of a valid W3C `traceparent` header, else None.

    Version 00 must be exactly `00-<32 hex>-<16 hex>-<2 hex>` in lower case; all-zero trace
    or parent ids and version `ff` are invalid. A higher version is read by its version-00
    prefix and may carry more fields after a `-`, as Trace Context level 1 asks.
    """
    if value is None:
        return None
    match = _TRACEPARENT.fullmatch(value.strip(" \t"))
    if match is None:
        return None
    version, trace_id = match["version"], match["trace_id"]
    if version == "ff" or (version == "00" and match["rest"] is not None):
        return None
    if trace_id == _ZERO_TRACE_ID or match["parent_id"] == _ZERO_PARENT_ID:
        return None
    return trace_id


def new_traceparent() -> tuple[str, str]:
    """A fresh version-00 `traceparent` and its trace id, for requests that came without
    one. The sampled flag is set so a gateway tracing with the usual parent-based sampler
    keeps recording these requests as it did before calltap stood in front of it. Ids need to
    be unique, not secret (W3C Trace Context), so `random` serves, as for request ids."""
    trace_id = f"{random.getrandbits(128) or 1:032x}"
    return f"00-{trace_id}-{random.getrandbits(64) or 1:016x}-01", trace_id
