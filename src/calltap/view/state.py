"""What the pages and the API share: the settings, and the pair list (the index of pairs) with
the one thread it is used from."""

from __future__ import annotations

import asyncio
import contextlib
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
FILL_POLL = 0.05
"""Seconds between two looks at whether a page is whole while older segments load."""
"""A bucket's: each refresh lists its index segments, and a store bills every listing."""
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
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="calltap-view-index")
        self.interval = REFRESH_INTERVAL if settings.bucket is None else BUCKET_REFRESH_INTERVAL
        self.filling: asyncio.Task[None] | None = None
        """Older segments loading in the background, a batch at a time."""
        self._refreshing: asyncio.Lock | None = None
        self._refreshed_at = float("-inf")

    async def run(self, function: Callable[[PairList], T]) -> T:
        """`function(pair_list)` on the list's thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, lambda: function(self._opened()))

    def _opened(self) -> PairList:
        if self._index is None:
            from calltap.view.listing import PairList  # DuckDB: only once the view is opened

            bucket = self.settings.bucket
            self._index = PairList(bucket.url if bucket is not None else self.root,
                                   cache=self.settings.index_cache)
        return self._index

    async def fresh(self, *, force: bool = False,
                    need: Callable[[PairList], bool] | None = None) -> None:
        """Refresh the list unless it was refreshed within the interval. A big index (a cold
        start over a bucket) loads newest first, a batch of segments at a time, in the
        background: this returns once `need(pair_list)` holds (the page asked for is whole),
        or, without `need`, once everything is loaded. The store or the disk failing costs
        the list its newest pairs, never the page (nor, under serve, the relay)."""
        loop = asyncio.get_running_loop()
        if self._refreshing is None:
            self._refreshing = asyncio.Lock()
        async with self._refreshing:
            if self.filling is None and (
                    force or loop.time() - self._refreshed_at >= self.interval):
                more = await self._batch()
                self._refreshed_at = loop.time()
                if more:
                    self.filling = loop.create_task(self._fill())
        while self.filling is not None and not self.filling.done():
            if need is not None and await self.run(need):
                return
            await asyncio.wait({self.filling}, timeout=FILL_POLL)

    async def _batch(self) -> bool:
        """One batch of segments (or, when nothing is left from a listing, a whole refresh);
        whether older ones remain."""
        with contextlib.suppress(StoreError, OSError):
            return (await self.run(lambda pairs: pairs.refresh(batches=1))).more
        return False

    async def _fill(self) -> None:
        try:
            while await self._batch():
                pass
        finally:
            self.filling = None

    async def close(self) -> None:
        if self.filling is not None:
            self.filling.cancel()
            with contextlib.suppress(BaseException):
                await self.filling
        if self._index is not None:
            await self.run(lambda pairs: pairs.close())
        self._executor.shutdown(wait=False)


STATE: web.AppKey[ViewState] = web.AppKey("calltap_view_state", ViewState)
PREFIX: web.AppKey[str] = web.AppKey("calltap_view_prefix", str)


