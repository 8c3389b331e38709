"""A real aiohttp server on loopback for as long as a test, the demo or a benchmark needs it.

The fakes are ordinary aiohttp applications; this base gives each of them the same lifecycle:
`async with Fake(...) as fake: fake.url`, bound to 127.0.0.1 on a port the system picks.
"""

from __future__ import annotations

from typing import Self

from aiohttp import web


class LoopbackServer:
    """Serves `app()` on `host:port` (port 0: ephemeral) between `start()` and `stop()`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        """The aiohttp application; usable on its own (e.g. with pytest-aiohttp's server)."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        """The base URL of the running server, e.g. `http://127.0.0.1:43117`."""
        if self._runner is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return f"http://{self.host}:{self.port}"

    handler_cancellation = False
    """Whether a client going away cancels its handler (aiohttp's default: it does not)."""

    async def start(self) -> None:
        runner = web.AppRunner(
            self.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0,
            handler_cancellation=self.handler_cancellation,
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self.host, self.port = runner.addresses[0][:2]
        self._runner = runner

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
