"""Masking what a probe saves: the API key wherever it appears, and common token shapes (best
effort), in every string of the results, the trace and the report.

Sans-IO: values in, masked values out. The key is masked wherever its exact text appears (a
gateway echoing `Authorization` leaves `Bearer [masked]`); the patterns catch credentials the run
was never given (a gateway echoing another key). Masking too much is the safe side.
"""

from __future__ import annotations

import re
from typing import Any

from calltap.redact import REDACTED, SECRET_HEADERS

MASK = "[masked]"
TOKEN_PATTERNS = re.compile(
    r"(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"  # OpenAI, Anthropic
    r"|AKIA[0-9A-Z]{16}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google API keys
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack tokens
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*)"  # any bearer credential
)


class Masker:
    """Masks one key (when there is one) and the common token patterns in nested JSON values."""

    def __init__(self, key: str | None) -> None:
        self.key = key or None

    def text(self, value: str) -> str:
        if self.key is not None:
            value = value.replace(self.key, MASK)
        return TOKEN_PATTERNS.sub(MASK, value)

    def value(self, value: Any) -> Any:
        """A JSON-ready value with every string (and every key) masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(name)): self.value(item) for name, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value

    def headers(self, headers: Any) -> dict[str, str]:
        """Headers for the trace: secret headers lose their value, the rest are masked."""
        return {
            str(name): REDACTED if str(name).lower() in SECRET_HEADERS else self.text(value)
            for name, value in headers.items()
        }
