"""Undoing a response's Content-Encoding before any framing reads the body.

`decode_content` undoes gzip, deflate (zlib-wrapped or raw) and identity; a list of codings is
undone right to left, as it was applied left to right. A cut gzip or deflate body yields what it
holds, so that a truncated capture still reads up to the cut. Any other coding is an
`EncodingError`, which `transcribe` turns into an unreadable side rather than a wrong one.
"""

from __future__ import annotations

import zlib


class EncodingError(ValueError):
    """A Content-Encoding this module cannot undo."""


def decode_content(body: bytes, content_encoding: str | None) -> bytes:
    """Undo a Content-Encoding header value; a cut gzip/deflate body yields what it holds."""
    if not content_encoding:
        return body
    codings = [coding.strip().lower() for coding in content_encoding.split(",")]
    for coding in reversed(codings):
        if coding in ("", "identity"):
            continue
        if coding in ("gzip", "x-gzip"):
            body = _inflate(body, 16 + zlib.MAX_WBITS, coding)
        elif coding == "deflate":
            zlib_wrapped = (
                len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
            )
            body = _inflate(body, zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS, coding)
        else:
            raise EncodingError(f"cannot decode Content-Encoding {coding!r}")
    return body


def _inflate(body: bytes, wbits: int, coding: str) -> bytes:
    try:
        return zlib.decompressobj(wbits).decompress(body)
    except zlib.error as error:
        raise EncodingError(f"cannot decode Content-Encoding {coding!r}: {error}") from error
