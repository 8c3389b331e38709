"""The list's query parameters, checked: a value the list cannot mean is a 400, never a guess."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import web

from calltap import recordings
from calltap.codes import Code
from calltap.index.rows import RECORDED, SKIPPED

VERDICTS = ("diverged", "inconclusive", "equal", "defective", "clean", RECORDED, SKIPPED)
CODES = tuple(str(code) for code in Code)
MAX_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Filters:
    """What the list is narrowed to: a verdict, a finding code, a request id prefix."""

    verdict: str | None = None
    code: str | None = None
    prefix: str | None = None

    def where(self) -> tuple[str, list[object]]:
        clauses: list[str] = []
        values: list[object] = []
        if self.verdict:
            clauses.append("verdict = ?")
            values.append(self.verdict)
        if self.code:
            clauses.append("list_contains(codes, ?)")
            values.append(self.code)
        if self.prefix:
            clauses.append("(starts_with(stored_as, ?) OR starts_with(request_id, ?))")
            values += [self.prefix, self.prefix]
        return " AND ".join(clauses) or "true", values


def filters_of(query: Mapping[str, str]) -> Filters:
    verdict = query.get("verdict") or None
    code = query.get("code") or None
    prefix = query.get("q", "").strip() or None
    if verdict is not None and verdict not in VERDICTS:
        raise web.HTTPBadRequest(text=f"unknown verdict (one of {', '.join(VERDICTS)})\n")
    if code is not None and code not in CODES:
        raise web.HTTPBadRequest(text="unknown finding code\n")
    if prefix is not None and not recordings.is_key(prefix):
        raise web.HTTPBadRequest(text="q: a request id prefix (letters, digits, . _ - +)\n")
    return Filters(verdict, code, prefix)


def number(query: Mapping[str, str], name: str, default: int, *, least: int, most: int) -> int:
    """A whole-number parameter from `least` to `most`."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not least <= int(raw) <= most:
        raise web.HTTPBadRequest(text=f"{name}: a whole number from {least} to {most}\n")
    return int(raw)


def encoded(filters: Filters) -> dict[str, str]:
    """The filters as query parameters (empty ones left out)."""
    pairs = {"verdict": filters.verdict, "code": filters.code, "q": filters.prefix}
    return {name: value for name, value in pairs.items() if value}
