"""Running the image with podman: the commands, the build's input hash, calltap in a container.

podman runs with CONTAINERS_CONF pointing at deploy/podman/containers.conf unless the caller set
one: hosts like CI's cannot run a container with podman's defaults (the file says why).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.support.s3 import free_port

ROOT = Path(__file__).resolve().parents[2]
PODMAN = shutil.which("podman")
BUILD_INPUTS = ("Dockerfile", ".dockerignore", "Makefile", "pyproject.toml", "README.md", "src",
                "config")
IMAGE_REPOSITORY = "localhost/calltap"
UID = 10001
START_TIMEOUT = 60.0
PODMAN_ENV = {
    **os.environ,
    # Hosts like CI's need these settings to run a container at all (the file says why); a
    # CONTAINERS_CONF of the user's own wins.
    "CONTAINERS_CONF": os.environ.get(
        "CONTAINERS_CONF", str(ROOT / "deploy" / "podman" / "containers.conf")),
}


def podman_sync(*args: str, timeout: float = 60.0) -> str:
    """Run podman to completion and return its stdout; fail the test with its stderr."""
    done = subprocess.run([PODMAN or "podman", *args], capture_output=True, text=True,
                          env=PODMAN_ENV, timeout=timeout)
    if done.returncode != 0:
        pytest.fail(f"podman {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout.strip()


async def podman(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run podman without blocking the event loop (the fake provider runs on it)."""
    process = await asyncio.create_subprocess_exec(
        PODMAN or "podman", *args, env=PODMAN_ENV,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return subprocess.CompletedProcess(
        [PODMAN or "podman", *args], process.returncode,
        stdout.decode(errors="replace").strip(), stderr.decode(errors="replace").strip())


def inputs_digest(base: str) -> str:
    """sha256 over the build's inputs (path and bytes of each file) and the base image."""
    digest = hashlib.sha256(base.encode())
    for name in BUILD_INPUTS:
        top = ROOT / name
        files = sorted(top.rglob("*")) if top.is_dir() else [top]
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path):
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@dataclass
class Container:
    """calltap serving in the image: front -> back -> `provider`, calltap standing in for a
    faithful gateway between its own two listeners."""

    name: str
    recordings: Path
    spool: Path
    front: int = field(default_factory=free_port)
    back: int = field(default_factory=free_port)
    admin: int = field(default_factory=free_port)

    @property
    def front_url(self) -> str:
        return f"http://127.0.0.1:{self.front}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin}"

    def run_args(self, image: str, provider_url: str, env: dict[str, str]) -> list[str]:
        settings = {
            "CALLTAP_FRONT": f"127.0.0.1:{self.front}",
            "CALLTAP_BACK": f"127.0.0.1:{self.back}",
            "CALLTAP_ADMIN": f"127.0.0.1:{self.admin}",
            "CALLTAP_GATEWAY": f"http://127.0.0.1:{self.back}",
            "CALLTAP_PROVIDER": provider_url,
            "CALLTAP_COMPARE_WORKERS": "1",
            **env,
        }
        # --read-only-tmpfs=false: no tmpfs on /tmp, /var/tmp and /run either, as under
        # Kubernetes' readOnlyRootFilesystem; the two volumes are all calltap may write.
        return ["run", "--detach", "--name", self.name, "--network", "host",
                "--read-only", "--read-only-tmpfs=false",
                "--volume", f"{self.recordings}:/recordings:U",
                "--volume", f"{self.spool}:/spool:U",
                *(f"--env={key}={value}" for key, value in settings.items()), image]

    async def wait_healthy(self) -> dict[str, Any]:
        """The /healthz answer, once the admin listener gives one; fails at once with calltap's
        output when the container has exited instead."""
        deadline = asyncio.get_running_loop().time() + START_TIMEOUT
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    async with session.get(f"{self.admin_url}/healthz") as reply:
                        if reply.status == 200:
                            return await reply.json()
                except aiohttp.ClientConnectionError:
                    pass
                running = await podman("inspect", "--format", "{{.State.Running}}", self.name)
                if running.stdout != "true" or asyncio.get_running_loop().time() > deadline:
                    logs = await podman("logs", self.name)
                    pytest.fail(f"calltap in {self.name} never answered /healthz:\n"
                                f"{logs.stdout[-3000:]}\n{logs.stderr[-3000:]}")
                await asyncio.sleep(0.2)

    async def exit_code(self) -> int:
        state = await podman("inspect", "--format", "{{.State.ExitCode}}", self.name)
        return int(state.stdout)


@asynccontextmanager
async def running(image: str, directory: Path, provider_url: str,
                  **env: str) -> AsyncIterator[Container]:
    """calltap in `image` with its volumes under `directory`, removed afterwards."""
    recordings, spool = directory / "recordings", directory / "spool"
    recordings.mkdir()
    spool.mkdir()
    container = Container(f"calltap-test-{os.getpid()}-{free_port()}", recordings, spool)
    started = await podman(*container.run_args(image, provider_url, env))
    if started.returncode != 0:
        pytest.fail(f"podman run exited {started.returncode}: {started.stderr[-3000:]}")
    try:
        yield container
    finally:
        await podman("rm", "--force", "--time", "0", container.name)
