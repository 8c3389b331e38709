"""The one reader of calltap's JSON log lines in tests: an in-memory stream handed to calltap
(`LogLines()`), or the text of a `calltap serve` process's log file (`LogLines(text)`)."""

from __future__ import annotations

import io
from typing import Any

import orjson


def parse_lines(text: str) -> list[dict[str, Any]]:
    """Every JSON line of a log's text, in order."""
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def select(lines: list[dict[str, Any]], event: str | None = None,
           request_id: str | None = None) -> list[dict[str, Any]]:
    """The lines of one `event` (all when None), of one `request_id` when given."""
    return [line for line in lines
            if (event is None or line["event"] == event)
            and (request_id is None or line.get("request_id") == request_id)]


class LogLines(io.StringIO):
    """calltap's log stream in memory; `lines()` parses each JSON line."""

    def lines(self, event: str | None = None,
              request_id: str | None = None) -> list[dict[str, Any]]:
        return select(parse_lines(self.getvalue()), event, request_id)
