"""The OTLP protobuf calltap writes, read back by opentelemetry-proto's own classes: whatever the
attribute values, every one arrives as it was sent."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from tests.support.otlp import attributes

from calltap.otel import wire
from calltap.otel.span import PairSpan, SpanEvent

scalars = (st.text() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
           | st.floats(allow_nan=False))
values = scalars | st.lists(st.text(), max_size=4) | st.lists(st.integers(0, 2**40), max_size=4)
keys = st.sampled_from(sorted(wire.REPEATED)) | st.text(min_size=1, max_size=30)
"""Keys whose encodings are reused, and any others."""
attribute_maps = st.dictionaries(keys, values, max_size=12)


def span(attrs: dict[str, Any], events: list[dict[str, Any]], *, parent: int | None,
         error: str | None) -> PairSpan:
    return PairSpan("chat gpt-4o-mini", (1 << 127) + 5, (1 << 63) + 7, parent, 10**18,
                    10**18 + 5, attrs, [SpanEvent("gen_ai.evaluation.result", 10**18 + 5, item)
                                        for item in events], error)


@given(attrs=attribute_maps, events=st.lists(attribute_maps, max_size=3),
       parent=st.none() | st.integers(1, 2**64 - 1), error=st.none() | st.text())
def test_a_span_reads_back_as_written(attrs: dict[str, Any], events: list[dict[str, Any]],
                                      parent: int | None, error: str | None) -> None:
    body = wire.export_request({"service.name": "calltap"},
                               [wire.span_message(span(attrs, events, parent=parent,
                                                       error=error))])
    (group,) = ExportTraceServiceRequest.FromString(body).resource_spans
    assert attributes(group.resource.attributes) == {"service.name": "calltap"}
    (scope,) = group.scope_spans
    assert scope.scope.name == "calltap"
    (decoded,) = scope.spans
    assert decoded.trace_id == ((1 << 127) + 5).to_bytes(16, "big")
    assert decoded.span_id == ((1 << 63) + 7).to_bytes(8, "big")
    assert decoded.parent_span_id == (parent.to_bytes(8, "big") if parent else b"")
    assert (decoded.name, decoded.kind) == ("chat gpt-4o-mini", wire.SPAN_KIND_CLIENT)
    assert (decoded.start_time_unix_nano, decoded.end_time_unix_nano) == (10**18, 10**18 + 5)
    assert _same(attributes(decoded.attributes), attrs)
    assert len(decoded.events) == len(events)
    for item, sent in zip(decoded.events, events, strict=True):
        assert _same(attributes(item.attributes), sent)
    assert decoded.status.code == (wire.STATUS_ERROR if error is not None else 0)
    assert decoded.status.message == (error or "")
    assert decoded.flags & 0xFF == 1


@given(events=st.lists(attribute_maps, min_size=1, max_size=3))
def test_each_event_reads_back_as_a_log_record_in_the_spans_context(
        events: list[dict[str, Any]]) -> None:
    sent = span({}, [{**item, "calltap.severity": "fatal"} for item in events], parent=None,
                error=None)
    body = wire.export_request({"service.name": "calltap"}, wire.log_messages(sent))
    (group,) = ExportLogsServiceRequest.FromString(body).resource_logs
    records = group.scope_logs[0].log_records
    assert len(records) == len(events)
    for record, item in zip(records, sent.events, strict=True):
        assert record.event_name == "gen_ai.evaluation.result"
        assert record.trace_id == sent.trace_id.to_bytes(16, "big")
        assert record.span_id == sent.span_id.to_bytes(8, "big")
        assert (record.severity_number, record.severity_text) == (wire.SEVERITY_ERROR, "fatal")
        assert _same(attributes(record.attributes), item.attributes)


def _same(decoded: dict[str, Any], sent: dict[str, Any]) -> bool:
    return decoded.keys() == sent.keys() and all(
        _equal(decoded[key], value) for key, value in sent.items())


def _equal(decoded: Any, sent: Any) -> bool:
    if isinstance(sent, float):
        return isinstance(decoded, float) and (decoded == sent or math.isnan(sent))
    if isinstance(sent, list):
        return list(decoded) == sent
    return type(decoded) is type(sent) and decoded == sent
