"""calltap's divergences on the client's trace: one OpenTelemetry span per compared pair.

`settings` reads whether export is on (the standard `OTEL_*` variables, `[otel]` in TOML), `span`
turns a compared pair into the span's data and `wire` into OTLP's protobuf (both sans-IO),
`transport` posts it, `shipper` keeps the queue and the thread, `export` is the addon that joins
them. Nothing beyond the standard library: exporting costs no dependency and, off, no import.
"""
