"""The recordings format: names, suffixes, pair.json's version, a capture from a leg."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from calltap import recordings
from calltap.transcript import Capture


@pytest.mark.parametrize(
    ("content_type", "extension"),
    [
        ("text/event-stream; charset=utf-8", "sse"),
        ("application/x-ndjson", "ndjson"),
        ("application/vnd.amazon.eventstream", "eventstream"),
        ("Application/JSON", "json"),
        ("application/problem+json", "json"),
        ("text/html", "body"),
        ("", "body"),
    ],
)
def test_a_body_is_named_by_its_framing(content_type: str, extension: str) -> None:
    assert recordings.body_extension(content_type) == extension


def test_names_of_legs_attempts_and_requests() -> None:
    assert recordings.stem("downstream") == "downstream"
    assert recordings.stem("upstream", 1) == "upstream"
    assert recordings.stem("upstream", 3) == "upstream.attempt-3"
    assert recordings.body_name(recordings.stem("upstream", 2), "sse") == "upstream.attempt-2.sse"
    assert recordings.request_name("downstream") == "downstream.request"
    assert recordings.restemmed("upstream.attempt-2.sse", "upstream.attempt-2", "upstream") == (
        "upstream.sse"
    )
    assert recordings.restemmed("upstream.request", "upstream", "upstream.attempt-1") == (
        "upstream.attempt-1.request"
    )
    assert recordings.restemmed("downstream.sse", "upstream", "upstream.attempt-1") is None


@pytest.mark.parametrize(
    ("name", "side"),
    [
        ("upstream.sse", "upstream"),
        ("downstream.ndjson", "downstream"),
        ("upstream.eventstream", "upstream"),
        ("upstream.attempt-1.sse", None),
        ("downstream.request", None),
        ("upstream.sse.partial", None),
        ("pair.json", None),
    ],
)
def test_which_files_hold_a_compared_leg(name: str, side: str | None) -> None:
    assert recordings.side_of_body(name) == side


def test_pair_json_says_its_format_first_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    encoded = recordings.encode_pair({"request_id": "r", "legs": {}})
    assert encoded.startswith(b'{\n  "format": 1,') and encoded.endswith(b"}\n")
    (tmp_path / "pair.json").write_bytes(encoded)
    assert recordings.read_pair(tmp_path)["request_id"] == "r"
    (tmp_path / "pair.json").write_bytes(orjson.dumps({"format": 2, "legs": {}}))
    with pytest.raises(recordings.PairUnreadable, match="format 2 is newer than 1"):
        recordings.read_pair(tmp_path)
    assert recordings.pair_legs(tmp_path) == {}


def test_a_pair_json_without_format_is_the_first_version(tmp_path: Path) -> None:
    legs = {"downstream": {"file": "downstream.sse"},
            "upstream_attempts": [{"file": "upstream.attempt-1.sse"}, {"file": "upstream.sse"}]}
    (tmp_path / "pair.json").write_bytes(orjson.dumps({"legs": legs}))
    assert recordings.pair_legs(tmp_path) == {
        "downstream": {"file": "downstream.sse"},
        "upstream": {"file": "upstream.sse"},
    }


def test_a_capture_takes_path_status_encoding_and_truncation_from_its_leg() -> None:
    leg = {"path": "/v1/messages", "status": 200, "ended": "capture_truncated",
           "response_headers": {"Content-Encoding": "gzip"}}
    assert recordings.capture_of(b"x", leg) == Capture(
        b"x", path="/v1/messages", content_encoding="gzip", status=200, truncated=True
    )
    assert recordings.capture_of(b"x", None) == Capture(b"x")


def test_capture_directories_and_leftovers(tmp_path: Path) -> None:
    pair = tmp_path / "2026-12-01" / "a"
    single = tmp_path / "2026-12-01" / "b"
    cut = tmp_path / "2026-12-01" / "c"
    for directory in (pair, single, cut):
        directory.mkdir(parents=True)
    (pair / "upstream.ndjson").write_bytes(b"")
    (pair / "downstream.sse").write_bytes(b"")
    (single / "upstream.eventstream").write_bytes(b"")
    (cut / "downstream.sse.partial").write_bytes(b"")
    assert recordings.capture_directories(tmp_path) == [pair, single]
    assert recordings.leftovers(tmp_path) == ["2026-12-01/c/downstream.sse.partial"]
    assert recordings.leg_body(pair, "upstream") == pair / "upstream.ndjson"
    assert recordings.leg_body(cut, "downstream") is None


def test_the_day_is_the_utc_day() -> None:
    assert recordings.day_directory(Path("rec"), 1796083199.0) == Path("rec/2026-11-30")
    assert recordings.day_directory(Path("rec"), 1796083200.0) == Path("rec/2026-12-01")


def test_upstream_attempts_are_the_retries_in_order_else_the_one_leg() -> None:
    first, second = {"attempt": 1}, {"attempt": 2}
    retried = {"legs": {"upstream": second, "upstream_attempts": [first, "junk", second]}}
    assert recordings.upstream_attempts(retried) == [first, second]
    assert recordings.upstream_attempts({"legs": {"upstream": first}}) == [first]
    assert recordings.upstream_attempts({"legs": {"upstream_attempts": [], "upstream": first}}) == [
        first]
    assert recordings.upstream_attempts({"legs": {"downstream": first}}) == []
    assert recordings.upstream_attempts({"legs": "junk"}) == []


def test_a_legs_files_are_plain_names_inside_its_directory(tmp_path: Path) -> None:
    (tmp_path / "upstream.sse").write_bytes(b"data: [DONE]\n\n")
    leg = {"file": "upstream.sse", "request_file": "upstream.request"}
    assert recordings.leg_files(leg) == ["upstream.sse", "upstream.request"]
    assert recordings.response_body(tmp_path, leg) == b"data: [DONE]\n\n"
    assert recordings.response_body(tmp_path, {"file": "upstream.json"}) is None
    for name in ("../upstream.sse", "/etc/passwd", "", ".", "..", 7):
        assert recordings.leg_files({"file": name}) == []
        assert recordings.response_body(tmp_path, {"file": name}) is None
    assert recordings.response_body(tmp_path, None) is None


def test_a_written_pair_directory_is_private_and_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "case"
    recordings.write_pair_directory(target, {"request_id": "r1"}, {"upstream.sse": b"x"}, "run")
    assert sorted(path.name for path in target.iterdir()) == [
        recordings.CASE_README, recordings.PAIR_JSON, "upstream.sse"]
    assert target.stat().st_mode & 0o777 == 0o700
    assert {path.stat().st_mode & 0o777 for path in target.iterdir()} == {0o600}
    assert recordings.read_pair(target) == {"format": recordings.FORMAT, "request_id": "r1"}
    assert (target / recordings.CASE_README).read_text() == "run"
    with pytest.raises(FileExistsError):
        recordings.write_pair_directory(target, {}, {}, "")
    for name in ("../x", recordings.PAIR_JSON, recordings.CASE_README):
        with pytest.raises(ValueError, match="not a capture file name"):
            recordings.write_pair_directory(tmp_path / "other", {}, {name: b""}, "")
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize(
    ("day", "key", "inside"),
    [
        ("2026-11-30", "req-1", True),
        ("2026-11-30", "req-1+2", True),
        ("2026-11-30", "a.b_c-d", True),
        ("2026-11-30", "..", False),
        ("2026-11-30", ".", False),
        ("2026-11-30", "../x", False),
        ("2026-11-30", "a b", False),
        ("2026-11-30", "req+x", False),
        ("2026-11-30", "x" * 129, False),
        ("20261130", "req-1", False),
        ("../2026-11-30", "req-1", False),
        ("2026-11-30\n", "req-1", False),
    ],
)
def test_a_pair_directory_is_named_by_the_layout_only(day: str, key: str, inside: bool) -> None:
    directory = recordings.pair_directory(Path("/r"), day, key)
    assert (directory == Path("/r") / day / key) if inside else directory is None


@pytest.mark.parametrize(
    ("name", "leg_file"),
    [
        ("downstream.sse", True),
        ("upstream.attempt-2.ndjson", True),
        ("upstream.request", True),
        ("downstream.eventstream.partial", True),
        ("pair.json", False),
        ("downstream.sse/../../x", False),
        ("sidestream.sse", False),
        ("upstream.attempt-x.sse", False),
        ("downstream.txt", False),
    ],
)
def test_only_body_and_request_files_are_leg_files(name: str, leg_file: bool) -> None:
    assert recordings.is_leg_file(name) is leg_file


def test_a_capture_is_found_by_key_in_the_newest_day_that_holds_its_pair_json(
        tmp_path: Path) -> None:
    for day in ("2026-11-29", "2026-11-30", "2026-12-01"):
        (tmp_path / day / "req-1").mkdir(parents=True)
    for day in ("2026-11-29", "2026-11-30"):
        (tmp_path / day / "req-1" / recordings.PAIR_JSON).write_text("{}")
    (tmp_path / "not-a-day" / "req-1").mkdir(parents=True)
    (tmp_path / "not-a-day" / "req-1" / recordings.PAIR_JSON).write_text("{}")
    assert recordings.find_capture(tmp_path, "req-1") == tmp_path / "2026-11-30" / "req-1"
    assert recordings.find_capture(tmp_path, "req-2") is None
    assert recordings.find_capture(tmp_path, "..") is None
    assert recordings.find_capture(tmp_path / "missing", "req-1") is None
    assert recordings.capture_files(tmp_path / "2026-11-30" / "req-1") == []


def test_a_body_type_is_read_without_its_parameters_case_or_spaces() -> None:
    assert recordings.body_extension(" application/jsonl ; charset=utf-8") == "ndjson"
    assert recordings.body_extension("TEXT/EVENT-STREAM") == "sse"
    assert recordings.body_extension("text/event-stream; charset=utf-8; x=1") == "sse"


def test_only_an_upstream_retry_has_an_attempt_stem() -> None:
    assert recordings.stem("upstream") == "upstream"
    assert recordings.stem("upstream", 2) == "upstream.attempt-2"
    assert recordings.stem("downstream", 2) == "downstream"
    for name in ("upstream", "upstream.txt", "sideways.sse"):
        assert recordings.side_of_body(name) is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "pair.json: .*No such file"),
        (b"{not json", "pair.json: "),
        (b"[1, 2]", "pair.json: not a JSON object"),
        (b'{"format": "1"}', "pair.json: format '1' is newer than 1"),
    ],
)
def test_an_unusable_pair_json_is_refused_with_its_path_and_why(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    if content is not None:
        (tmp_path / recordings.PAIR_JSON).write_bytes(content)
    with pytest.raises(recordings.PairUnreadable, match=message) as raised:
        recordings.read_pair(tmp_path)
    assert str(raised.value).startswith(str(tmp_path / recordings.PAIR_JSON))
    assert recordings.pair_legs(tmp_path) == {}


def test_the_compared_legs_are_the_last_attempt_unless_an_upstream_leg_is_named(
    tmp_path: Path,
) -> None:
    def legs_of(legs: object) -> dict:
        (tmp_path / recordings.PAIR_JSON).write_bytes(orjson.dumps({"legs": legs}))
        return recordings.pair_legs(tmp_path)

    first, second, last, named = {"file": "a"}, {"file": "b"}, {"file": "c"}, {"file": "d"}
    assert legs_of({"upstream_attempts": [first, second, last]}) == {"upstream": last}
    assert legs_of({"upstream_attempts": [first, last], "upstream": named}) == {"upstream": named}
    assert legs_of({"upstream_attempts": [first, "junk"], "downstream": first}) == {
        "downstream": first}
    assert legs_of({"upstream_attempts": [], "downstream": "junk"}) == {}
    assert legs_of(["junk"]) == {}


def test_a_capture_prefers_the_legs_encoding_and_reads_headers_in_any_case() -> None:
    leg = {"path": 7, "status": "200", "content_encoding": "br", "ended": "complete",
           "response_headers": {"Content-Encoding": "gzip", "CONTENT-TYPE": "text/event-stream",
                                "content-type": 1}}
    assert recordings.capture_of(b"x", leg) == Capture(
        b"x", content_encoding="br", content_type="text/event-stream"
    )
    headers_only = {"content_encoding": "", "response_headers": {"content-encoding": "gzip"}}
    assert recordings.capture_of(b"x", headers_only).content_encoding == "gzip"
    assert recordings.capture_of(b"x", {"response_headers": "junk"}) == Capture(b"x")


def test_a_legs_request_is_read_only_from_a_plain_name_inside_its_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "upstream.request").write_bytes(b"{}")
    (tmp_path / "elsewhere").mkdir()
    assert recordings.request_body(tmp_path, {"request_file": "upstream.request"}) == b"{}"
    for name in ("downstream.request", "elsewhere", "../upstream.request", "", 7):
        assert recordings.request_body(tmp_path, {"request_file": name}) is None
    assert recordings.request_body(tmp_path, None) is None
    assert recordings.response_body(tmp_path, {"file": "elsewhere"}) is None


def test_a_pair_directory_that_fails_half_written_is_removed_whole(tmp_path: Path) -> None:
    target = tmp_path / "case"
    files = {"upstream.sse": b"x", "u" * 300: b"y"}
    with pytest.raises(OSError, match="too long"):
        recordings.write_pair_directory(target, {"request_id": "r"}, files, "run")
    assert not target.exists()


def test_a_capture_s_pair_json_time_is_none_until_it_is_written(tmp_path: Path) -> None:
    assert recordings.pair_mtime_ns(tmp_path) is None
    pair_json = tmp_path / recordings.PAIR_JSON
    pair_json.write_bytes(b"{}")
    assert recordings.pair_mtime_ns(tmp_path) == pair_json.stat().st_mtime_ns
