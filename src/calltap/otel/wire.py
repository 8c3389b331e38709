"""OTLP's protobuf messages for calltap's spans and log records, written straight to bytes.

Sans-IO: `PairSpan`s in, the body of an OTLP/HTTP export request out (`application/x-protobuf`).
The messages and field numbers are those of opentelemetry-proto (`trace/v1/trace.proto`,
`logs/v1/logs.proto`, `common/v1/common.proto`); only the fields calltap fills are written. A
dozen small helpers over `bytearray` cost a fraction of building the generated classes' objects
field by field, which is what keeps a pair's span under a tenth of a millisecond; the tests
decode every body with opentelemetry-proto's own classes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from calltap.otel.span import SPAN_KIND_CLIENT, PairSpan, SpanEvent

__all__ = ["SPAN_KIND_CLIENT", "export_request", "log_messages", "span_message"]
STATUS_ERROR = 2
SEVERITY_WARN = 13
SEVERITY_ERROR = 17
SEVERITIES = {"fatal": SEVERITY_ERROR, "negotiable": SEVERITY_WARN}
SCOPE = "calltap"
_FIXED64 = struct.Struct("<Q")
_DOUBLE = struct.Struct("<d")


def _varint(out: bytearray, value: int) -> None:
    value &= 0xFFFFFFFFFFFFFFFF
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _tag(out: bytearray, field: int, wire: int) -> None:
    _varint(out, field << 3 | wire)


def _bytes(out: bytearray, field: int, value: bytes) -> None:
    _tag(out, field, 2)
    _varint(out, len(value))
    out += value


def _string(out: bytearray, field: int, value: str) -> None:
    _bytes(out, field, value.encode("utf-8", "surrogatepass"))


def _fixed64(out: bytearray, field: int, value: int) -> None:
    _tag(out, field, 1)
    out += _FIXED64.pack(value)


def _length(size: int) -> bytes:
    if size < 0x80:
        return _SMALL[size]
    out = bytearray()
    _varint(out, size)
    return bytes(out)


_SMALL = [bytes((size,)) for size in range(0x80)]


def _any_value(value: Any) -> bytes:
    """An AnyValue: string 1, bool 2, int64 3, double 4, array 5."""
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        return b"\x0a" + _length(len(data)) + data
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        if 0 <= value < 0x80:
            return b"\x18" + _SMALL[value]
        out = bytearray(b"\x18")
        _varint(out, value)
        return bytes(out)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    if isinstance(value, list | tuple):
        array = b"".join(b"\x0a" + _length(len(item)) + item
                         for item in map(_any_value, value))
        return b"\x2a" + _length(len(array)) + array
    return _any_value(str(value))


_KEYS: dict[str, bytes] = {}
"""Each attribute key's encoded field (`1: key`): calltap's keys are a fixed few dozen."""


def _key(key: str) -> bytes:
    encoded = _KEYS.get(key)
    if encoded is None:
        data = key.encode("utf-8", "surrogatepass")
        encoded = b"\x0a" + _length(len(data)) + data
        if len(_KEYS) < 1024:
            _KEYS[key] = encoded
    return encoded


REPEATED = frozenset({
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
    "gen_ai.request.stream", "http.response.status_code", "calltap.upstream.status_code",
    "calltap.mode", "calltap.verdict", "calltap.pairing", "calltap.attempts", "error.type",
    "gen_ai.evaluation.name", "gen_ai.evaluation.score.label", "gen_ai.evaluation.explanation",
    "calltap.severity", "calltap.alarm", "calltap.side", "calltap.choice", "calltap.count",
    "service.name",
})
"""Attributes whose values come from a small set (codes, verdicts, models, sides): each
(key, value) is encoded once and its bytes reused."""
_ENCODED: dict[tuple[int, str, type, Any], bytes] = {}
_MAX_ENCODED = 4096


def _field(field: int, key: str, value: Any) -> bytes:
    """One attribute as a length-delimited field: a KeyValue (key 1, value 2)."""
    encoded = _any_value(value)
    pair = _key(key) + b"\x12" + _length(len(encoded)) + encoded
    return _length(field << 3 | 2) + _length(len(pair)) + pair


def _attributes(out: bytearray, field: int, attributes: Mapping[str, Any]) -> None:
    for key, value in attributes.items():
        if key in REPEATED and not isinstance(value, list):
            memo = (field, key, type(value), value)  # the type: True == 1 == 1.0
            cached = _ENCODED.get(memo)
            if cached is None:
                cached = _field(field, key, value)
                if len(_ENCODED) < _MAX_ENCODED:
                    _ENCODED[memo] = cached
            out += cached
        else:
            out += _field(field, key, value)


def _event(item: SpanEvent) -> bytes:
    """Span.Event: time 1, name 2, attributes 3."""
    out = bytearray()
    _fixed64(out, 1, item.timestamp)
    _string(out, 2, item.name)
    _attributes(out, 3, item.attributes)
    return bytes(out)


def span_message(span: PairSpan) -> bytes:
    """Span: trace id 1, span id 2, parent 4, name 5, kind 6, start 7, end 8, attributes 9,
    events 11, status 15 (message 2, code 3), flags 16 (sampled)."""
    out = bytearray()
    _bytes(out, 1, span.trace_id.to_bytes(16, "big"))
    _bytes(out, 2, span.span_id.to_bytes(8, "big"))
    if span.parent_span_id is not None:
        _bytes(out, 4, span.parent_span_id.to_bytes(8, "big"))
    _string(out, 5, span.name)
    _tag(out, 6, 0)
    out.append(span.kind)
    _fixed64(out, 7, span.start)
    _fixed64(out, 8, span.end)
    _attributes(out, 9, span.attributes)
    for item in span.events:
        _bytes(out, 11, _event(item))
    if span.error is not None:
        status = bytearray()
        _string(status, 2, span.error)
        _tag(status, 3, 0)
        status.append(STATUS_ERROR)
        _bytes(out, 15, bytes(status))
    _tag(out, 16, 5)
    out += (0x301 if span.parent_span_id is not None else 0x101).to_bytes(4, "little")
    return bytes(out)


def log_messages(span: PairSpan) -> Iterable[bytes]:
    """Each of the span's events as a LogRecord in its context: time 1, severity number 2 and
    text 3, body 5, attributes 6, flags 8, trace id 9, span id 10, observed time 11, event
    name 12."""
    trace_id, span_id = span.trace_id.to_bytes(16, "big"), span.span_id.to_bytes(8, "big")
    for item in span.events:
        severity = str(item.attributes.get("calltap.severity", ""))
        out = bytearray()
        _fixed64(out, 1, item.timestamp)
        _tag(out, 2, 0)
        _varint(out, SEVERITIES.get(severity, SEVERITY_WARN))
        _string(out, 3, severity)
        _bytes(out, 5, _any_value(item.attributes.get("gen_ai.evaluation.explanation", "")))
        _attributes(out, 6, item.attributes)
        _tag(out, 8, 5)
        out += (1).to_bytes(4, "little")
        _bytes(out, 9, trace_id)
        _bytes(out, 10, span_id)
        _fixed64(out, 11, item.timestamp)
        _string(out, 12, item.name)
        yield bytes(out)


def export_request(resource: Mapping[str, Any], messages: Iterable[bytes]) -> bytes:
    """ExportTraceServiceRequest or ExportLogsServiceRequest (their shapes are alike): one
    resource (1: its attributes at 1), one scope (2: name at 1), the messages (2)."""
    scope = bytearray()
    _bytes(scope, 1, _scope())
    for message in messages:
        _bytes(scope, 2, message)
    resource_message = bytearray()
    _attributes(resource_message, 1, resource)
    group = bytearray()
    _bytes(group, 1, bytes(resource_message))
    _bytes(group, 2, bytes(scope))
    out = bytearray()
    _bytes(out, 1, bytes(group))
    return bytes(out)


def _scope() -> bytes:
    out = bytearray()
    _string(out, 1, SCOPE)
    return bytes(out)
