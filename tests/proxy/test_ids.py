import calendar
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from calltap import recordings
from calltap.proxy.ids import (
    REQUEST_ID_PATTERN,
    accept_client_id,
    new_request_id,
    new_traceparent,
    parse_traceparent,
    reserve_capture_dir,
)

NOV_30_041150 = calendar.timegm((2026, 11, 30, 4, 11, 50))

HOSTILE_IDS = [
    "../../etc/passwd",
    "a/b",
    "x" * 10_240,
    "x" * 129,
    "abc\x00def",
    ".",
    "..",
    "",
    "ünïcode",
    "with space",
    "a+b",
    "abc\n",
    "\nabc",
    "a\\b",
]


@pytest.mark.parametrize("value", HOSTILE_IDS)
def test_hostile_client_ids_are_rejected(value):
    assert accept_client_id(value) is None


@pytest.mark.parametrize("value", ["abc", "A.b_c-1", "x" * 128, "...", ".hidden", "2026-11-30"])
def test_safe_client_ids_are_kept(value):
    assert accept_client_id(value) == value


def test_missing_client_id_is_none():
    assert accept_client_id(None) is None


@pytest.mark.parametrize("value", HOSTILE_IDS)
def test_reserve_refuses_hostile_ids(tmp_path, value):
    with pytest.raises(ValueError):
        reserve_capture_dir(tmp_path / "day", value)
    assert list(tmp_path.iterdir()) == []


def test_new_request_id_carries_utc_time_to_the_millisecond():
    request_id = new_request_id(NOV_30_041150 + 0.123)
    assert request_id.startswith("20261130T041150123Z-")
    assert REQUEST_ID_PATTERN.fullmatch(request_id)
    assert accept_client_id(request_id) == request_id
    assert "+" not in request_id


def test_new_request_ids_sort_in_creation_order_within_one_millisecond():
    ids = [new_request_id(NOV_30_041150) for _ in range(2000)]
    assert sorted(ids) == ids
    assert len(set(ids)) == len(ids)


def test_new_request_ids_sort_in_creation_order_across_times():
    times = [NOV_30_041150 + step * 0.0004 for step in range(5000)]
    ids = [new_request_id(now) for now in times]
    assert sorted(ids) == ids


def test_new_request_id_defaults_to_the_current_time():
    assert REQUEST_ID_PATTERN.fullmatch(new_request_id())


def test_a_forked_process_mints_other_ids_and_trace_ids():
    """Parent and child share the sequence counter after a fork; the random part tells their
    ids apart (the random generator is reseeded in the child)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        os.write(write, f"{new_request_id(NOV_30_041150)} {new_traceparent()[1]}".encode())
        os._exit(0)
    os.close(write)
    mine = f"{new_request_id(NOV_30_041150)} {new_traceparent()[1]}"
    with os.fdopen(read, "rb") as pipe:
        theirs = pipe.read().decode()
    os.waitpid(child, 0)
    my_id, my_trace = mine.split()
    their_id, their_trace = theirs.split()
    assert my_id.rsplit("-", 1)[0] == their_id.rsplit("-", 1)[0]
    assert my_id != their_id
    assert my_trace != their_trace


def test_day_dir_is_the_utc_day():
    assert recordings.day_directory(Path("rec"), NOV_30_041150) == Path("rec/2026-11-30")
    assert recordings.day_directory(Path("rec"), NOV_30_041150 - 4 * 3600 - 11 * 60 - 51) == Path(
        "rec/2026-11-29"
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_reserve_creates_the_tree_private(tmp_path):
    day = tmp_path / "recordings" / "2026-11-30"
    key, path = reserve_capture_dir(day, "req-1")
    assert (key, path) == ("req-1", day / "req-1")
    assert path.is_dir()
    assert list(path.iterdir()) == []
    for directory in (tmp_path / "recordings", day, path):
        assert _mode(directory) == 0o700


def test_reserve_leaves_an_existing_day_dir_mode_alone(tmp_path):
    day = tmp_path / "day"
    day.mkdir(mode=0o750)
    os.chmod(day, 0o750)
    reserve_capture_dir(day, "req")
    assert _mode(day) == 0o750


def test_reserve_on_an_existing_id_suffixes_it(tmp_path):
    keys = [reserve_capture_dir(tmp_path, "same")[0] for _ in range(4)]
    assert keys == ["same", "same+2", "same+3", "same+4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(keys)


def test_reserve_skips_over_a_long_run_of_taken_keys(tmp_path):
    (tmp_path / "busy").mkdir()
    for number in range(2, 301):
        (tmp_path / f"busy+{number}").mkdir()
    assert reserve_capture_dir(tmp_path, "busy")[0] == "busy+301"


def test_reserve_never_reuses_a_gap_owner(tmp_path):
    (tmp_path / "gap").mkdir()
    (tmp_path / "gap+3").mkdir()
    first = reserve_capture_dir(tmp_path, "gap")[0]
    second = reserve_capture_dir(tmp_path, "gap")[0]
    assert {first, second}.isdisjoint({"gap", "gap+3"})
    assert first != second


def test_reserve_does_not_follow_a_planted_symlink(tmp_path):
    day = tmp_path / "day"
    outside = tmp_path / "outside"
    day.mkdir()
    outside.mkdir()
    (day / "victim").symlink_to(outside)
    key, path = reserve_capture_dir(day, "victim")
    assert key == "victim+2"
    assert path.parent == day
    assert list(outside.iterdir()) == []


def test_threads_racing_on_one_id_get_distinct_dirs(tmp_path):
    results: list[tuple[str, Path]] = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def claim() -> None:
        start.wait()
        for _ in range(10):
            result = reserve_capture_dir(tmp_path, "race")
            with lock:
                results.append(result)

    threads = [threading.Thread(target=claim) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    keys = [key for key, _ in results]
    assert len(set(keys)) == 160
    assert set(keys) == {"race"} | {f"race+{n}" for n in range(2, 161)}


CLAIM_SCRIPT = """
import sys
from pathlib import Path
from calltap.proxy.ids import reserve_capture_dir
for _ in range(25):
    print(reserve_capture_dir(Path(sys.argv[1]), "shared")[0], flush=True)
"""


def test_processes_racing_on_one_id_get_distinct_dirs(tmp_path):
    day = tmp_path / "day"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIM_SCRIPT, str(day)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    keys = []
    for process in processes:
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0
        keys.extend(out.split())
    assert len(keys) == 75
    assert len(set(keys)) == 75
    assert sorted(p.name for p in day.iterdir()) == sorted(keys)


VALID_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    "value",
    [
        VALID_TRACEPARENT,
        " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00\t",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-future-fields",
    ],
)
def test_valid_traceparent_gives_its_trace_id(value):
    assert parse_traceparent(value) == "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "garbage",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01extra",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
    ],
)
def test_invalid_traceparent_gives_none(value):
    assert parse_traceparent(value) is None


def test_new_traceparent_round_trips_and_is_sampled():
    header, trace_id = new_traceparent()
    assert parse_traceparent(header) == trace_id
    assert header.startswith(f"00-{trace_id}-")
    assert header.endswith("-01")
    assert new_traceparent()[1] != trace_id
