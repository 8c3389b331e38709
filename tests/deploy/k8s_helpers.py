"""What deploy/ holds, read as Kubernetes and Compose would read it, for tests/deploy.

`rendered()` is `kubectl kustomize deploy/kubernetes` (the kubectl the `dev` extra installs, so
the ConfigMaps are the ones kustomize generates, hashed names and all); `pod()` and `calltap()`
pick the parts the tests look at; `configmap_file()` is a file as the pod sees it mounted.
`compose_config()` is `podman-compose config` of deploy/compose.yaml: interpolated, profiles
applied, as podman-compose would run it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"
BIN = Path(sys.executable).parent
COMPOSE_SECRETS = {"OPENAI_API_KEY": "sk-compose-check", "LITELLM_MASTER_KEY": "sk-compose-master"}
"""The two variables deploy/compose.yaml requires; values only for `config` to interpolate."""


def run_tool(name: str, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """A console script of this venv (installed by the `dev` extra), never one found on PATH."""
    tool = BIN / name
    assert tool.exists(), f"{tool} is missing: `pip install -e '.[dev]'` installs it"
    return subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=ROOT, check=False)


@cache
def _rendered_text() -> str:
    done = run_tool("kubectl", "kustomize", str(KUBERNETES))
    assert done.returncode == 0, done.stderr
    return done.stdout


def rendered() -> list[dict[str, Any]]:
    """Every object `kubectl apply -k deploy/kubernetes` would send, freshly parsed."""
    return [doc for doc in yaml.safe_load_all(_rendered_text()) if doc]


def only(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in docs if doc["kind"] == kind]
    return found


def pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The Deployment's pod spec."""
    return only(docs, "Deployment")["spec"]["template"]["spec"]


def calltap(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (sidecar,) = [c for c in pod(docs).get("initContainers", []) if c["name"] == "calltap"]
    return sidecar


def litellm(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (gateway,) = [c for c in pod(docs)["containers"] if c["name"] == "litellm"]
    return gateway


def mounted_configmap(docs: list[dict[str, Any]], container: dict[str, Any],
                      path: str) -> dict[str, Any]:
    """The ConfigMap a container sees at `path` (a file under one of its volume mounts)."""
    volumes = {volume["name"]: volume for volume in pod(docs)["volumes"]}
    for mount in container["volumeMounts"]:
        if path.startswith(mount["mountPath"].rstrip("/") + "/"):
            name = volumes[mount["name"]]["configMap"]["name"]
            (configmap,) = [doc for doc in docs if doc["kind"] == "ConfigMap"
                            and doc["metadata"]["name"] == name]
            return configmap
    raise AssertionError(f"nothing is mounted at {path} in {container['name']}")


def configmap_file(docs: list[dict[str, Any]], container: dict[str, Any], path: str) -> str:
    """The text of the file `path` as `container` reads it from its ConfigMap."""
    return mounted_configmap(docs, container, path)["data"][Path(path).name]


def config_argument(container: dict[str, Any]) -> str:
    """The path given to `--config` on the container's command line."""
    words = [*container.get("command", []), *container.get("args", [])]
    return words[words.index("--config") + 1]


def removed_variables(words: list[str]) -> set[str]:
    """The names an `env -u NAME ...` command line removes before it runs its program."""
    if not words or words[0] != "env":
        return set()
    return {words[i + 1] for i, word in enumerate(words) if word == "-u"}


def image_calltap_variables() -> dict[str, str]:
    """The CALLTAP_* variables the Dockerfile's ENV presets in the image, by name."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip().upper().startswith("ENV "):
            found.update(re.findall(r"(CALLTAP_[A-Z_]+)(?:=|\s+)(\S+)", line))
    return found


def port_number(container: dict[str, Any], port: int | str) -> int:
    """A container port given by number or by name."""
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return number


def compose_config(*args: str, env: dict[str, str] | None = None
                   ) -> subprocess.CompletedProcess[str]:
    """`podman-compose --dry-run -f deploy/compose.yaml [args] config` (no podman is called)."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "CALLTAP_", "COMPOSE_"))}
    environ.update(COMPOSE_SECRETS if env is None else env)
    return run_tool("podman-compose", "--dry-run", "-f", str(COMPOSE), *args, "config",
                    env=environ)
