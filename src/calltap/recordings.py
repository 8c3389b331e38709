"""The recordings format: the one place that knows how a recordings tree is laid out and named.

```
recordings/<UTC day>/<request id>/
  downstream.<ext>             the response body as sent to the client
  upstream.<ext>               the response body of the compared upstream attempt
  upstream.attempt-N.<ext>     the other attempts, when the gateway retried
  downstream.request  upstream.request  upstream.attempt-N.request   the request bodies
  pair.json                    metadata and the comparison (`format` says which version)
```

`<ext>` says how the body is framed: `sse` for an event stream, `ndjson` for NDJSON,
`eventstream` for AWS's binary event stream, `json` for a JSON body, `body` for anything else.
A body still being written carries `.partial`; one left behind by a crash keeps it.

Plain names and data only: the proxy, the commands and the tests build paths with these
functions and read pair.json through `read_pair`, and nothing else spells a file name.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Literal

import orjson

from calltap.compare_requests import PairRequests, RecordedRequest
from calltap.transcript import Capture

FORMAT = 1
"""pair.json's format version; a reader refuses a newer one rather than misread it."""
PAIR_JSON = "pair.json"
PARTIAL = ".partial"
REQUEST = "request"
SIDES = ("downstream", "upstream")
Side = Literal["downstream", "upstream"]
BODY_EXTENSIONS = ("sse", "ndjson", "eventstream", "json", "body")
MEDIA_EXTENSIONS = {
    "text/event-stream": "sse",
    "application/x-ndjson": "ndjson",
    "application/jsonl": "ndjson",
    "application/vnd.amazon.eventstream": "eventstream",
    "application/json": "json",
}
COMPLETE = "complete"
CLIENT_ABORTED = "client_aborted"
UPSTREAM_RESET = "upstream_reset"
UPSTREAM_UNREACHABLE = "upstream_unreachable"
TIMEOUT = "timeout"
SHUTDOWN = "shutdown"
CAPTURE_TRUNCATED = "capture_truncated"
REQUEST_TOO_LARGE = "request_too_large"
"""How a leg `ended`, as pair.json says it."""
HUNG_UP = frozenset({CLIENT_ABORTED, SHUTDOWN})
"""Endings by hang-up, which the bytes relayed before it may show to be a complete leg."""


DAY_NAME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
"""A day directory's name (UTC, `YYYY-MM-DD`)."""
KEY_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}(?:\+[0-9]{1,9})?")
"""A capture directory's name: a request id, `+N` when an earlier capture had that id."""
LEG_FILE_NAME = re.compile(
    r"(?:downstream|upstream(?:\.attempt-[0-9]{1,4})?)\.(?:sse|ndjson|eventstream|json|body|request)"
    r"(?:\.partial)?"
)
"""Every body and request file a capture directory may hold."""


class PairUnreadable(ValueError):
    """A pair.json that cannot be used: missing, not JSON, not an object, or a newer format."""


def day_directory(root: Path, timestamp: float) -> Path:
    """The UTC day directory (`recordings/YYYY-MM-DD`) for wall-clock time `timestamp`."""
    return root / time.strftime("%Y-%m-%d", time.gmtime(timestamp))


def body_extension(content_type: str) -> str:
    """The file extension of a response body with this Content-Type."""
    media = content_type.split(";", 1)[0].strip().lower()
    extension = MEDIA_EXTENSIONS.get(media)
    if extension is not None:
        return extension
    return "json" if media.endswith("+json") else "body"


def stem(side: Side, attempt: int | None = None) -> str:
    """A leg's file stem: `downstream`, `upstream`, or `upstream.attempt-N` for a retry."""
    if side == "upstream" and attempt is not None and attempt > 1:
        return attempt_stem(attempt)
    return side


def attempt_stem(attempt: int) -> str:
    return f"upstream.attempt-{attempt}"


def body_name(leg_stem: str, extension: str) -> str:
    return f"{leg_stem}.{extension}"


def request_name(leg_stem: str) -> str:
    return f"{leg_stem}.{REQUEST}"


def restemmed(name: str, old: str, new: str) -> str | None:
    """`name` with its stem `old` replaced by `new` (`upstream.attempt-2.sse` to `upstream.sse`);
    None when `name` is not one of that stem's files."""
    prefix = old + "."
    return new + "." + name.removeprefix(prefix) if name.startswith(prefix) else None


def leg_body(directory: Path, side: Side) -> Path | None:
    """The recorded body of a side's compared leg in a capture directory, if there is one."""
    for extension in BODY_EXTENSIONS:
        path = directory / body_name(side, extension)
        if path.is_file():
            return path
    return None


def side_of_body(name: str) -> Side | None:
    """The side a file name holds the compared body of (`upstream.sse` is upstream); None for
    attempts, requests, `.partial` files and anything else."""
    leg_stem, dot, extension = name.partition(".")
    if dot and leg_stem in SIDES and extension in BODY_EXTENSIONS:
        return leg_stem  # type: ignore[return-value]
    return None


def capture_directories(root: Path) -> list[Path]:
    """Every directory under `root` (itself included) that holds a compared leg's body."""
    found = {
        path.parent
        for side in SIDES
        for extension in BODY_EXTENSIONS
        for path in root.rglob(body_name(side, extension))
        if path.is_file()
    }
    return sorted(found)


def is_day(name: str) -> bool:
    return DAY_NAME.fullmatch(name) is not None


def is_key(name: str) -> bool:
    return KEY_NAME.fullmatch(name) is not None and name not in (".", "..")


def is_leg_file(name: str) -> bool:
    """Whether `name` is one of the body or request files of the format (`.partial` included):
    the only names a reader outside the proxy may be asked for."""
    return LEG_FILE_NAME.fullmatch(name) is not None


def pair_directory(root: Path, day: str, key: str) -> Path | None:
    """`root/day/key` when both names are the layout's (None otherwise, so that no request
    path can name anything else)."""
    if not (is_day(day) and is_key(key)):
        return None
    return root / day / key


def find_capture(root: Path, key: str) -> Path | None:
    """The capture directory named `key` that holds a pair.json, in the newest day that has one
    (a look at each day directory, never a walk of the tree)."""
    if not is_key(key):
        return None
    try:
        days = sorted((entry.name for entry in root.iterdir() if is_day(entry.name)),
                      reverse=True)
    except OSError:
        return None
    for day in days:
        if (root / day / key / PAIR_JSON).is_file():
            return root / day / key
    return None


def pair_mtime_ns(directory: Path) -> int | None:
    """pair.json's modification time, or None when the capture has none yet."""
    try:
        return (directory / PAIR_JSON).stat().st_mtime_ns
    except OSError:
        return None


def capture_files(directory: Path) -> list[str]:
    """The body and request files in a capture directory, by name."""
    try:
        return sorted(entry.name for entry in directory.iterdir()
                      if entry.is_file() and is_leg_file(entry.name))
    except OSError:
        return []


def leftovers(root: Path) -> list[str]:
    """`.partial` files an earlier run left in the tree, relative to `root`."""
    return sorted(str(path.relative_to(root)) for path in root.glob(f"*/*/*{PARTIAL}"))


def encode_pair(document: dict[str, Any]) -> bytes:
    """pair.json's bytes: `format` first, then the document, indented, one trailing newline."""
    return orjson.dumps({"format": FORMAT, **document}, option=orjson.OPT_INDENT_2) + b"\n"


def read_pair(directory: Path) -> dict[str, Any]:
    """A capture directory's pair.json. A file without `format` is the first version."""
    try:
        document = orjson.loads((directory / PAIR_JSON).read_bytes())
    except (OSError, orjson.JSONDecodeError) as error:
        raise PairUnreadable(f"{directory / PAIR_JSON}: {error}") from error
    if not isinstance(document, dict):
        raise PairUnreadable(f"{directory / PAIR_JSON}: not a JSON object")
    version = document.get("format", FORMAT)
    if not isinstance(version, int) or version > FORMAT:
        raise PairUnreadable(f"{directory / PAIR_JSON}: format {version!r} is newer than {FORMAT}")
    return document


def pair_legs(directory: Path) -> dict[str, dict[str, Any]]:
    """The compared legs a pair.json describes, by side (empty when there is no usable one)."""
    try:
        legs = read_pair(directory).get("legs")
    except PairUnreadable:
        return {}
    if not isinstance(legs, dict):
        return {}
    found: dict[str, dict[str, Any]] = {}
    attempts = legs.get("upstream_attempts")
    if isinstance(attempts, list) and attempts and isinstance(attempts[-1], dict):
        found["upstream"] = attempts[-1]
    for side in SIDES:
        if isinstance(legs.get(side), dict):
            found[side] = legs[side]
    return found


def capture_of(body: bytes, leg: dict[str, Any] | None) -> Capture:
    """A Capture whose path, status, Content-Encoding, Content-Type and truncation come from a
    pair.json leg."""
    if not leg:
        return Capture(body)
    status = leg.get("status")
    path = leg.get("path")
    encoding = leg.get("content_encoding")
    return Capture(
        body,
        path=path if isinstance(path, str) else None,
        content_encoding=encoding if isinstance(encoding, str) and encoding else
        _header(leg.get("response_headers"), "content-encoding"),
        status=status if isinstance(status, int) else None,
        truncated=leg.get("ended") == CAPTURE_TRUNCATED,
        content_type=_header(leg.get("response_headers"), "content-type"),
    )


def request_body(directory: Path, leg: dict[str, Any] | None) -> bytes | None:
    """The request body a pair.json leg names (`request_file`), when it is a readable file in
    `directory` itself (a name that would leave it is never read)."""
    return _named_file(directory, leg, "request_file")


def pair_requests(directory: Path) -> PairRequests | None:
    """A recorded pair's requests, as its pair.json names them (without one, the files named as
    calltap names them: `downstream.request`, `upstream.request`): the client's, the compared
    attempt's, and the earlier attempts' by number; None unless the first two were recorded."""
    try:
        document = read_pair(directory)
    except PairUnreadable:
        document = {}
    legs = pair_legs(directory) or {side: {"request_file": request_name(side)}
                                    for side in SIDES_REQUESTS}
    client, compared = (_recorded_request(directory, legs.get(side)) for side in SIDES_REQUESTS)
    if client is None or compared is None:
        return None
    earlier: dict[int, RecordedRequest] = {}
    chosen = legs["upstream"].get("request_file")
    for leg in upstream_attempts(document):
        request = _recorded_request(directory, leg)
        if (request is not None and isinstance(leg.get("attempt"), int)
                and leg.get("request_file") != chosen):
            earlier[leg["attempt"]] = request
    return PairRequests(client, compared, earlier)


SIDES_REQUESTS = ("downstream", "upstream")
"""The sides whose requests are compared, the client's first."""


def _recorded_request(directory: Path, leg: dict[str, Any] | None) -> RecordedRequest | None:
    body = request_body(directory, leg)
    if body is None or leg is None:
        return None
    path = leg.get("path")
    return RecordedRequest(body, path if isinstance(path, str) else None)


def response_body(directory: Path, leg: dict[str, Any] | None) -> bytes | None:
    """The response body a pair.json leg names (`file`), read as `request_body` reads its
    request."""
    return _named_file(directory, leg, "file")


def _named_file(directory: Path, leg: dict[str, Any] | None, field: str) -> bytes | None:
    name = leg.get(field) if leg else None
    if not isinstance(name, str) or not _plain_name(name):
        return None
    try:
        return (directory / name).read_bytes()
    except OSError:
        return None


def _header(headers: Any, name: str) -> str | None:
    if not isinstance(headers, dict):
        return None
    for key, value in headers.items():
        if key.lower() == name and isinstance(value, str):
            return value
    return None


CASE_README = "README.md"
"""The note a regression case exported from a pair carries beside its pair.json."""


def upstream_attempts(document: dict[str, Any]) -> list[dict[str, Any]]:
    """A pair.json's upstream attempts in the order the gateway made them: `upstream_attempts`
    when the gateway retried, else the one `upstream` leg (empty when there is none)."""
    legs = document.get("legs")
    if not isinstance(legs, dict):
        return []
    attempts = legs.get("upstream_attempts")
    if isinstance(attempts, list) and attempts:
        return [leg for leg in attempts if isinstance(leg, dict)]
    upstream = legs.get("upstream")
    return [upstream] if isinstance(upstream, dict) else []


def leg_files(leg: dict[str, Any]) -> list[str]:
    """The file names a pair.json leg names (its body, then its request), those that are plain
    names inside the capture directory."""
    names = (leg.get("file"), leg.get("request_file"))
    return [name for name in names if isinstance(name, str) and _plain_name(name)]


def write_pair_directory(
    directory: Path, document: dict[str, Any], files: dict[str, bytes], readme: str
) -> None:
    """Create `directory` (0700; it must not exist) holding `files` (names a pair.json's legs
    give), pair.json and the README, each 0600, as a recording is kept. When a write fails the
    directory (new, so wholly this call's) is removed with what it holds."""
    for name in files:
        if not _plain_name(name) or name in (PAIR_JSON, CASE_README):
            raise ValueError(f"not a capture file name: {name!r}")
    directory.mkdir(mode=0o700)
    written = {**files, PAIR_JSON: encode_pair(document), CASE_README: readme.encode()}
    try:
        for name, data in written.items():
            _write_private(directory / name, data)
    except OSError:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _plain_name(name: str) -> bool:
    return Path(name).name == name and name not in ("", ".", "..")
