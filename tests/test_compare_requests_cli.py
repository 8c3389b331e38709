"""`calltap compare PAIR_DIR` and `calltap compare --requests` as a user runs them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_cli_offline import calltap

PAIR = Path(__file__).parent.parent / "examples" / "requests" / "tool-dropped"
CLIENT = PAIR / "downstream.request"
PROVIDER = PAIR / "upstream.request"


def codes(stdout: str) -> list[tuple[str, str | None]]:
    return [(finding["code"], finding.get("tool")) for finding in json.loads(stdout)["findings"]]


def test_a_pair_directory_is_compared_with_its_requests() -> None:
    result = calltap("compare", PAIR, "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "diverged"
    assert report["requests"]["verdict"] == "diverged"
    assert sorted(codes(result.stdout)) == [
        ("REQUEST_TOOL_DROPPED", "clock"), ("SAMPLING_CHANGED", None),
        ("TOOL_SCHEMA_CHANGED", "weather")]
    assert report["requests"]["downstream"]["tools"] == 2
    assert report["requests"]["upstream"]["tools"] == 1


def test_a_pair_directory_whose_requests_agree_is_equal(tmp_path: Path) -> None:
    pair = tmp_path / "pair"
    shutil.copytree(PAIR, pair)
    shutil.copy(CLIENT, pair / "upstream.request")
    result = calltap("compare", pair, "--json")
    assert result.returncode == 0, result.stdout
    assert json.loads(result.stdout)["requests"]["findings"] == []


def test_a_pair_directory_without_requests_compares_its_answers_alone(tmp_path: Path) -> None:
    pair = tmp_path / "pair"
    shutil.copytree(PAIR, pair)
    (pair / "upstream.request").unlink()
    result = calltap("compare", pair, "--json")
    assert result.returncode == 0, result.stdout
    assert "requests" not in json.loads(result.stdout)


def test_two_request_bodies_compare_alone_and_redact_drops_tool_names() -> None:
    result = calltap("compare", "--requests", CLIENT, PROVIDER, "--json", "--redact")
    assert result.returncode == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    assert sorted(finding["code"] for finding in findings) == [
        "REQUEST_TOOL_DROPPED", "SAMPLING_CHANGED", "TOOL_SCHEMA_CHANGED"]
    assert all("tool" not in finding and "detail" not in finding for finding in findings)
    assert "clock" not in result.stdout and "weather" not in result.stdout


def test_a_request_that_is_not_json_is_inconclusive(tmp_path: Path) -> None:
    broken = tmp_path / "broken.request"
    broken.write_bytes(b'{"messages": [')
    result = calltap("compare", "--requests", CLIENT, broken, "--json")
    assert result.returncode == 3, result.stderr
    assert [finding["code"] for finding in json.loads(result.stdout)["findings"]] == [
        "REQUEST_UNREADABLE"]


def test_requests_takes_exactly_two_files() -> None:
    result = calltap("compare", "--requests", CLIENT)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "--requests takes two files" in result.stderr


def test_a_missing_request_file_is_a_usage_error(tmp_path: Path) -> None:
    result = calltap("compare", "--requests", CLIENT, tmp_path / "nowhere.request")
    assert result.returncode == 2
    assert "cannot read" in result.stderr
