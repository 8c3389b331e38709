"""deploy/kubernetes and deploy/compose.yaml: valid for the tools that read them, and doing what
the design says: calltap a native sidecar of LiteLLM, LiteLLM's provider base URLs on calltap's
back, clients on calltap's front, probes on /healthz, a bounded spool, credentials from a Secret,
nothing writable but the volumes, and the index of pairs compacted on a schedule.

The manifests are what `kubectl kustomize` renders, checked against Kubernetes' own schemas in
strict mode (an unknown field is an error) for 1.29, the first release with native sidecars on by
default, and 1.33, where they are stable. The compose file is read by podman-compose and checked
against the Compose specification.
"""

from __future__ import annotations

import copy
import tomllib
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from compose_spec import PyCompose
from tests.deploy.k8s_helpers import (
    COMPOSE,
    KUBERNETES,
    ROOT,
    calltap,
    compose_config,
    config_argument,
    configmap_file,
    image_calltap_variables,
    litellm,
    only,
    pod,
    port_number,
    removed_variables,
    rendered,
)

from calltap import cli

KUBERNETES_VERSIONS = ("1.29.0", "1.33.0")
UID = 10001
CALLTAP_TOML = "/etc/calltap/calltap.toml"
LITELLM_YAML = "/etc/litellm/config.yaml"
SECRET_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def settings(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """calltap.toml as the sidecar reads it from its ConfigMap."""
    sidecar = calltap(docs)
    return tomllib.loads(configmap_file(docs, sidecar, config_argument(sidecar)))


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def quantity_bytes(quantity: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    return int(quantity[:-2]) * units[quantity[-2:]]


def all_containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    spec = pod(docs)
    return [*spec.get("initContainers", []), *spec["containers"]]


# -- Kubernetes: valid -------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_rendered_manifest_is_valid_in_strict_mode(version: str) -> None:
    docs = rendered()
    assert sorted(doc["kind"] for doc in docs) == ["ConfigMap", "ConfigMap", "CronJob",
                                                   "CronJob", "Deployment", "Service"]
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_strict_validation_refuses_an_unknown_field_and_a_sidecar_before_1_28() -> None:
    """The check is not vacuous: a misspelt field fails, and so does the sidecar's
    restartPolicy for a release that does not know it."""
    misspelt = copy.deepcopy(only(rendered(), "Deployment"))
    misspelt["spec"]["template"]["spec"]["initContainers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(misspelt, KUBERNETES_VERSIONS[0], strict=True)
    with pytest.raises(kubernetes_validate.ValidationError, match="restartPolicy"):
        kubernetes_validate.validate(only(rendered(), "Deployment"), "1.27.0", strict=True)


def test_each_config_file_is_one_generated_configmap_mounted_where_its_program_reads_it() -> None:
    docs = rendered()
    assert configmap_file(docs, calltap(docs), CALLTAP_TOML) == (
        KUBERNETES / "calltap.toml").read_text()
    assert configmap_file(docs, litellm(docs), LITELLM_YAML) == (
        KUBERNETES / "litellm.yaml").read_text()
    assert config_argument(calltap(docs)) == CALLTAP_TOML
    assert config_argument(litellm(docs)) == LITELLM_YAML


# -- Kubernetes: what the design promises --------------------------------------------------------


def test_calltap_is_a_native_sidecar_and_litellm_the_only_main_container() -> None:
    docs = rendered()
    spec = pod(docs)
    assert [c["name"] for c in spec["initContainers"]] == ["calltap"]
    assert calltap(docs)["restartPolicy"] == "Always"
    assert [c["name"] for c in spec["containers"]] == ["litellm"]
    assert calltap(docs)["command"][-3:] == ["serve", "--config", CALLTAP_TOML]


def test_every_litellm_model_calls_the_provider_through_calltaps_back() -> None:
    docs = rendered()
    config = yaml.safe_load(configmap_file(docs, litellm(docs), LITELLM_YAML))
    assert config["model_list"]
    back = port_of(settings(docs)["back"])
    for model in config["model_list"]:
        base = urlsplit(model["litellm_params"]["api_base"])
        assert (base.scheme, base.hostname, base.port) == ("http", "localhost", 8701), model
        assert base.port == back
    assert settings(docs)["back"] == "127.0.0.1:8701"
    assert config["general_settings"]["forward_client_headers_to_llm_api"] is True


def test_calltaps_front_relays_to_the_port_litellm_listens_on() -> None:
    docs = rendered()
    gateway = urlsplit(settings(docs)["gateway"])
    gateway_container = litellm(docs)
    assert gateway.hostname == "127.0.0.1"
    assert gateway.port == port_number(gateway_container, "gateway")
    arguments = gateway_container["args"]
    assert int(arguments[arguments.index("--port") + 1]) == gateway.port


def test_the_service_sends_clients_to_calltaps_front_port_8700() -> None:
    docs = rendered()
    service = only(docs, "Service")
    (port,) = service["spec"]["ports"]
    assert port_number(calltap(docs), port["targetPort"]) == 8700
    assert port_of(settings(docs)["front"]) == 8700
    labels = only(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_the_three_probes_ask_calltaps_admin_port_for_healthz() -> None:
    docs = rendered()
    sidecar = calltap(docs)
    admin = port_of(settings(docs)["admin"])
    assert admin == 8702
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check = sidecar[probe]["httpGet"]
        assert check["path"] == "/healthz", probe
        assert port_number(sidecar, check["port"]) == admin, probe


def test_prometheus_scrapes_calltaps_metrics_on_the_admin_port() -> None:
    docs = rendered()
    annotations = only(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == port_of(settings(docs)["admin"])
    assert annotations["prometheus.io/path"] == "/metrics"


def test_the_spool_is_a_bounded_emptydir_and_recording_pauses_before_it_is_full() -> None:
    docs = rendered()
    toml = settings(docs)
    assert toml["recordings"].startswith("s3://")
    (mount,) = [m for m in calltap(docs)["volumeMounts"] if m["mountPath"] == toml["spool"]]
    volume = {v["name"]: v for v in pod(docs)["volumes"]}[mount["name"]]
    limit = quantity_bytes(volume["emptyDir"]["sizeLimit"])
    assert 0 < toml["disk_quota_bytes"] < limit
    assert toml["keep"] == "diverged"


def test_the_buckets_credentials_come_from_a_secret_and_the_rest_is_plain() -> None:
    docs = rendered()
    env = {item["name"]: item for item in calltap(docs)["env"]}
    for name in SECRET_VARIABLES:
        reference = env[name]["valueFrom"]["secretKeyRef"]
        assert reference == {"name": "calltap-bucket", "key": name}
        assert "value" not in env[name]
    assert env["AWS_REGION"]["value"]
    assert env["AWS_ENDPOINT_URL"]["value"].startswith(("http://", "https://"))
    assert "Secret" not in {doc["kind"] for doc in docs}


def test_every_container_runs_as_10001_on_a_read_only_root_without_capabilities() -> None:
    docs = rendered()
    assert pod(docs)["securityContext"]["runAsNonRoot"] is True
    for container in all_containers(docs):
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True, container["name"]
        assert context["runAsUser"] == UID, container["name"]
        assert context["readOnlyRootFilesystem"] is True, container["name"]
        assert context["allowPrivilegeEscalation"] is False, container["name"]
        assert context["capabilities"]["drop"] == ["ALL"], container["name"]
        assert "limits" in container["resources"] and "requests" in container["resources"]
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/tmp" in mounts, f"{container['name']} has no writable /tmp"


def test_no_calltap_variable_of_the_image_overrides_the_configmap() -> None:
    """calltap reads its environment over its config file: every CALLTAP_* the Dockerfile
    presets is removed by the sidecar's command, and the pod sets none."""
    docs = rendered()
    sidecar = calltap(docs)
    assert set(image_calltap_variables()) <= removed_variables(sidecar["command"])
    assert not [item["name"] for item in sidecar["env"] if item["name"].startswith("CALLTAP_")]


def test_the_litellm_image_is_the_release_the_litellm_suite_runs() -> None:
    docs = rendered()
    pinned = (ROOT / "tests/with_litellm/requirements.txt").read_text()
    version = pinned.split("litellm[proxy]==")[1].split()[0]
    assert litellm(docs)["image"] == f"ghcr.io/berriai/litellm:v{version}"


# -- Kubernetes: compaction of the index of pairs ------------------------------------------------


def cronjobs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "CronJob"}


def job_container(cronjob: dict[str, Any]) -> dict[str, Any]:
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return container


def test_compaction_runs_nightly_for_closed_days_and_hourly_for_today() -> None:
    docs = rendered()
    jobs = cronjobs(docs)
    bucket = settings(docs)["recordings"]
    assert {name: (job["spec"]["schedule"], job_container(job)["command"])
            for name, job in jobs.items()} == {
        "calltap-index-compact": ("20 0 * * *", ["calltap", "index", "compact", bucket]),
        "calltap-index-compact-today": ("40 * * * *", ["calltap", "index", "compact", bucket,
                                                       "--day", "today"])}
    parser = cli.build_parser("index")
    for job in jobs.values():
        assert job["spec"]["concurrencyPolicy"] == "Forbid"
        assert job["spec"]["timeZone"] == "Etc/UTC"
        assert 0 < job["spec"]["jobTemplate"]["spec"]["backoffLimit"] <= 3
        parsed = parser.parse_args(job_container(job)["command"][1:])
        assert (parsed.action, parsed.source) == ("compact", bucket)


def test_compaction_uses_the_sidecars_image_bucket_and_lock_down() -> None:
    docs = rendered()
    sidecar_env = {item["name"]: item for item in calltap(docs)["env"]}
    for job in cronjobs(docs).values():
        spec = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        container = job_container(job)
        assert container["image"] == calltap(docs)["image"]
        env = {item["name"]: item for item in container["env"]}
        for name in (*SECRET_VARIABLES, "AWS_REGION", "AWS_ENDPOINT_URL"):
            assert env[name] == sidecar_env[name], name
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["automountServiceAccountToken"] is False
        context = container["securityContext"]
        assert (context["runAsUser"], context["readOnlyRootFilesystem"],
                context["allowPrivilegeEscalation"], context["capabilities"]["drop"]) == (
            UID, True, False, ["ALL"])
        assert container["resources"]["limits"]["memory"]
        (mount,) = container["volumeMounts"]
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        assert mount["mountPath"] == "/tmp" and volumes[mount["name"]]["emptyDir"]["sizeLimit"]


# -- Compose ------------------------------------------------------------------------------------


def compose(*profiles: str) -> dict[str, Any]:
    done = compose_config(*(arg for p in profiles for arg in ("--profile", p)))
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def test_compose_file_follows_the_compose_specification() -> None:
    text = COMPOSE.read_text()
    PyCompose.from_yaml(text).validate()
    with pytest.raises(ValueError, match="read_onli"):
        PyCompose.from_yaml(text.replace("read_only:", "read_onli:", 1)).validate()


def test_podman_compose_reads_it_and_the_bucket_is_a_profile() -> None:
    assert sorted(compose()["services"]) == ["calltap", "litellm"]
    assert sorted(compose("bucket")["services"]) == ["bucket", "calltap", "litellm"]
    missing = compose_config(env={"LITELLM_MASTER_KEY": "sk-compose-master"})
    assert missing.returncode != 0
    assert "OPENAI_API_KEY" in missing.stderr + missing.stdout


def test_compose_runs_the_same_config_files_in_one_network_namespace() -> None:
    services = compose("bucket")["services"]
    tap, gateway = services["calltap"], services["litellm"]
    assert f"./kubernetes/calltap.toml:{CALLTAP_TOML}:ro" in COMPOSE.read_text()
    assert f"./kubernetes/litellm.yaml:{LITELLM_YAML}:ro" in COMPOSE.read_text()
    assert any(v.endswith(f":{CALLTAP_TOML}:ro") for v in tap["volumes"])
    assert any(v.endswith(f":{LITELLM_YAML}:ro") for v in gateway["volumes"])
    assert gateway["network_mode"] == "service:calltap"
    assert "127.0.0.1:4000:8700" in tap["ports"]
    assert gateway["depends_on"]["calltap"]["condition"] == "service_healthy"
    assert "recordings:/recordings" in tap["volumes"]
    assert tap["environment"]["CALLTAP_RECORDINGS"] == "/recordings"
    assert tap["environment"]["CALLTAP_SPOOL"].startswith("/recordings/")
    assert services["bucket"]["profiles"] == ["bucket"]


def test_compose_containers_are_locked_down_and_keep_the_images_variables_out() -> None:
    services = compose()["services"]
    for name in ("calltap", "litellm"):
        service = services[name]
        assert service["user"] == f"{UID}:{UID}", name
        assert service["read_only"] is True, name
        assert service["cap_drop"] == ["ALL"], name
        assert "/tmp" in service["tmpfs"], name
    tap = services["calltap"]
    kept = set(image_calltap_variables()) - removed_variables(tap["entrypoint"])
    assert kept <= set(tap["environment"]), "an image variable overrides calltap.toml"
    assert {name for name in tap["environment"] if name.startswith("CALLTAP_")} == {
        "CALLTAP_RECORDINGS", "CALLTAP_SPOOL"}
