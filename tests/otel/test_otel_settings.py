"""Whether export is on and where it goes: `[otel]` in TOML under the standard OTEL_* variables,
each bad value one line naming it; and the shipper's bounds."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from calltap.config import ConfigError, describe, load_config
from calltap.otel.settings import read_otel
from calltap.otel.shipper import EXPORT_FAILED, QUEUE_FULL, SHUTDOWN, Shipper


def test_export_is_off_without_an_endpoint() -> None:
    assert read_otel(None, {}) is None
    assert read_otel({"content": True}, {"OTEL_SERVICE_NAME": "x"}) is None


def test_a_base_endpoint_gets_the_signal_paths_and_a_signal_endpoint_is_used_as_is() -> None:
    settings = read_otel({"endpoint": "http://collector:4318/", "logs": True}, {})
    assert settings is not None
    assert settings.traces_endpoint == "http://collector:4318/v1/traces"
    assert settings.logs_endpoint == "http://collector:4318/v1/logs"
    settings = read_otel(None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://t.example/in",
                                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://l.example/in"})
    assert settings is not None
    assert (settings.traces_endpoint, settings.logs_endpoint) == (
        "https://t.example/in", "https://l.example/in")


def test_the_environment_beats_the_file() -> None:
    settings = read_otel(
        {"endpoint": "http://file:4318", "service_name": "from-file", "timeout": 3,
         "headers": {"X-Team": "file", "X-Only-File": "kept"}},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SERVICE_NAME": "from-env",
         "OTEL_EXPORTER_OTLP_HEADERS": "x-team=env,Authorization=Basic%20abc%3D",
         "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"})
    assert settings is not None
    assert settings.traces_endpoint == "http://env:4318/v1/traces"
    assert settings.service_name == "from-env"
    assert settings.timeout == 2.5
    assert settings.headers == {"x-team": "env", "x-only-file": "kept",
                                "authorization": "Basic abc="}
    assert "abc" not in repr(settings)
    assert settings.logs_endpoint is None and settings.content is False


def test_otel_sdk_disabled_turns_export_off() -> None:
    assert read_otel({"endpoint": "http://c:4318"}, {"OTEL_SDK_DISABLED": "true"}) is None


@pytest.mark.parametrize(("table", "fragment"), [
    ({"endpoint": "collector:4318"}, "http:// or https://"),
    ({"endpoint": "http://c:4318", "content": "sometimes"}, "otel.content"),
    ({"endpoint": "http://c:4318", "timeout": 0}, "otel.timeout"),
    ({"endpoint": "http://c:4318", "headers": "x=1"}, "otel.headers"),
    ({"endpoint": "http://c:4318", "sample": 1}, "unknown key 'sample'"),
    ({"traces_endpoint": "http://c:4318/v1/traces", "logs": True}, "otel.logs"),
])
def test_a_bad_otel_setting_is_one_line_naming_it(tmp_path: Path, table: dict[str, object],
                                                  fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        read_otel(table, {})


def test_the_toml_table_reaches_the_config(tmp_path: Path) -> None:
    config_file = tmp_path / "calltap.toml"
    config_file.write_text('gateway = "http://127.0.0.1:9"\n[otel]\n'
                           'endpoint = "http://127.0.0.1:4318"\ncontent = true\n')
    config = load_config(config_file, environ={})
    assert config.otel is not None and config.otel.content
    assert describe(config)["otel"]["traces_endpoint"] == "http://127.0.0.1:4318/v1/traces"
    config_file.write_text('gateway = "http://127.0.0.1:9"\n[otel]\nendpoint = "nope"\n')
    with pytest.raises(ConfigError, match="otel traces endpoint"):
        load_config(config_file, environ={})
    assert load_config(None, {"gateway": "http://127.0.0.1:9"}, environ={}).otel is None


def test_the_shipper_counts_what_a_full_queue_a_failed_export_and_shutdown_cost() -> None:
    release = threading.Event()
    exported: list[list[int]] = []
    drops: list[tuple[int, str]] = []

    def export(batch: list[int]) -> bool:
        release.wait(5)
        exported.append(batch)
        return batch[0] != 99

    shipper = Shipper("test", export, max_queue=3, batch=1, interval=0.01,
                      on_drop=lambda count, reason, _error: drops.append((count, reason)))
    for item in (1, 2, 3, 4):
        shipper.put(item)
    assert drops == [(1, QUEUE_FULL)]
    shipper.start()
    release.set()
    while shipper.queued:
        release.wait(0.01)
    shipper.put(99)
    shipper.close(timeout=5)
    shipper.put(5)
    assert exported == [[1], [2], [3], [99]]
    assert drops == [(1, QUEUE_FULL), (1, EXPORT_FAILED), (1, SHUTDOWN)]
    assert (shipper.exported, shipper.dropped) == (3, 3)
