"""Settings: defaults < TOML file < CALLTAP_* environment < flags, and one clear error line."""

from __future__ import annotations

import re
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


def test_a_bucket_url_sends_captures_to_the_spool() -> None:
    config = load_config(None, {"provider": "http://x", "recordings": "s3://team-rec/staging/",
                                "spool": "/var/spool/calltap"}, {})
    assert config.bucket == "s3://team-rec/staging"
    assert config.recordings == Path("/var/spool/calltap")
    default = load_config(None, {"provider": "http://x"}, {"CALLTAP_RECORDINGS": "s3://team-rec"})
    assert (default.bucket, default.recordings) == ("s3://team-rec", Path("recordings-spool"))
    assert load_config(None, {"provider": "http://x"}, {}).bucket is None


@pytest.mark.parametrize(("settings", "message"), [
    ({"recordings": "s3://AB"}, "recordings: 'AB' is not an S3 bucket name"),
    ({"recordings": "s3://key:secret@bucket/p"}, "recordings: s3:// URLs take no credentials"),
    ({"recordings": "s3://bucket/a/../b"}, "has an empty, '.' or '..' part"),
    ({"keep": "some"}, "keep must be one of all, diverged"),
    ({"keep_equal_sample": "1.5"}, "keep_equal_sample must be 0 to 1"),
])
def test_bad_store_settings(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, {"provider": "http://x", **settings}, {})


def test_bucket_is_named_only_through_recordings(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('provider = "http://x"\nbucket = "s3://b1b"\n')
    with pytest.raises(ConfigError, match="unknown key 'bucket'"):
        load_config(path, {}, {})


def test_the_comparison_backlog_bounds_come_from_the_environment_and_are_checked() -> None:
    config = load_config(None, {"provider": "http://x"},
                         {"CALLTAP_COMPARE_DEADLINE": "2.5", "CALLTAP_MAX_COMPARE_BACKLOG": "7"})
    assert (config.compare_deadline, config.max_compare_backlog) == (2.5, 7)
    default = load_config(None, {"provider": "http://x"}, {})
    assert (default.compare_deadline, default.max_compare_backlog) == (60.0, 1000)
    assert default.max_loop_lag == 0.05
    assert load_config(None, {"provider": "http://x"},
                       {"CALLTAP_MAX_LOOP_LAG": "0"}).max_loop_lag == 0.0
    for setting, value, message in (("compare_deadline", "0", "must be positive"),
                                    ("max_compare_backlog", "0", "must be at least 1"),
                                    ("max_loop_lag", "-0.1", "must not be negative")):
        with pytest.raises(ConfigError, match=f"{setting} {message}"):
            load_config(None, {"provider": "http://x", setting: value}, {})
