"""The view as aiohttp applications: the pages (`calltap view`'s root, `/ui/` under `calltap
serve`) and the JSON API (`/api/…` in both).

`standalone(...)` is `calltap view`'s whole application; `mount(admin_app, ...)` adds the same
pages and API to `calltap serve`'s admin listener. Both list pairs from the index of pairs,
refreshed at most once an interval (on demand, and by the live event stream while a list page is
open), and read a pair's objects only when it is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from aiohttp import web

from calltap.bucket_copy import BucketCopy, default_copy_location
from calltap.view import api, pages_http
from calltap.view.guard import TOKEN_VARIABLE, Access, guard, secure_headers
from calltap.view.state import PREFIX, STATE, ViewSettings, ViewState


def view_app(state: ViewState, prefix: str) -> web.Application:
    """The pages, with links under `prefix` ("/" or "/ui/")."""
    app = _guarded(state)
    app[PREFIX] = prefix
    pages_http.add_routes(app)
    return app


def api_app(state: ViewState) -> web.Application:
    app = _guarded(state)
    api.add_routes(app)
    return app


def standalone(settings: ViewSettings, state: ViewState | None = None) -> web.Application:
    """`calltap view`: the pages at `/`, the API at `/api/`; the index starts building at
    once, so the first page finds it (nearly) ready."""
    state = state or ViewState(settings)
    app = view_app(state, "/")
    app.add_subapp("/api/", api_app(state))

    warming: list[asyncio.Task[None]] = []

    async def warm(_app: web.Application) -> None:
        warming.append(asyncio.get_running_loop().create_task(state.fresh(force=True)))

    async def close(_app: web.Application) -> None:
        for task in warming:
            with contextlib.suppress(Exception):
                await task
        await state.close()

    app.on_startup.append(warm)
    app.on_cleanup.append(close)
    return app


def mount(admin: web.Application, recordings_root: Path, *, allow_remote: bool,
          bucket: str | None = None) -> None:
    """Add the view at `/ui/` and the API at `/api/` to `calltap serve`'s admin application.
    With `allow_remote`, every request to them needs the token of CALLTAP_VIEW_TOKEN (and none
    is answered without one set). With a `bucket` the view shows every replica's pairs there
    (from the bucket's index), not this proxy's spool."""
    token = os.environ.get(TOKEN_VARIABLE) or None
    access = Access(remote=allow_remote, token=token)
    copy = BucketCopy(bucket, default_copy_location(bucket)) if bucket is not None else None
    state = ViewState(ViewSettings(copy.root if copy is not None else recordings_root,
                                   access=access, bucket=copy))
    admin.add_subapp("/ui/", view_app(state, "/ui/"))
    admin.add_subapp("/api/", api_app(state))

    async def close(_app: web.Application) -> None:
        await state.close()

    admin.on_cleanup.append(close)


def _guarded(state: ViewState) -> web.Application:
    app = web.Application(middlewares=[guard(state.settings.access)])
    app[STATE] = state
    app.on_response_prepare.append(secure_headers)
    return app
