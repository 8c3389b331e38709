"""The admin listener: `GET /healthz` (listener and recorder status) and `GET /metrics`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from calltap.proxy.metrics import CONTENT_TYPE, Metrics


def admin_app(health: Callable[[], dict[str, Any]], metrics: Metrics) -> web.Application:
    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response(health())

    async def metrics_page(_request: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
    return app
