"""Where finalized recordings live: a directory or an S3-compatible bucket, behind one API.

The proxy writes captures to a local tree while they flow (its own fast writer, `proxy/capture`);
this module is what comes after: listing pairs after a key, reading a file, and writing a pair's
objects create-only, the same calls over a directory (obstore's `LocalStore`) or a bucket
(`S3Store`). It is the one module that imports obstore, and the one that turns an
`s3://BUCKET[/PREFIX]` into a store.

Credentials, region and endpoint come only from the standard AWS variables (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`), which obstore
reads itself; nothing here holds or prints them. Keys are relative to the prefix:
`<day>/<request id>/<file>`, the recordings layout's names.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, GenericError
from obstore.store import LocalStore, S3Store

SCHEME = "s3://"
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
"""S3's bucket naming rules (3 to 63 lower-case letters, digits, dots and hyphens)."""
REFUSALS = ("NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
            "403 Forbidden", "InvalidBucketName", "AllAccessDisabled")
"""What a store says when retrying cannot help: the bucket is not there or the keys are refused."""
REQUEST_TIMEOUT = timedelta(seconds=30)
CONNECT_TIMEOUT = timedelta(seconds=5)


class StoreError(Exception):
    """A store call that failed; `refused` when the store said no (missing bucket, credentials
    refused) rather than could not be reached or answered with a server error."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


def is_bucket(location: str | Path) -> bool:
    return isinstance(location, str) and location.startswith(SCHEME)


@dataclass(frozen=True, slots=True)
class BucketURL:
    """`s3://BUCKET[/PREFIX]`, checked: no credentials, no query, a bucket name S3 accepts."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, text: str) -> BucketURL:
        if not text.startswith(SCHEME):
            raise ValueError(f"expected s3://BUCKET[/PREFIX], got {text!r}")
        rest = text[len(SCHEME):]
        bucket, _, prefix = rest.partition("/")
        if "@" in bucket or "?" in rest or "#" in rest:
            raise ValueError("s3:// URLs take no credentials, query or fragment; credentials"
                             " come from the AWS_* environment variables")
        if not BUCKET_NAME.fullmatch(bucket):
            raise ValueError(f"{bucket!r} is not an S3 bucket name")
        prefix = prefix.strip("/")
        if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
            raise ValueError(f"prefix {prefix!r} has an empty, '.' or '..' part")
        return cls(bucket, prefix)

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}" if self.prefix else f"{SCHEME}{self.bucket}"

    def child(self, *parts: str) -> BucketURL:
        return BucketURL(self.bucket, "/".join(p for p in (self.prefix, *parts) if p))


class Storage:
    """Recordings objects under one root: a local directory or a bucket with its prefix.

    Every call is async (the proxy's uploader, the view) with a blocking twin for the commands
    that read a tree once (`scan`, `report`, `replay`). A missing object is None, never an
    error; anything else the store answers is a `StoreError`.
    """

    def __init__(self, location: str | Path, *, retries: int = 3) -> None:
        global _opened
        _opened = True
        self.location = str(location)
        self.root: Path | None = None
        """A local tree's directory: written here privately, as calltap writes its captures."""
        if is_bucket(location):
            url = BucketURL.parse(str(location))
            self.store: LocalStore | S3Store = S3Store(
                url.bucket, prefix=url.prefix or None,
                client_options={"allow_http": _plain_http(), "timeout": REQUEST_TIMEOUT,
                                "connect_timeout": CONNECT_TIMEOUT},
                retry_config={"max_retries": retries, "retry_timeout": REQUEST_TIMEOUT,
                              "backoff": {"init_backoff": timedelta(milliseconds=100),
                                          "max_backoff": timedelta(seconds=2), "base": 2}})
        else:
            root = Path(location)
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.store = LocalStore(root)
            self.root = root

    def __str__(self) -> str:
        return self.location

    # -- async ---------------------------------------------------------------------------------

    async def check(self) -> None:
        """One listing call: StoreError (`refused` when the bucket is missing or the keys are
        refused) when the store cannot be used."""
        try:
            stream = obstore.list(self.store, chunk_size=1)
            async for _ in stream:
                break
        except BaseError as error:
            raise _store_error(error) from None

    async def put_new(self, key: str, data: bytes) -> bool:
        """Write `key` only if no object has it; False when one does (nothing is overwritten)."""
        if self.root is not None:
            return await asyncio.to_thread(_put_private, self.root, key, data)
        try:
            await obstore.put_async(self.store, key, data, mode="create")
        except AlreadyExistsError:
            return False
        except BaseError as error:
            raise _store_error(error) from None
        return True

    async def read(self, key: str) -> bytes | None:
        try:
            result = await obstore.get_async(self.store, key)
            return bytes(await result.bytes_async())
        except FileNotFoundError:
            return None
        except BaseError as error:
            raise _store_error(error) from None

    async def delete(self, key: str) -> None:
        """Delete `key`; a key already gone (another process deleted it) is not an error."""
        try:
            await obstore.delete_async(self.store, key)
        except FileNotFoundError:
            return
        except BaseError as error:
            raise _store_error(error) from None

    async def keys_after(self, after: str | None = None,
                         prefix: str | None = None) -> AsyncIterator[list[str]]:
        """Every key (in key order) after `after`, under `prefix`, a page at a time."""
        try:
            stream = obstore.list(self.store, prefix=prefix, offset=after or None,
                                  chunk_size=1000)
            async for page in stream:
                yield [meta["path"] for meta in page]
        except FileNotFoundError:
            return
        except BaseError as error:
            raise _store_error(error) from None

    async def folders(self, prefix: str | None = None) -> list[str]:
        """The names one level below `prefix` (the days of a tree), in key order."""
        try:
            listed = await obstore.list_with_delimiter_async(self.store, prefix=prefix)
        except FileNotFoundError:
            return []
        except BaseError as error:
            raise _store_error(error) from None
        return sorted(name.rstrip("/").rsplit("/", 1)[-1] for name in listed["common_prefixes"])

    # -- blocking ------------------------------------------------------------------------------

    def put_new_now(self, key: str, data: bytes) -> bool:
        """`put_new`, blocking."""
        if self.root is not None:
            return _put_private(self.root, key, data)
        try:
            obstore.put(self.store, key, data, mode="create")
        except AlreadyExistsError:
            return False
        except BaseError as error:
            raise _store_error(error) from None
        return True

    def read_now(self, key: str) -> bytes | None:
        try:
            return bytes(obstore.get(self.store, key).bytes())
        except FileNotFoundError:
            return None
        except BaseError as error:
            raise _store_error(error) from None

    def delete_now(self, key: str) -> None:
        """Delete `key`; a key already gone (another process deleted it) is not an error."""
        try:
            obstore.delete(self.store, key)
        except FileNotFoundError:
            return
        except BaseError as error:
            raise _store_error(error) from None

    def keys_now(self, after: str | None = None, prefix: str | None = None) -> Iterator[str]:
        try:
            for page in obstore.list(self.store, prefix=prefix, offset=after or None,
                                     chunk_size=1000):
                for meta in page:
                    yield meta["path"]
        except FileNotFoundError:
            return
        except BaseError as error:
            raise _store_error(error) from None


_opened = False


def _put_private(root: Path, key: str, data: bytes) -> bool:
    """Create-only into a local tree, as the recordings are kept: directories 0700 and files
    0600 whatever the umask (obstore's local store makes them as the umask says), the file
    written whole under a temporary name and linked to its own (a link never replaces)."""
    path = root.joinpath(*key.split("/"))
    try:
        if path.exists():
            return False
        private_directories(root, key.split("/")[:-1])
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "wb") as out:
                out.write(data)
            os.link(temporary, path)
        except FileExistsError:
            return False
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as error:
        raise StoreError(f"{key}: {error.strerror or error}") from None
    return True


def private_directories(root: Path, parts: list[str]) -> Path:
    """`root/parts…`, each directory made 0700 if it is not there yet."""
    directory = root
    for part in parts:
        directory = directory / part
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
    return directory


def opened() -> bool:
    """Whether this process has opened a store, and so runs obstore's threads (see
    `calltap.cli.entry`)."""
    return _opened


def _plain_http() -> bool:
    """Whether the endpoint the AWS variables name is plain HTTP (a store on loopback, a test
    server); obstore refuses those unless told."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    return endpoint.startswith("http://")


def _store_error(error: BaseException) -> StoreError:
    """A StoreError with the store's own code and none of the request (signed URLs, headers)."""
    text = str(error)
    refused = isinstance(error, GenericError | BaseError) and any(
        word in text for word in REFUSALS)
    code = next((word for word in REFUSALS if word in text), None)
    status = re.search(r"status code: ([0-9]{3}[^:<]*)", text)
    summary = code or (status.group(1).strip() if status else "store unreachable or not answering")
    return StoreError(summary, refused=refused)
