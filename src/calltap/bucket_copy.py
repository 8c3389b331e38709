"""A bucket's pairs brought into a local recordings tree, so that every reader (the view's index,
`scan`, `report`, `replay`) reads a bucket as it reads a directory.

The first sync of an empty copy copies the newest `FIRST_PAGE` pairs (found by listing the newest
days one level deep: a name a pair, not a name a file), then every day, newest first, each day's
pairs newest first. The view runs its syncs in the background (`follow`) and serves what is
copied so far: only the first page of an empty copy waits, for those newest pairs (or
`FIRST_PAGE_WAIT` seconds), and the list says how far the fill got. After it, `sync()` lists the
bucket's keys after the last one it has seen (keys sort by day and by time-sortable id) and copies
each pair that listing finds whole: pair.json is uploaded last, so a pair whose pair.json is not
listed yet is left for the next sync, and the cursor stays before it. Client-given request ids do
not sort by time, and a pair uploaded late (a store that was down) can land behind the cursor, so
every `RELIST_INTERVAL` the newest day is listed again from its start and what is missing is
copied.

The view copies, of each pair, pair.json and the client's request (what its list reads: the model
comes from the request) and fetches the other files when the pair is opened (`complete`); until
then the directory holds `BODIES_PENDING`, the names still in the bucket. The commands copy
whole pairs. pair.json is written after every other file a copy brings, so a
reader never finds a pair half copied. Files are 0600 in directories 0700, as calltap writes a
tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

import orjson

from calltap import recordings
from calltap.storage import BucketURL, Storage

SYNC_INTERVAL = 5.0
"""Seconds between two listings of the bucket: the view refreshes its index every second, and a
store bills (and on some servers walks) every listing."""
RELIST_INTERVAL = 60.0
COPIES_AT_ONCE = 16
CURSOR = ".bucket-cursor"
BODIES_PENDING = ".bodies-pending"
"""In a pair copied without its response bodies: their names, as a JSON list."""
FIRST_PAGE = 50
"""The pairs the view's first page lists: the first fill is waited for until it has these."""
FIRST_PAGE_WAIT = 10.0
LISTED_FIRST = (recordings.request_name("downstream"), recordings.request_name("upstream"))
"""The request the list's model comes from: the downstream leg's, else the upstream leg's."""
T = TypeVar("T")


def default_copy_location(url: str) -> Path:
    """Where a bucket's copy lives: the user's cache directory, one folder per bucket URL."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "calltap"
    return cache / f"bucket-{hashlib.sha256(url.encode()).hexdigest()[:24]}"


class BucketCopy:
    """A local copy of the pairs under `url`, at `root`. Nothing is made on disk before the
    first copy: `calltap serve` makes one at start for its view, and a root it cannot write
    (a read-only filesystem) must cost it the view, never the relay."""

    def __init__(self, url: str, root: Path) -> None:
        self.url = url
        self.root = root
        self.storage = Storage(url)
        self._cursor_file = root / CURSOR
        self.cursor: str | None = None
        self._opened = False
        self._relisted_at = float("-inf")
        self._synced_at = float("-inf")
        self._following: asyncio.Task[int] | None = None
        """The view's sync (the first fill included) running in the background."""
        self._first_page = asyncio.Event()
        self.days_to_fill = 0
        """While the first fill runs: the days not copied yet."""

    def open(self) -> None:
        """The root made (0700) and the cursor of an earlier run read, once."""
        if not self._opened:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if self._cursor_file.is_file():
                self.cursor = self._cursor_file.read_text()
            self._opened = True

    @property
    def filling(self) -> bool:
        """Whether the first fill of the copy is running in the background."""
        return self.cursor is None and self._following is not None and not self._following.done()

    async def follow(self) -> None:
        """What the view calls before each refresh: a sync without response bodies started in
        the background, so that no page waits on the store (the view serves what is copied so
        far), except the first fill of an empty copy, waited for until it holds the newest
        page of pairs (or FIRST_PAGE_WAIT seconds)."""
        self.open()
        if self._following is not None:
            if not self._following.done():
                return
            ended, self._following = self._following, None
            if not ended.cancelled():
                ended.exception()  # a sync the store cut short starts again below
        first = self.cursor is None
        self._following = asyncio.get_running_loop().create_task(self.sync(bodies=False))
        if first:
            page = asyncio.get_running_loop().create_task(self._first_page.wait())
            await asyncio.wait((self._following, page), timeout=FIRST_PAGE_WAIT,
                               return_when=asyncio.FIRST_COMPLETED)
            page.cancel()

    async def close(self) -> None:
        if self._following is not None:
            self._following.cancel()
            with contextlib.suppress(BaseException):
                await self._following

    async def sync(self, *, force: bool = False, bodies: bool = True) -> int:
        """Copy what is new in the bucket (at most once every SYNC_INTERVAL unless `force`),
        with the response bodies or not; the pairs copied. With `bodies`, the pairs an earlier
        sync copied without theirs are completed too."""
        self.open()
        if not force and time.monotonic() - self._synced_at < SYNC_INTERVAL:
            return 0
        self._synced_at = time.monotonic()
        if self.cursor is None:
            copied = await self._fill(bodies)
        else:
            keys = [key async for page in self.storage.keys_after(self.cursor) for key in page]
            copied, cursor = await self._copy_whole(keys, bodies)
            self._advance(cursor)
            if time.monotonic() - self._relisted_at >= RELIST_INTERVAL:
                self._relisted_at = time.monotonic()
                copied += await self._relist_newest_day(bodies)
        if bodies:
            await _gathered(self.complete, self._pending())
        return copied

    async def _fill(self, bodies: bool) -> int:
        """The first copy: the newest page of pairs, then every day, newest first; the cursor is
        set once all are copied."""
        days = [day for day in await self.storage.folders() if recordings.is_day(day)]
        copied = await self._copy_newest_page(days, bodies)
        self.days_to_fill = len(days)
        cursor = None
        for day in reversed(days):
            keys = [key async for page in self.storage.keys_after(None, prefix=day + "/")
                    for key in page]
            count, day_cursor = await self._copy_whole(keys, bodies)
            copied += count
            cursor = cursor or day_cursor
            self.days_to_fill -= 1
        self._relisted_at = time.monotonic()
        self._advance(cursor)
        return copied

    async def _copy_newest_page(self, days: list[str], bodies: bool) -> int:
        """The newest FIRST_PAGE pairs, found by listing the newest days one level deep (a name a
        pair, where the whole listing has a name a file) and copied first; then the first page
        is there."""
        newest: list[str] = []
        for day in reversed(days):
            pairs = [name for name in await self.storage.folders(day + "/")
                     if recordings.is_key(name)]
            newest += [f"{day}/{pair}" for pair in reversed(pairs)][:FIRST_PAGE - len(newest)]
            if len(newest) >= FIRST_PAGE:
                break
        copies = [pair for pair in newest
                  if not (self.root / pair / recordings.PAIR_JSON).is_file()]
        done: list[Path | None] = []
        await _gathered(lambda pair: self._copy_into(done, pair, bodies), copies)
        self._first_page.set()
        return sum(directory is not None for directory in done)

    async def _copy_into(self, done: list[Path | None], pair: str, bodies: bool) -> None:
        done.append(await self.copy_pair(pair, bodies=bodies))

    def _advance(self, cursor: str | None) -> None:
        if cursor is not None and cursor != self.cursor:
            self.cursor = cursor
            self._cursor_file.write_text(cursor)

    async def _relist_newest_day(self, bodies: bool) -> int:
        newest = (self.cursor or "").split("/", 1)[0]
        if not recordings.is_day(newest):
            return 0
        keys = [key async for page in self.storage.keys_after(None, prefix=newest + "/")
                for key in page]
        copied, _ = await self._copy_whole(keys, bodies)
        return copied

    async def _copy_whole(self, keys: list[str], bodies: bool) -> tuple[int, str | None]:
        """Copy each whole pair among `keys` not copied yet, newest first; the count and the key
        the next listing may start after (before the first pair still being uploaded)."""
        pairs: dict[str, list[str]] = defaultdict(list)
        for key in keys:
            parts = key.split("/")
            if len(parts) == 3 and recordings.is_day(parts[0]) and recordings.is_key(parts[1]):
                pairs[f"{parts[0]}/{parts[1]}"].append(parts[2])
        cursor = keys[-1] if keys else None
        whole = []
        for pair, names in sorted(pairs.items(), reverse=True):
            if recordings.PAIR_JSON not in names:
                cursor = min(cursor, pair) if cursor is not None else pair
            elif not (self.root / pair / recordings.PAIR_JSON).is_file():
                whole.append((pair, names))
        await _gathered(lambda item: self.copy_pair(*item, bodies=bodies), whole)
        return len(whole), cursor

    async def copy_pair(self, pair: str, names: list[str] | None = None, *,
                        bodies: bool = True) -> Path | None:
        """Copy `<day>/<key>` (its listed files, or all of them; without the response bodies
        unless `bodies`); its local directory, or None when the bucket has no pair.json there.
        Unlisted and without bodies, the pair is not listed either: its requests are read by
        name, and what else it holds is listed when it is completed."""
        self.open()
        if names is None and bodies:
            names = [key.rsplit("/", 1)[1] async for page in
                     self.storage.keys_after(None, prefix=pair + "/") for key in page]
        if names is not None and recordings.PAIR_JSON not in names:
            return None
        wanted = [name for name in names or LISTED_FIRST
                  if recordings.is_leg_file(name) and not name.endswith(recordings.PARTIAL)]
        listed = next((name for name in LISTED_FIRST if name in wanted), None)
        now = wanted if bodies or names is None else [listed] if listed else []
        later = None if names is None and not bodies else [n for n in wanted if n not in now]
        *files, document = await asyncio.gather(
            *(self.storage.read(f"{pair}/{name}") for name in [*now, recordings.PAIR_JSON]))
        if document is None:
            return None
        directory = self.root / pair
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_files(directory, zip(now, files, strict=True))
        if later != []:
            _write_private(directory / BODIES_PENDING, orjson.dumps(later))
        else:
            (directory / BODIES_PENDING).unlink(missing_ok=True)
        _write_private(directory / recordings.PAIR_JSON, document)
        return directory

    async def complete(self, pair: str) -> None:
        """Bring the response bodies of `<day>/<key>` a copy without them left in the bucket
        (the names it noted, or, when it noted none, what a listing of the pair finds)."""
        directory = self.root / pair
        pending = directory / BODIES_PENDING
        try:
            names = orjson.loads(pending.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return
        if names is None:
            names = [key.rsplit("/", 1)[1] async for page in
                     self.storage.keys_after(None, prefix=pair + "/") for key in page]
            names = [name for name in names if not (directory / name).exists()]
        names = [name for name in names if isinstance(name, str) and recordings.is_leg_file(name)
                 and not name.endswith(recordings.PARTIAL)]
        files = await asyncio.gather(*(self.storage.read(f"{pair}/{name}") for name in names))
        _write_files(directory, zip(names, files, strict=True))
        pending.unlink(missing_ok=True)

    def _pending(self) -> list[str]:
        return [str(path.parent.relative_to(self.root))
                for path in self.root.glob(f"*/*/{BODIES_PENDING}")]


async def _gathered(copy: Callable[[T], Awaitable[object]], items: Iterable[T]) -> None:
    """`copy(item)` for every item, COPIES_AT_ONCE at a time, started in the items' order."""
    semaphore = asyncio.Semaphore(COPIES_AT_ONCE)

    async def one(item: T) -> None:
        async with semaphore:
            await copy(item)
    await asyncio.gather(*(one(item) for item in items))


def _write_files(directory: Path, files: Iterable[tuple[str, bytes | None]]) -> None:
    for name, data in files:
        if data is not None:
            _write_private(directory / name, data)


def split_pair_url(url: str) -> tuple[str, str] | None:
    """`s3://BUCKET/PREFIX/<day>/<id>` as (`s3://BUCKET/PREFIX`, `<day>/<id>`), when it names
    one pair."""
    parsed = BucketURL.parse(url)
    parts = parsed.prefix.split("/")
    if len(parts) < 2 or not recordings.is_day(parts[-2]) or not recordings.is_key(parts[-1]):
        return None
    return str(BucketURL(parsed.bucket, "/".join(parts[:-2]))), "/".join(parts[-2:])


def _write_private(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".copying")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


def local_source(source: str) -> Path:
    """The local path a reader reads for `source`: a directory as given; a bucket (or a pair in
    one, `s3://BUCKET/PREFIX/<day>/<id>`) brought up to date in its copy first. Raises
    `StoreError` when the store cannot be read and `ValueError` for a bad URL or a missing pair."""
    if not source.startswith("s3://"):
        return Path(source)
    pair = split_pair_url(source)
    url = pair[0] if pair is not None else str(BucketURL.parse(source))
    copy = BucketCopy(url, default_copy_location(url))
    if pair is None:
        asyncio.run(_checked_sync(copy))
        return copy.root
    directory = asyncio.run(copy.copy_pair(pair[1]))
    if directory is None:
        raise ValueError(f"no pair.json at {source}")
    return directory


async def _checked_sync(copy: BucketCopy) -> None:
    await copy.storage.check()
    await copy.sync(force=True)
