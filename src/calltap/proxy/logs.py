"""calltap's log: one JSON object per line on stdout, flushed as written so a pipe can tail it.

Each line has `event`, `level` and `timestamp` (ISO 8601 UTC). The logger is built per proxy
instance (no global structlog state), so tests and embedders hand it any text stream.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}


def _render(_logger: Any, _name: str, event_dict: dict[str, Any]) -> str:
    return orjson.dumps(event_dict, default=str).decode()


class LineWriter:
    """Writes and flushes one line per call. A closed or broken stream (the `jq` reading the
    pipe exited) costs the log line, never the request that logged it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.dropped = 0

    def msg(self, message: str) -> None:
        try:
            self._stream.write(message + "\n")
            self._stream.flush()
        except (OSError, ValueError):
            self.dropped += 1

    debug = info = warning = error = critical = log = msg


def make_logger(stream: TextIO | None = None, level: str = "info") -> Any:
    """A structlog logger writing JSON lines to `stream` (stdout by default), flushing each."""
    return structlog.wrap_logger(
        LineWriter(stream if stream is not None else sys.stdout),
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _render,
        ],
        cache_logger_on_first_use=True,
    )
