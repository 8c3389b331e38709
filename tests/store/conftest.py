"""The object-store suite: `calltap serve` subprocesses writing to a real S3 API server (moto) on
loopback, through a relay that can stop, refuse or slow the store on cue."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from tests.support.s3 import S3Server, s3_server
from tests.support.s3_faults import FaultyStore


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture
async def store(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FaultyStore]:
    """The store calltap is pointed at (through the AWS variables its subprocess inherits)."""
    async with FaultyStore(s3.url) as faulty:
        for name, value in {**s3.environ, "AWS_ENDPOINT_URL": faulty.url}.items():
            monkeypatch.setenv(name, value)
        yield faulty


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
