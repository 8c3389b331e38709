"""A bucket's pairs brought into a local recordings tree, so that every reader (the view's index,
`scan`, `report`, `replay`) reads a bucket as it reads a directory.

`BucketCopy.sync()` lists the bucket's keys after the last one it has seen (keys sort by day and by
time-sortable id) and copies each pair that listing finds whole: pair.json is uploaded last, so a
pair whose pair.json is not listed yet is left for the next sync, and the cursor stays before it.
Client-given request ids do not sort by time, and a pair uploaded late (a store that was down) can
land behind the cursor, so every `RELIST_INTERVAL` the newest day is listed again from its start
and what is missing is copied. pair.json is written last locally too, so the index never reads a
pair half copied. Files are 0600 in directories 0700, as calltap writes a tree.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections import defaultdict
from pathlib import Path

from calltap import recordings
from calltap.storage import BucketURL, Storage

SYNC_INTERVAL = 5.0
"""Seconds between two listings of the bucket: the view refreshes its index every second, and a
store bills (and on some servers walks) every listing."""
RELIST_INTERVAL = 60.0
COPIES_AT_ONCE = 16
CURSOR = ".bucket-cursor"


def default_copy_location(url: str) -> Path:
    """Where a bucket's copy lives: the user's cache directory, one folder per bucket URL."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "calltap"
    return cache / f"bucket-{hashlib.sha256(url.encode()).hexdigest()[:24]}"


class BucketCopy:
    """A local copy of the pairs under `url`, at `root`."""

    def __init__(self, url: str, root: Path) -> None:
        self.url = url
        self.root = root
        self.storage = Storage(url)
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._cursor_file = root / CURSOR
        self.cursor = self._cursor_file.read_text() if self._cursor_file.is_file() else None
        self._relisted_at = float("-inf")
        self._synced_at = float("-inf")

    async def sync(self, *, force: bool = False) -> int:
        """Copy what is new in the bucket (at most once every SYNC_INTERVAL unless `force`);
        the pairs copied."""
        if not force and time.monotonic() - self._synced_at < SYNC_INTERVAL:
            return 0
        self._synced_at = time.monotonic()
        keys = [key async for page in self.storage.keys_after(self.cursor) for key in page]
        copied, cursor = await self._copy_whole(keys)
        if cursor is not None and cursor != self.cursor:
            self.cursor = cursor
            self._cursor_file.write_text(cursor)
        if time.monotonic() - self._relisted_at >= RELIST_INTERVAL:
            self._relisted_at = time.monotonic()
            copied += await self._relist_newest_day()
        return copied

    async def _relist_newest_day(self) -> int:
        newest = (self.cursor or "").split("/", 1)[0]
        if not recordings.is_day(newest):
            return 0
        keys = [key async for page in self.storage.keys_after(None, prefix=newest + "/")
                for key in page]
        copied, _ = await self._copy_whole(keys)
        return copied

    async def _copy_whole(self, keys: list[str]) -> tuple[int, str | None]:
        """Copy each whole pair among `keys` not copied yet; the count and the key the next
        listing may start after (before the first pair still being uploaded)."""
        pairs: dict[str, list[str]] = defaultdict(list)
        for key in keys:
            parts = key.split("/")
            if len(parts) == 3 and recordings.is_day(parts[0]) and recordings.is_key(parts[1]):
                pairs[f"{parts[0]}/{parts[1]}"].append(parts[2])
        cursor = keys[-1] if keys else None
        whole = []
        for pair, names in pairs.items():
            if recordings.PAIR_JSON not in names:
                cursor = min(cursor, pair) if cursor is not None else pair
            elif not (self.root / pair / recordings.PAIR_JSON).is_file():
                whole.append((pair, names))
        semaphore = asyncio.Semaphore(COPIES_AT_ONCE)

        async def copy(pair: str, names: list[str]) -> None:
            async with semaphore:
                await self.copy_pair(pair, names)
        await asyncio.gather(*(copy(pair, names) for pair, names in whole))
        return len(whole), cursor

    async def copy_pair(self, pair: str, names: list[str] | None = None) -> Path | None:
        """Copy `<day>/<key>` (its listed files, or all of them); its local directory, or None
        when the bucket has no pair.json there."""
        if names is None:
            names = [key.rsplit("/", 1)[1] async for page in
                     self.storage.keys_after(None, prefix=pair + "/") for key in page]
        wanted = [name for name in names
                  if recordings.is_leg_file(name) and not name.endswith(recordings.PARTIAL)]
        if recordings.PAIR_JSON not in names:
            return None
        bodies = await asyncio.gather(*(self.storage.read(f"{pair}/{name}") for name in wanted))
        document = await self.storage.read(f"{pair}/{recordings.PAIR_JSON}")
        if document is None:
            return None
        directory = self.root / pair
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name, data in zip(wanted, bodies, strict=True):
            if data is not None:
                _write_private(directory / name, data)
        _write_private(directory / recordings.PAIR_JSON, document)
        return directory


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
