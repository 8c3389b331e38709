"""`/api/pairs` and `/api/pairs/<id>`: the list's rows and one pair's pair.json as JSON.

`/api/pairs/<id>` answers by capture key (the request id calltap returned to the client in
`X-Request-ID`; the newest day's when several days hold it) with pair.json as written (its
`comparison` is the object of `calltap compare --json`), plus where it lives (`day`, `key`) and
`requests`: the requests' comparison (verdict, both requests' summaries, findings, earlier
attempts'), as pair.json's comparison holds it, or, for a pair compared before requests were,
its recorded requests compared now; null when they were not both recorded.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp import web

from calltap import recordings
from calltap.compare_requests import compare_pair_requests
from calltap.report import requests_json
from calltap.storage import StoreError
from calltap.view.query import MAX_LIMIT, filters_of, number
from calltap.view.state import STATE, ViewState


def add_routes(app: web.Application) -> None:
    app.router.add_get("/pairs", pairs)
    app.router.add_get("/pairs/{id}", pair)


async def pairs(request: web.Request) -> web.Response:
    state = request.app[STATE]
    filters = filters_of(request.query)
    limit = number(request.query, "limit", 50, least=1, most=MAX_LIMIT)
    offset = number(request.query, "offset", 0, least=0, most=10**9)
    await state.fresh()
    rows, total = await state.run(lambda index: (
        index.page(filters, limit=limit, offset=offset), index.count(filters)))
    return web.json_response({"total": total, "limit": limit, "offset": offset,
                              "pairs": [row.as_json() for row in rows]})


async def pair(request: web.Request) -> web.Response:
    """A local tree's pair is found by its directory in the day directories: one that has just
    been written is answered at once. A bucket's is found through the index, then fetched."""
    state = request.app[STATE]
    wanted = request.match_info["id"]
    if not recordings.is_key(wanted):
        return _error(400, "not a request id")
    directory = await _located(state, wanted)
    if directory is None:
        return _error(404, "no such pair")
    try:
        document = await asyncio.to_thread(recordings.read_pair, directory)
    except recordings.PairUnreadable:
        return _error(404, "no such pair")
    requests = await asyncio.to_thread(_requests, document, directory)
    return web.json_response({**document, "day": directory.parent.name, "key": directory.name,
                              "requests": requests})


async def _located(state: ViewState, wanted: str) -> Path | None:
    bucket = state.settings.bucket
    if bucket is None:
        return await asyncio.to_thread(recordings.find_capture, state.root, wanted)
    await state.fresh()
    found = await state.run(lambda pairs: pairs.find(wanted))
    if found is None:
        return None
    try:
        return await bucket.copy_pair(f"{found.day}/{found.key}")
    except StoreError:
        raise web.HTTPBadGateway(text="the bucket did not answer\n") from None


def _requests(document: dict[str, Any], directory: Path) -> dict[str, Any] | None:
    """The pair's requests compared: as its comparison holds them, else compared now."""
    comparison = document.get("comparison")
    if isinstance(comparison, dict) and isinstance(comparison.get("requests"), dict):
        return comparison["requests"]
    recorded = recordings.pair_requests(directory)
    if recorded is None:
        return None
    return requests_json(*compare_pair_requests(recorded))


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
