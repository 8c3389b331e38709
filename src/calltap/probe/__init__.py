"""`calltap probe`: active tool-call probes through a gateway, judged on calltap's own parser,
dialect reducers and argument equality.

Sans-IO: `probes` (the probes as data), `requests` (their bodies per dialect), `judge` (an answer's
bytes in, pass or fail with reasons out) and `masking` (the key and common token shapes). The
shell: `client` (the bounded HTTP client), `runner` (the probes in order within their wall-clock
limits), `attribution` (the admin API of a calltap front) and `output` (the report directory).
"""
