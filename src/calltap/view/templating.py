"""The Jinja2 environment every page and report is rendered with, and the stylesheet.

Autoescape is on for every template: a model can be made to write `<script>`, and captured
strings reach the pages as they were recorded. Served pages link the stylesheet
(`static/view.css`) so that the Content-Security-Policy can forbid inline style; a static report
(`report.html`, opened from disk with no server behind it) inlines the same stylesheet and
allows exactly that stylesheet through its own CSP by hash.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from calltap.codes import Code

STATIC_FILES = ("view.css", "live.js")
"""What `static/` serves; nothing else is ever read from the package by a request."""
STATIC_TYPES = {"css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8"}


@cache
def environment() -> Environment:
    """The one environment: templates from the package, autoescape always on, and undefined
    names an error rather than an empty string."""
    env = Environment(
        loader=PackageLoader("calltap.view", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["bytes"] = human_bytes
    env.filters["dash"] = lambda value: "–" if value is None or value == "" else value
    env.filters["severity"] = severity
    env.filters["clock"] = clock
    env.filters["merge"] = lambda query, **more: {**query, **more}
    env.filters["event_number"] = lambda anchor: "event " + anchor.rsplit("-", 1)[-1]
    return env


def render(template: str, **context: Any) -> str:
    """A page. Pass `inline_style=True` for a file opened without a server (the stylesheet is
    inlined and no script is linked)."""
    context.setdefault("inline_style", False)
    context.setdefault("live", None)
    if context["inline_style"]:
        context["stylesheet"] = Markup(stylesheet())
        context["style_hash"] = Markup(style_hash())
    return environment().get_template(template).render(**context)


def static_file(name: str) -> bytes:
    """One of STATIC_FILES, as shipped in the package."""
    if name not in STATIC_FILES:
        raise KeyError(name)
    return (resources.files("calltap.view") / "static" / name).read_bytes()


@cache
def stylesheet() -> str:
    css = static_file("view.css").decode("utf-8")
    if "</" in css:
        raise ValueError("the stylesheet must not contain '</': it is inlined in <style>")
    return css


@cache
def style_hash() -> str:
    """The CSP source (`'sha256-…'`) that allows the inlined stylesheet and nothing else."""
    digest = hashlib.sha256(stylesheet().encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def severity(code: str) -> str:
    """A finding code's severity, for its colour ("warning" for a code this version lacks)."""
    try:
        return str(Code(code).severity)
    except ValueError:
        return "warning"


def clock(timestamp: str | None) -> str:
    """`2026-11-30T04:11:50.123456Z` as `11-30 04:11:50.123`, the part a list is scanned by."""
    if not timestamp or "T" not in timestamp:
        return "–"
    day, _, time_of_day = timestamp.partition("T")
    return f"{day[5:]} {time_of_day[:12]}"


def human_bytes(count: int | None) -> str:
    if count is None:
        return "–"
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f}\u00a0{unit}" if unit == "B" else f"{size:.1f}\u00a0{unit}"
        size /= 1024
    return f"{count} B"
