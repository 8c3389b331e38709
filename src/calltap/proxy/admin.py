"""The admin addon: its own listener, serving `GET /healthz` (listener and recorder status) and
`GET /metrics` (Prometheus text). Other addons add routes to `app` before calltap starts."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from calltap.proxy.guard import listen
from calltap.proxy.hooks import Addon
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


class Admin(Addon):
    """Listens on `address` while calltap runs, held to the relay listeners' connection limits
    and log routing (`runner_options`)."""

    def __init__(self, address: tuple[str, int], health: Callable[[], dict[str, Any]],
                 metrics: Metrics, runner_options: dict[str, Any]) -> None:
        self.address = address
        self.app = admin_app(health, metrics)
        self.url: str | None = None
        self._options = runner_options

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        runner = web.AppRunner(self.app, handle_signals=False, handler_cancellation=True,
                               shutdown_timeout=1.0, **self._options)
        try:
            self.url = await listen(runner, self.address)
            yield
        finally:
            await runner.cleanup()
