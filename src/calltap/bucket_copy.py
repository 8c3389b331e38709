"""A bucket's pairs fetched into a local recordings tree, one pair at a time, when a reader
opens them.

Readers find pairs through the index of pairs (`calltap.index`), never by listing the bucket;
what they open (the view's pair page, `scan` re-comparing a pair, `report`, `replay`) is fetched
here into a local copy with the tree's layout, so that the rest of calltap reads it as it reads a
directory. pair.json is written after every other file a fetch brings, so a reader never finds a
pair half copied. Files are 0600 in directories 0700, as calltap writes a tree.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable, Collection, Iterable
from pathlib import Path
from typing import TypeVar

from calltap import recordings
from calltap.storage import BucketURL, Storage

FETCHES_AT_ONCE = 16
T = TypeVar("T")


def default_copy_location(url: str) -> Path:
    """Where a bucket's fetched pairs are kept on this machine: the user's cache directory."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "calltap"
    return cache / f"bucket-{hashlib.sha256(url.encode()).hexdigest()[:24]}"


class BucketCopy:
    """The pairs of `url` fetched so far, at `root`. Nothing is made on disk before the first
    fetch: a root it cannot write (a read-only filesystem) costs the view, never the relay."""

    def __init__(self, url: str, root: Path) -> None:
        self.url = url
        self.root = root
        self.storage = Storage(url)

    def open(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)

    async def copy_pair(self, pair: str) -> Path | None:
        """Fetch every file of `<day>/<key>` (unless pair.json says it is here already); its
        local directory, or None when the bucket has no pair.json there."""
        directory = self.root / pair
        if (directory / recordings.PAIR_JSON).is_file():
            return directory
        self.open()
        names = [key.rsplit("/", 1)[1] async for page in
                 self.storage.keys_after(None, prefix=pair + "/") for key in page]
        if recordings.PAIR_JSON not in names:
            return None
        wanted = [name for name in names
                  if recordings.is_leg_file(name) and not name.endswith(recordings.PARTIAL)]
        *files, document = await asyncio.gather(
            *(self.storage.read(f"{pair}/{name}") for name in [*wanted, recordings.PAIR_JSON]))
        if document is None:
            return None
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name, data in zip(wanted, files, strict=True):
            if data is not None:
                _write_private(directory / name, data)
        _write_private(directory / recordings.PAIR_JSON, document)
        return directory

    async def copy_pairs(self, pairs: Iterable[str]) -> list[Path]:
        """Fetch `pairs` (`<day>/<key>`), FETCHES_AT_ONCE at a time; the local directories of
        those the bucket has, in the order given."""
        found: dict[str, Path] = {}

        async def one(pair: str) -> None:
            directory = await self.copy_pair(pair)
            if directory is not None:
                found[pair] = directory
        wanted = list(pairs)
        await _gathered(one, wanted)
        return [found[pair] for pair in wanted if pair in found]


async def _gathered(fetch: Callable[[T], Awaitable[object]], items: Iterable[T]) -> None:
    semaphore = asyncio.Semaphore(FETCHES_AT_ONCE)

    async def one(item: T) -> None:
        async with semaphore:
            await fetch(item)
    await asyncio.gather(*(one(item) for item in items))


def split_pair_url(url: str) -> tuple[str, str] | None:
    """`s3://BUCKET/PREFIX/<day>/<id>` as (`s3://BUCKET/PREFIX`, `<day>/<id>`), when it names
    one pair."""
    parsed = BucketURL.parse(url)
    parts = parsed.prefix.split("/")
    if len(parts) < 2 or not recordings.is_day(parts[-2]) or not recordings.is_key(parts[-1]):
        return None
    return str(BucketURL(parsed.bucket, "/".join(parts[:-2]))), "/".join(parts[-2:])


def fetch_pair(url: str) -> Path:
    """The local copy of the pair `s3://BUCKET/PREFIX/<day>/<id>` names. Raises `StoreError`
    when the store cannot be read and `ValueError` for a URL that names no stored pair."""
    pair = split_pair_url(url)
    if pair is None:
        raise ValueError(f"{url} names no pair (s3://BUCKET[/PREFIX]/<day>/<id>)")
    copy = BucketCopy(pair[0], default_copy_location(pair[0]))
    directory = asyncio.run(copy.copy_pair(pair[1]))
    if directory is None:
        raise ValueError(f"no pair.json at {url}")
    return directory


def _write_private(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".copying")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


def local_source(source: str, codes: Collection[str] = ()) -> Path:
    """The local path a reader reads for `source`: a directory as given; a pair in a bucket
    (`s3://BUCKET/PREFIX/<day>/<id>`) fetched; a bucket's pairs (those with any of `codes`, if
    any) found through its index of pairs and fetched into its local copy (what is already there
    is not fetched again). Raises `StoreError` when the store cannot be read and `ValueError` for
    a bad URL or a missing pair."""
    if not source.startswith("s3://"):
        return Path(source)
    if split_pair_url(source) is not None:
        return fetch_pair(source)
    from calltap.index.catalog import Catalog  # DuckDB: only for a bucket's index
    from calltap.index.selection import Wanted, selected

    url = str(BucketURL.parse(source))
    copy = BucketCopy(url, default_copy_location(url))
    catalog = Catalog(url)
    try:
        catalog.refresh()
        pairs = [f"{row['day']}/{row['stored_as']}"
                 for row in selected(catalog, Wanted(codes=tuple(codes)))]
    finally:
        catalog.close()
    copy.open()
    asyncio.run(copy.copy_pairs(pairs))
    return copy.root
