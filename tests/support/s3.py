"""A real S3 API server on loopback for the object-store tests: moto's server mode, started as a
subprocess (it enforces `If-None-Match: *`, multipart part sizes and ListObjectsV2 paging as S3
does), and the AWS variables that point calltap at it.

`S3Server.environ` is what a `calltap` subprocess needs: fake keys (moto accepts any), a region and
`AWS_ENDPOINT_URL`. `bucket()` creates a bucket of a fresh name; `objects()` lists what a bucket
holds, read with boto3 so the tests do not judge calltap's store by itself.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

ACCESS_KEY = "AKIACALLTAPTESTKEY01"
SECRET_KEY = "calltap-test-secret-7f3a9c2e1b5d4a6f8e0c"
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class S3Server:
    """A running moto server: `url` is its endpoint."""

    process: subprocess.Popen[bytes]
    url: str

    @property
    def environ(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.url}

    def client(self) -> Any:
        """A boto3 S3 client on this server: the tests read the bucket with it, not with
        calltap's own store."""
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def bucket(self) -> str:
        name = f"calltap-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object of `bucket` under `prefix`, by key, with its bytes."""
        client = self.client()
        found: dict[str, bytes] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                       Prefix=prefix):
            for item in page.get("Contents", []):
                found[item["Key"]] = client.get_object(Bucket=bucket,
                                                       Key=item["Key"])["Body"].read()
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def s3_server(workdir: Path, port: int | None = None) -> Iterator[S3Server]:
    """`moto_server -H 127.0.0.1 -p PORT` from this interpreter's environment, until it answers."""
    port = port or free_port()
    moto = Path(sys.executable).with_name("moto_server")
    log = (workdir / f"moto-{port}.log").open("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    process = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    server = S3Server(process, f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                urllib.request.urlopen(server.url + "/", timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    output = (workdir / f"moto-{port}.log").read_text()[-2000:]
                    raise RuntimeError(f"moto_server did not start: {output}") from None
                time.sleep(0.1)
        yield server
    finally:
        server.stop()
        log.close()
