"""The view's pages: the list, a pair, a raw file, `/compare`, the live event stream and the
static files. Every path parameter is checked against the recordings layout before it touches
the disk; raw files are downloads, never rendered."""

from __future__ import annotations

import asyncio
import os
import stat
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import orjson
from aiohttp import BodyPartReader, web

from calltap import recordings
from calltap.storage import StoreError
from calltap.transcript import Capture
from calltap.view import templating
from calltap.view.pages import build_page
from calltap.view.query import CODES, VERDICTS, Filters, encoded, filters_of, number
from calltap.view.source import read_recorded
from calltap.view.state import PREFIX, STATE, ViewState
from calltap.view.summary import Summary

if TYPE_CHECKING:
    from calltap.view.listing import PairList

LIVE_POLL = 1.0
"""Seconds between two looks for new pairs while a list page is open."""
KEEPALIVE = 15.0
HTML = "text/html"


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", pair_list)
    app.router.add_get("/pairs/{day}/{key}", pair_page)
    app.router.add_get("/pairs/{day}/{key}/files/{name}", raw_file)
    app.router.add_get("/compare", compare_form)
    app.router.add_post("/compare", compare_upload)
    app.router.add_get("/events", live_events)
    app.router.add_get("/static/{name}", static)


async def pair_list(request: web.Request) -> web.Response:
    state, base = request.app[STATE], request.app[PREFIX]
    filters = filters_of(request.query)
    size = state.settings.page_size
    page = number(request.query, "page", 1, least=1, most=10**7)
    await state.fresh(need=lambda pairs: pairs.answers(filters, page * size))
    rows, total, latest, loading = await state.run(lambda index: (
        index.page(filters, limit=size, offset=(page - 1) * size), index.count(filters),
        index.latest(), index.loading))
    query = encoded(filters)
    # While older segments load, new rows would be older pairs: the page is not live yet.
    live = page == 1 and not loading
    events = f"{base}events?{urlencode({**query, 'after': latest})}" if live else None
    html = templating.render(
        "list.html", base=base, rows=rows, total=total, filters=filters, page=page,
        pages=max(1, -(-total // size)), query=query, verdicts=VERDICTS, codes=CODES,
        live=live, events_url=events, loading=loading)
    return web.Response(text=html, content_type=HTML)


async def pair_page(request: web.Request) -> web.StreamResponse:
    state, base = request.app[STATE], request.app[PREFIX]
    day, key = request.match_info["day"], request.match_info["key"]
    directory = _directory(state, day, key)
    await _bodies(state, day, key)
    recorded = await asyncio.to_thread(read_recorded, directory, day, key)
    if recorded is None:
        raise web.HTTPNotFound(text="no such pair\n")
    if request.query.get("redact") == "1":
        return web.json_response(recorded.page.structural)
    html = templating.render("pair.html", base=base, recorded=recorded, page=recorded.page,
                             title=recorded.document.get("request_id") or key)
    return web.Response(text=html, content_type=HTML)


async def raw_file(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    day, key, name = (request.match_info[part] for part in ("day", "key", "name"))
    directory = _directory(state, day, key)
    if not recordings.is_leg_file(name):
        raise web.HTTPNotFound(text="not a recorded file\n")
    await _bodies(state, day, key)
    try:
        body = await asyncio.to_thread(_read_plain_file, directory / name)
    except OSError:
        raise web.HTTPNotFound(text="no such file\n") from None
    return web.Response(body=body, headers={
        "Content-Type": "application/octet-stream",
        "Content-Disposition": f'attachment; filename="{key}.{name}"',
    })


async def compare_form(request: web.Request) -> web.Response:
    html = templating.render("compare.html", base=request.app[PREFIX],
                             limit=request.app[STATE].settings.upload_limit, error=None)
    return web.Response(text=html, content_type=HTML)


async def compare_upload(request: web.Request) -> web.Response:
    base, limit = request.app[PREFIX], request.app[STATE].settings.upload_limit
    try:
        bodies = await _uploads(request, limit)
    except ValueError as error:
        html = templating.render("compare.html", base=base, limit=limit, error=str(error))
        return web.Response(text=html, content_type=HTML, status=400)
    page = await asyncio.to_thread(
        build_page, Capture(bodies["upstream"]), Capture(bodies["downstream"]))
    html = templating.render("pair.html", base=base, recorded=None, page=page,
                             title="uploaded captures")
    return web.Response(text=html, content_type=HTML)


async def live_events(request: web.Request) -> web.StreamResponse:
    """New pairs as they are indexed, one `pair` event each (the row's HTML and the new
    total), for the list page's script."""
    state, base = request.app[STATE], request.app[PREFIX]
    filters = filters_of(request.query)
    after = number(request.query, "after", 0, least=0, most=2**62)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-store"})
    await response.prepare(request)
    row = templating.environment().get_template("_rows.html").module.row  # type: ignore[attr-defined]
    idle = 0.0
    try:
        while True:
            await state.fresh()
            fresh = await state.run(partial(_since, seq=after, filters=filters))
            if fresh:
                total = await state.run(lambda index: index.count(filters))
                for seq, summary in fresh:
                    data = orjson.dumps({"html": str(row(summary, base, True)), "total": total})
                    await response.write(b"event: pair\ndata: " + data + b"\n\n")
                    after = seq
                idle = 0.0
            elif idle >= KEEPALIVE:
                await response.write(b": keep-alive\n\n")
                idle = 0.0
            await asyncio.sleep(LIVE_POLL)
            idle += LIVE_POLL
    except ConnectionResetError:
        return response


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in templating.STATIC_FILES:
        raise web.HTTPNotFound()
    suffix = name.rsplit(".", 1)[-1]
    return web.Response(body=templating.static_file(name),
                        headers={"Content-Type": templating.STATIC_TYPES[suffix]})


def _since(pairs: PairList, *, seq: int, filters: Filters) -> list[tuple[int, Summary]]:
    return pairs.since(seq, filters)


def _directory(state: ViewState, day: str, key: str) -> Path:
    directory = recordings.pair_directory(state.root, day, key)
    if directory is None:
        raise web.HTTPNotFound(text="no such pair\n")
    return directory


async def _bodies(state: ViewState, day: str, key: str) -> None:
    """A bucket's pair, fetched when it is first opened."""
    if state.settings.bucket is None:
        return
    try:
        await state.settings.bucket.copy_pair(f"{day}/{key}")
    except StoreError as error:
        raise web.HTTPBadGateway(text=f"the bucket did not answer: {error}\n") from None


def _read_plain_file(path: Path) -> bytes:
    """A regular file's bytes, never through a symbolic link."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError("not a regular file")
        return file.read()


async def _uploads(request: web.Request, limit: int) -> dict[str, bytes]:
    """The two captures of the form, each at most `limit` bytes, read without buffering more."""
    if not request.content_type.startswith("multipart/"):
        raise ValueError("send the form: two files, upstream and downstream")
    reader = await request.multipart()
    bodies: dict[str, bytes] = {}
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader) or part.name not in ("upstream", "downstream"):
            raise ValueError("only the fields upstream and downstream are accepted")
        chunks, size = [], 0
        while chunk := await part.read_chunk(64 * 1024):
            size += len(chunk)
            if size > limit:
                raise ValueError(f"{part.name}: larger than {limit} bytes")
            chunks.append(chunk)
        bodies[part.name] = b"".join(chunks)
    missing = [name for name in ("upstream", "downstream") if not bodies.get(name)]
    if missing:
        raise ValueError(f"missing or empty: {', '.join(missing)}")
    return bodies
