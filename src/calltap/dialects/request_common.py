"""Pieces every dialect's request reader shares: parts, media digests, arguments, tools, sampling.

A request reader turns one decoded request body into an `Ask` (`calltap.ask`). Shapes it cannot
read raise `RequestUnreadable`, which `calltap.dialects.asks` turns into REQUEST_UNREADABLE; a
part it does not know is skipped, not guessed at.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Hashable, Mapping
from typing import Any

from calltap.ask import SAMPLING_KEYS, Part, Tool, ToolChoice
from calltap.jsonvalues import JsonInvalid, canonical_key, decode_strict
from calltap.schemas import normalize, schema_key

EMPTY_OBJECT_KEY: Hashable = canonical_key({})
"""The arguments of a call sent with none (an empty string, or nothing): `{}`, as the providers'
own SDKs send it."""


class RequestUnreadable(ValueError):
    """A request body that is not a request of the dialect reading it."""


def need(value: Any, kind: type, what: str) -> Any:
    """`value` when it is of `kind`, else RequestUnreadable naming `what`."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RequestUnreadable(f"{what} is not a {kind.__name__}")
    return value


def listed(value: Any, what: str) -> list[Any]:
    """A list field that may be absent (an empty list then)."""
    return [] if value is None else need(value, list, what)


def text(value: str) -> Part:
    return Part("text", text=value)


def media_kind(mime: str | None, default: str = "file") -> str:
    """image, audio, video or document from a media type; `default` when it says nothing."""
    major = (mime or "").partition("/")[0].lower()
    if major in ("image", "audio", "video"):
        return major
    if (mime or "").lower() in ("application/pdf", "text/plain"):
        return "document"
    return default


def inline_media(kind: str, data: Any) -> Part:
    """A media part sent as base64 data: its digest is that of the decoded bytes, so that two
    encodings of the same bytes (line breaks, another padding) read alike."""
    if isinstance(data, (bytes, bytearray)):
        raw = bytes(data)
    else:
        encoded = need(data, str, f"{kind} data")
        try:
            raw = base64.b64decode("".join(encoded.split()) + "==", validate=False)
        except (binascii.Error, ValueError):
            raw = encoded.encode()
    return Part(kind, digest="sha256:" + hashlib.sha256(raw).hexdigest())


def url_media(kind: str, url: Any) -> Part:
    """A media part given by URL; a `data:` URL is inline data."""
    url = need(url, str, f"{kind} url")
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        mime = header[5:].partition(";")[0]
        return inline_media(media_kind(mime, kind), data)
    return Part(kind, digest="url:" + url)


def arguments_key(arguments: Any) -> Hashable:
    """Arguments as sent in a request's history (a JSON string, or an object) by meaning: an
    empty string or nothing is `{}`; text that is not JSON compares as its text."""
    if arguments is None:
        return EMPTY_OBJECT_KEY
    if isinstance(arguments, str):
        if not arguments.strip():
            return EMPTY_OBJECT_KEY
        try:
            return decode_strict(arguments).key
        except JsonInvalid:
            return ("raw", arguments)
    return canonical_key(arguments)


def tool(name: Any, description: Any, parameters: Any, strict: Any,
         *, without: frozenset[str] = frozenset()) -> Tool:
    """A tool offered, its parameter schema normalized (`schemas.normalize`)."""
    normalized = normalize(parameters, without=without) if parameters is not None else None
    return Tool(
        name=need(name, str, "a tool's name"),
        description=description if isinstance(description, str) else None,
        schema=normalized,
        schema_key=schema_key(normalized),
        strict=strict if isinstance(strict, bool) else None,
        raw_schema=parameters,
    )


def choice(mode: str, name: Any = None) -> ToolChoice:
    if mode == "function":
        return ToolChoice("function", need(name, str, "a forced tool's name"))
    return ToolChoice(mode)  # type: ignore[arg-type]


def sampling(source: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """The sampling parameters present in `source`, renamed from the dialect's names (`names`:
    its name -> the Ask's) and checked to be numbers. A null is absent; a 0 is a value."""
    found: dict[str, Any] = {}
    for name, ask_name in names.items():
        value = source.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RequestUnreadable(f"{name} is not a number")
        found[ask_name] = value
    return found


OPENAI_SAMPLING = {key: key for key in SAMPLING_KEYS if key != "top_k"}
"""Chat Completions' and Responses' names for sampling: the Ask's own (no top_k)."""


def stop_sequences(value: Any) -> tuple[str, ...] | None:
    """`stop` as a string or a list of strings; null or absent is None."""
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(need(item, str, "a stop sequence") for item in need(value, list, "stop"))


def optional_int(value: Any, what: str) -> int | None:
    return None if value is None else need(value, int, what)
