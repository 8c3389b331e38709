"""What the pages and the API share: the settings, and the pair list (the index of pairs) with
the one thread it is used from."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from aiohttp import web

from calltap.bucket_copy import BucketCopy
from calltap.storage import StoreError
from calltap.view.guard import Access

if TYPE_CHECKING:
    from calltap.view.listing import PairList

REFRESH_INTERVAL = 1.0
"""Seconds between two refreshes of a local tree's list: requests in between read it as it is."""
BUCKET_REFRESH_INTERVAL = 10.0
"""A bucket's: each refresh lists its index segments, and a store bills every listing."""
FILL_POLL = 0.05
"""Seconds between two looks at whether a page is whole while older segments load."""
UPLOAD_LIMIT = 8 * 1024 * 1024
"""Bytes per capture `/compare` accepts."""
T = TypeVar("T")


@dataclass
class ViewSettings:
    root: Path
    access: Access = field(default_factory=Access)
    index_cache: Path | None = None
    """Where a bucket's index segments are kept on this machine; None for the user's cache
    directory."""
    upload_limit: int = UPLOAD_LIMIT
    page_size: int = 50
    bucket: BucketCopy | None = None
    """When the view shows a bucket: where the pairs opened are fetched to (at `root`)."""


class ViewState:
    """The pair list and the one thread it is used from, shared by the pages and the API. The
    list is loaded on first use: a `calltap serve` whose view nobody opens never loads one."""

    def __init__(self, settings: ViewSettings) -> None:
        self.settings = settings
        self.root = settings.root
        self._index: PairList | None = None
        self._opening = threading.Lock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="calltap-view-index")
        self.interval = REFRESH_INTERVAL if settings.bucket is None else BUCKET_REFRESH_INTERVAL
        self._loader = ThreadPoolExecutor(1, thread_name_prefix="calltap-view-loader")
        self.loading: asyncio.Task[None] | None = None
        """The index loading on the loader's thread, a batch of segments at a time."""
        self.complete_once = False
        """Everything listed was loaded at least once: a bucket's later refreshes run behind
        the pages."""
        self._refreshing: asyncio.Lock | None = None
        self._refreshed_at = float("-inf")

    async def run(self, function: Callable[[PairList], T]) -> T:
        """`function(pair_list)` on the pages' thread (the index loads on another)."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, lambda: function(self._opened()))

    def _opened(self) -> PairList:
        with self._opening:
            return self._open()

    def _open(self) -> PairList:
        if self._index is None:
            from calltap.view.listing import PairList  # DuckDB: only once the view is opened

            bucket = self.settings.bucket
            self._index = PairList(bucket.url if bucket is not None else self.root,
                                   cache=self.settings.index_cache)
        return self._index

    def list_segments(self) -> None:
        """List the index's segments now, loading none: a bucket's first listing, which
        `calltap view` makes before it listens (the check that the bucket can be read, and the
        first page's listing in one). StoreError when it cannot be listed."""
        self._opened().refresh(batches=0)

    async def fresh(self, *, force: bool = False,
                    need: Callable[[PairList], bool] | None = None) -> None:
        """Refresh the list unless it was refreshed within the interval. The index loads on a
        thread of its own, newest segments first, a batch at a time, while pages read what is
        loaded. The first load waits until `need(pair_list)` holds (the page asked for is
        whole) or, without `need`, until everything is loaded; a local tree's later refreshes
        are waited for too (they cost what changed), a bucket's are not (each lists the
        bucket's segments: the page shows the list as it was meanwhile). The store or the disk
        failing costs the list its newest pairs, never the page (nor, under serve, the
        relay)."""
        loop = asyncio.get_running_loop()
        if self._refreshing is None:
            self._refreshing = asyncio.Lock()
        async with self._refreshing:
            idle = self.loading is None or self.loading.done()
            if idle and (force or loop.time() - self._refreshed_at >= self.interval):
                self._refreshed_at = loop.time()
                self.loading = loop.create_task(self._load())
        if self.complete_once and self.settings.bucket is not None:
            return
        while self.loading is not None and not self.loading.done():
            if need is not None and await self.run(need):
                return
            await asyncio.wait({self.loading}, timeout=FILL_POLL)

    async def _load(self) -> None:
        """Batches of segments until none is left (a refresh with nothing new is one)."""
        loop = asyncio.get_running_loop()
        while True:
            more = False
            with contextlib.suppress(StoreError, OSError):
                more = (await loop.run_in_executor(
                    self._loader, lambda: self._opened().refresh(batches=1))).more
            if not more:
                self.complete_once = True
                return

    async def close(self) -> None:
        if self.loading is not None:
            self.loading.cancel()
            with contextlib.suppress(BaseException):
                await self.loading
        self._loader.shutdown(wait=True)
        if self._index is not None:
            await self.run(lambda pairs: pairs.close())
        self._executor.shutdown(wait=False)


STATE: web.AppKey[ViewState] = web.AppKey("calltap_view_state", ViewState)
PREFIX: web.AppKey[str] = web.AppKey("calltap_view_prefix", str)


