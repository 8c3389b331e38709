"""calltap's divergences on the client's trace: one OpenTelemetry span per compared pair.

`settings` reads whether export is on (the standard `OTEL_*` variables, `[otel]` in TOML), `span`
turns a compared pair into the span's data (sans-IO), `export` is the addon that ships it. Only
`export` imports the OpenTelemetry SDK, and only when export is on.
"""
