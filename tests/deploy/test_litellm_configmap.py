"""The two ConfigMaps of deploy/kubernetes, run: calltap's calltap.toml read by calltap's own
loader, and LiteLLM's config.yaml served by the real LiteLLM of tests/with_litellm, with a calltap
on both sides of it and the fake provider behind, as in the pod.

Only what a pod has and a test machine has not is changed: the listeners' ports (loopback ones
the test chooses: LiteLLM's api_base keeps `localhost` and gets calltap's back port), the
provider (the fake one) and the spool directory. The bucket keeps its name and prefix, in a moto
server reached through AWS_ENDPOINT_URL as the Deployment's environment sets it, and `keep` stays
`diverged`: an equal pair is stored only when its request id falls in the sample.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import openai
import pytest
import yaml
from tests.deploy.k8s_helpers import (
    calltap,
    config_argument,
    configmap_file,
    image_calltap_variables,
    litellm,
    removed_variables,
    rendered,
)
from tests.support.logs import LogLines
from tests.support.s3 import S3Server, s3_server
from tests.with_litellm.litellm_stack import (
    CLOCK,
    MASTER_KEY,
    PARALLEL_CALLS,
    STAMP,
    STREAM,
    WEATHER,
    Stack,
    free_port,
    question,
    start_litellm,
    stop_litellm,
)

from calltap.config import Config, load_config
from calltap.fakes.provider import FakeProvider
from calltap.proxy.app import Calltap
from calltap.proxy.keeping import sampled

LITELLM_YAML = "/etc/litellm/config.yaml"
BUCKET = "calltap-recordings"
PREFIX = "staging"
SKIP_REASON = (f"LiteLLM suite off: {STAMP.parent.name} is not built; run `make litellm`,"
               " then rerun pytest")


def configmap_toml(tmp_path: Path) -> Path:
    """The sidecar's calltap.toml, as its ConfigMap mounts it, in a file of its own."""
    docs = rendered()
    path = tmp_path / "calltap.toml"
    path.write_text(configmap_file(docs, calltap(docs), config_argument(calltap(docs))))
    return path


def with_port(url: str, port: int) -> str:
    """`url` with only its port changed."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    return urlunsplit(parts._replace(netloc=f"{parts.hostname}:{port}"))


def test_calltaps_configmap_gives_the_promised_listeners_bucket_spool_and_keep(
        tmp_path: Path) -> None:
    config = load_config(configmap_toml(tmp_path), environ={})
    assert (config.front, config.back, config.admin) == (
        ("0.0.0.0", 8700), ("127.0.0.1", 8701), ("0.0.0.0", 8702))
    assert config.allow_remote is True
    assert (config.gateway, config.provider) == ("http://127.0.0.1:4000",
                                                 "https://api.openai.com")
    assert config.bucket == f"s3://{BUCKET}/{PREFIX}"
    assert config.recordings == config.spool == Path("/var/spool/calltap")
    assert (config.keep, config.keep_equal_sample) == ("diverged", 0.01)


def test_the_sidecars_environment_leaves_the_configmap_in_charge(tmp_path: Path) -> None:
    """The environment the sidecar's program sees (the image's variables less those its command
    removes, plus the pod's plain ones) changes no setting; one image variable left would."""
    docs = rendered()
    sidecar = calltap(docs)
    path = configmap_toml(tmp_path)
    image = image_calltap_variables()
    left = {name: value for name, value in image.items()
            if name not in removed_variables(sidecar["command"])}
    plain = {item["name"]: item["value"] for item in sidecar["env"] if "value" in item}
    assert load_config(path, environ={**left, **plain}) == load_config(path, environ={})
    assert load_config(path, environ={"CALLTAP_RECORDINGS": "/recordings"}).bucket is None


def deployed_calltap(path: Path, spool: Path, gateway_port: int, provider: str) -> Config:
    """The ConfigMap's settings, on loopback ports and the fake provider."""
    config = load_config(path, environ={})
    assert config.gateway is not None
    return dataclasses.replace(
        config, front=("127.0.0.1", 0), back=("127.0.0.1", 0), admin=("127.0.0.1", 0),
        gateway=with_port(config.gateway, gateway_port), provider=provider, recordings=spool)


def deployed_litellm(back_port: int) -> dict[str, Any]:
    """LiteLLM's ConfigMap with each api_base on calltap's back port (host and path kept)."""
    docs = rendered()
    config = yaml.safe_load(configmap_file(docs, litellm(docs), LITELLM_YAML))
    for model in config["model_list"]:
        params = model["litellm_params"]
        assert urlsplit(params["api_base"]).netloc == "localhost:8701"
        params["api_base"] = with_port(params["api_base"], back_port)
    return config


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """A moto server holding the ConfigMap's bucket, and the environment the pod gives its
    containers: the AWS variables (calltap) and the keys LiteLLM's config names."""
    with s3_server(tmp_path) as server:
        server.client().create_bucket(Bucket=BUCKET)
        for name, value in server.environ.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("LITELLM_MASTER_KEY", MASTER_KEY)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-fake")
        yield server


@pytest.mark.litellm
@pytest.mark.skipif(not STAMP.exists(), reason=SKIP_REASON)
async def test_litellms_configmap_sends_every_model_through_calltap(
        s3: S3Server, tmp_path: Path) -> None:
    port = free_port()
    log = LogLines()
    async with FakeProvider() as provider:
        config = deployed_calltap(configmap_toml(tmp_path), tmp_path / "spool", port,
                                  provider.url)
        async with Calltap(config, log_stream=log) as tap:
            assert tap.back_url is not None and tap.front_url is not None
            gateway = await start_litellm(tmp_path, port,
                                          deployed_litellm(urlsplit(tap.back_url).port or 0))
            client = openai.AsyncOpenAI(base_url=f"{tap.front_url}/v1", api_key=MASTER_KEY,
                                        max_retries=0, timeout=30.0)
            try:
                stack = Stack(provider, tap, gateway, log, client)
                await expect_probes_answer(stack)
                await expect_kept_in_the_bucket(stack, s3, config)
                await expect_compared_and_discarded(stack, s3, config)
            finally:
                await client.close()
                stop_litellm(gateway)


REQUEST = {"model": "gpt-4o", "messages": question(), "tools": [WEATHER, CLOCK], **STREAM}


def request_id(config: Config, *, kept: bool) -> str:
    """The first id `keep = diverged` keeps an equal pair of (or discards one of)."""
    return next(rid for rid in (f"configmap-{n}" for n in range(10_000))
                if sampled(rid, config.keep_equal_sample) is kept)


async def uploaded(stack: Stack) -> None:
    async with asyncio.timeout(60):
        while stack.tap.health()["store"]["backlog_pairs"]:
            await asyncio.sleep(0.1)


def stored_keys(s3: S3Server, rid: str) -> list[str]:
    return sorted(key for key in s3.objects(BUCKET, f"{PREFIX}/") if f"/{rid}/" in key)


async def expect_kept_in_the_bucket(stack: Stack, s3: S3Server, config: Config) -> None:
    """An equal pair in the sample: relayed whole, paired by the client's id (LiteLLM forwards
    it), `equal`, and stored in the ConfigMap's bucket under its prefix."""
    rid = request_id(config, kept=True)
    sent = await stack.chat(rid, **REQUEST)
    assert sent.reply.calls() == PARALLEL_CALLS
    stack.expect_faithful(sent, pairing="header")
    await uploaded(stack)
    keys = stored_keys(s3, rid)
    assert [key.rsplit("/", 1)[1] for key in keys if key.endswith("pair.json")] == ["pair.json"]
    assert all(key.startswith(f"{PREFIX}/") for key in keys)


async def expect_compared_and_discarded(stack: Stack, s3: S3Server, config: Config) -> None:
    """An equal pair outside the sample: compared and logged `equal` all the same, counted as
    discarded, and never stored."""
    rid = request_id(config, kept=False)
    stream = await stack.client.chat.completions.create(
        **REQUEST, extra_headers={"X-Request-ID": rid})
    async for _chunk in stream:
        pass
    async with asyncio.timeout(30):
        while not stack.log.lines("pair.compared", rid):
            await asyncio.sleep(0.05)
    (compared,) = stack.log.lines("pair.compared", rid)
    assert (compared["verdict"], compared["pairing"]) == ("equal", "header")
    async with asyncio.timeout(30):
        while "calltap_pairs_discarded_total 1.0" not in await metrics(stack):
            await asyncio.sleep(0.05)
    await uploaded(stack)
    assert stored_keys(s3, rid) == []
    assert not list(Path(stack.tap.recordings).glob(f"*/{rid}"))


async def expect_probes_answer(stack: Stack) -> None:
    """Every probe of the Deployment answers 200: LiteLLM's on the real release, calltap's on
    its admin listener."""
    docs = rendered()
    probed = [(stack.litellm.url, litellm(docs)), (stack.tap.admin_url, calltap(docs))]
    async with aiohttp.ClientSession() as session:
        for base, container in probed:
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                path = container[probe]["httpGet"]["path"]
                async with session.get(f"{base}{path}") as response:
                    assert response.status == 200, (container["name"], probe, path)


async def metrics(stack: Stack) -> str:
    async with aiohttp.ClientSession() as session, session.get(
            f"{stack.tap.admin_url}/metrics") as response:
        return await response.text()
