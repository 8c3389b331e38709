"""What the pages and the API share: the settings, and the index with the one thread it is
used from."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from calltap.bucket_copy import BucketCopy
from calltap.storage import StoreError
from calltap.view.guard import Access
from calltap.view.index import PairIndex, default_location

REFRESH_INTERVAL = 1.0
"""Seconds between two refreshes of the index: requests in between read it as it is."""
UPLOAD_LIMIT = 8 * 1024 * 1024
"""Bytes per capture `/compare` accepts."""
T = TypeVar("T")


@dataclass
class ViewSettings:
    root: Path
    access: Access = field(default_factory=Access)
    index_path: Path | str | None = None
    """The SQLite file; None for the user's cache directory, ":memory:" for none on disk."""
    upload_limit: int = UPLOAD_LIMIT
    page_size: int = 50
    bucket: BucketCopy | None = None
    """When the view shows a bucket: its local copy (at `root`), synced before each refresh."""


class ViewState:
    """The index and the one thread it is used from, shared by the pages and the API. The index
    is opened on first use: a `calltap serve` whose view nobody opens never creates one."""

    def __init__(self, settings: ViewSettings) -> None:
        self.settings = settings
        self.root = settings.root
        self._index: PairIndex | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="calltap-view-index")
        self._refreshing: asyncio.Lock | None = None
        self._refreshed_at = float("-inf")

    async def run(self, function: Callable[[PairIndex], T]) -> T:
        """`function(index)` on the index's thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, lambda: function(self._opened()))

    def _opened(self) -> PairIndex:
        """The index, opened in its file (in memory when the file cannot be used)."""
        if self._index is None:
            path = self.settings.index_path or default_location(self.root)
            try:
                self._index = PairIndex(self.root, path)
            except (OSError, sqlite3.Error):
                self._index = PairIndex(self.root)
        return self._index

    async def fresh(self, *, force: bool = False) -> None:
        """Refresh the index unless it was refreshed within REFRESH_INTERVAL."""
        loop = asyncio.get_running_loop()
        if self._refreshing is None:
            self._refreshing = asyncio.Lock()
        async with self._refreshing:
            if not force and loop.time() - self._refreshed_at < REFRESH_INTERVAL:
                return
            if self.settings.bucket is not None:
                # The store or the copy's disk failing costs the list its newest pairs, never
                # the page (nor, under serve, the relay).
                with contextlib.suppress(StoreError, OSError):
                    await self.settings.bucket.follow()
            await self.run(PairIndex.refresh)
            self._refreshed_at = loop.time()

    async def close(self) -> None:
        if self.settings.bucket is not None:
            await self.settings.bucket.close()
        if self._index is not None:
            await self.run(PairIndex.close)
        self._executor.shutdown(wait=False)


STATE: web.AppKey[ViewState] = web.AppKey("calltap_view_state", ViewState)
PREFIX: web.AppKey[str] = web.AppKey("calltap_view_prefix", str)


