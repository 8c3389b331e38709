"""Settings: defaults < TOML file < CALLTAP_* environment < flags, and one clear error line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from calltap.config import Config, ConfigError, describe, load_config, parse_address

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config" / "calltap.toml"


def test_documented_file_matches_the_defaults() -> None:
    config = load_config(REPO_CONFIG, {"provider": "http://127.0.0.1:9"}, {})
    expected = replace(
        Config(), back=("127.0.0.1", 8701), admin=("127.0.0.1", 8702), provider="http://127.0.0.1:9"
    )
    assert config == expected


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        'provider = "http://file:1"\ngrace_period = 3.0\nrecord_other = true\n'
        "max_capture_bytes = 100\n"
    )
    env = {
        "CALLTAP_PROVIDER": "http://env:2",
        "CALLTAP_MAX_CAPTURE_BYTES": "200",
        "CALLTAP_COMPARED_PATHS": "/a, /b",
    }
    config = load_config(path, {"provider": "https://flag:3/base/", "front": None}, env)
    assert config.provider == "https://flag:3/base"
    assert config.grace_period == 3.0
    assert config.record_other is True
    assert config.max_capture_bytes == 200
    assert config.compared_paths == ("/a", "/b")
    assert config.front is None
    assert config.back == ("127.0.0.1", 8701)


def test_gateway_alone_runs_front_and_admin_only() -> None:
    config = load_config(None, {"gateway": "http://gw:4000", "admin": "off"}, {})
    assert config.front == ("127.0.0.1", 8700)
    assert config.back is None
    assert config.admin is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:8700", ("::1", 8700)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
        ("OFF", None),
    ],
)
def test_addresses(value: str, expected) -> None:
    assert parse_address("front", value) == expected


@pytest.mark.parametrize(
    ("overrides", "toml", "message"),
    [
        ({"gateway": "not a url"}, "", "gateway"),
        ({"provider": "ftp://x"}, "", "provider"),
        ({"provider": "http://x", "back": "localhost"}, "", "HOST:PORT"),
        ({"provider": "http://x", "back": "h:70000"}, "", "out of range"),
        ({"front": "127.0.0.1:1"}, "", "gateway"),
        ({}, "", "nothing to relay"),
        ({"provider": "http://x"}, "colour = 1\n", "unknown key 'colour'"),
        ({"provider": "http://x"}, "grace_period = -1\n", "grace_period"),
        ({"provider": "http://x"}, "max_capture_bytes = 'lots'\n", "max_capture_bytes"),
        ({"provider": "http://x"}, "mask_body_patterns = ['(']\n", "mask_body_patterns"),
        ({"provider": "http://x"}, "compare_niceness = 20\n", "compare_niceness"),
        ({"provider": "http://x"}, "front = [\n", "config file"),
    ],
)
def test_bad_settings_raise_one_line(tmp_path: Path, overrides, toml: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as error:
        load_config(path, overrides, {})
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_passwords_in_upstream_urls_never_reach_the_startup_line() -> None:
    config = load_config(None, {"provider": "https://user:s3cret-pw@api.example.com/v1"}, {})
    assert config.provider == "https://user:s3cret-pw@api.example.com/v1"
    described = describe(config)
    assert "s3cret-pw" not in str(described)
    assert described["provider"].startswith("https://user:")
