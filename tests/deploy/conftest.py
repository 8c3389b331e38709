"""Fixtures of the image tests: podman (required in CI, skipped with a reason elsewhere), the image
built by `make image` once per change of its inputs, and calltap running in it.

The image is tagged with a hash of everything the build reads (the Dockerfile, the Makefile, the
package's sources, the base image's id), so a second run reuses it and a change rebuilds it. The
container shares the host's network: it reaches the fake provider on the host's loopback and the
test reaches its listeners there, on ports picked for it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from tests.deploy.image_helpers import (
    IMAGE_REPOSITORY,
    PODMAN,
    PODMAN_ENV,
    ROOT,
    Container,
    inputs_digest,
    podman_sync,
    running,
)


@pytest.fixture(scope="session")
def podman_available() -> None:
    if PODMAN is None:
        reason = "podman missing: apt-get install podman runc (CI installs it in .ci/run)"
        if os.environ.get("CALLTAP_REQUIRE_PODMAN") or os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def image(podman_available: None) -> str:
    """The image's tag: reused when its inputs are unchanged, else built by `make image` (on
    IMAGE_BASE when set, as CI sets it) and the older test images removed."""
    base = os.environ.get("IMAGE_BASE") or "python:3.11-slim"
    if os.environ.get("IMAGE_BASE"):
        base = podman_sync("image", "inspect", "--format", "{{.Id}}", base)
    tag = f"{IMAGE_REPOSITORY}:test-{inputs_digest(base)[:16]}"
    exists = subprocess.run([PODMAN or "podman", "image", "exists", tag], env=PODMAN_ENV)
    if exists.returncode != 0:
        built = subprocess.run(["make", "--no-print-directory", "image", f"IMAGE={tag}"],
                               cwd=ROOT, env=PODMAN_ENV, capture_output=True, text=True,
                               timeout=900)
        if built.returncode != 0:
            hint = "" if os.environ.get("IMAGE_BASE") else (
                "\nNo registry reachable? `make image-base`, then set"
                " IMAGE_BASE=localhost/calltap-base:bookworm (CI does).")
            pytest.fail(f"make image failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}{hint}")
        remove_older_test_images(tag)
    return tag


def remove_older_test_images(keep: str) -> None:
    """Each source change builds a new test image; only the latest is worth its disk."""
    tags = podman_sync("images", "--format", "{{.Repository}}:{{.Tag}}",
                       "--filter", f"reference={IMAGE_REPOSITORY}:test-*").split()
    for tag in tags:
        if tag != keep:
            subprocess.run([PODMAN or "podman", "rmi", tag], env=PODMAN_ENV,
                           capture_output=True)


@pytest.fixture
def calltap_in_image(
    image: str, tmp_path: Path,
) -> Iterator[Callable[..., AbstractAsyncContextManager[Container]]]:
    """`async with calltap_in_image(provider_url, **env) as container`: calltap in the image."""
    yield lambda provider_url, **env: running(image, tmp_path, provider_url, **env)
