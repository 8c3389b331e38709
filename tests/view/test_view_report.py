"""`calltap report`: a private directory, escaped HTML without scripts, the exit codes."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from view_helpers import HOSTILE_ARGUMENTS, HOSTILE_NAME, HOSTILE_TEXT, two_calls, write_pair

from calltap.cli import main


@pytest.fixture
def no_umask() -> Iterator[None]:
    """umask 0: the report's modes must come from calltap, not from the user's umask."""
    previous = os.umask(0)
    yield
    os.umask(previous)


@pytest.fixture
def hostile_tree(tmp_path: Path) -> Path:
    root = tmp_path / "recordings"
    names = ((HOSTILE_NAME, HOSTILE_ARGUMENTS), ("clock", "{}"))
    write_pair(root, "evil", two_calls(text=HOSTILE_TEXT, names=names),
               two_calls(text=HOSTILE_TEXT, names=names, keep=1),
               headers={"x-note": "<script>alert(1)</script>"})
    write_pair(root, "fine", two_calls(), two_calls())
    return root


def test_the_report_is_private_under_umask_zero(hostile_tree: Path, tmp_path: Path,
                                                no_umask: None) -> None:
    out = tmp_path / "report"
    assert main(["report", str(hostile_tree), "-o", str(out)]) == 1
    assert out.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "results.json"]
    assert {(out / name).stat().st_mode & 0o777 for name in ("report.html", "results.json")} == {
        0o600}


def test_an_existing_output_is_refused_and_left_alone(hostile_tree: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    assert main(["report", str(hostile_tree), "-o", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_captured_markup_is_escaped_and_the_report_has_no_script(hostile_tree: Path,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "report"
    main(["report", str(hostile_tree), "-o", str(out)])
    html = (out / "report.html").read_text()
    assert "<script" not in html.lower()
    assert "<img" not in html.lower()
    assert 'href="javascript' not in html
    assert "&lt;script&gt;window.__pwned=4&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<link" not in html and "@import" not in html


def test_results_hold_each_comparison(hostile_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    main(["report", str(hostile_tree), "-o", str(out)])
    results = json.loads((out / "results.json").read_text())
    assert results["verdicts"] == {"diverged": 1, "equal": 1}
    assert [(p["capture"], p["verdict"], p["codes"]) for p in results["pairs"]] == [
        ("2026-11-30/evil", "diverged", ["TOOL_CALLS_DROPPED", "TOOL_CALL_SET_CHANGED"]),
        ("2026-11-30/fine", "equal", []),
    ]
    assert results["pairs"][0]["report"]["downstream"]["tool_calls"] == 1


def test_redact_keeps_codes_and_positions_and_names_nothing(hostile_tree: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["report", str(hostile_tree), "-o", str(out), "--redact"]) == 1
    written = (out / "report.html").read_text() + (out / "results.json").read_text()
    for secret in ("evil", "clock", "pwned", "Taipei", "call_0", "x-note", str(hostile_tree)):
        assert secret not in written
    assert "TOOL_CALLS_DROPPED" in written and "pair-1" in written


def test_exit_codes_follow_the_worst_verdict(tmp_path: Path) -> None:
    equal = tmp_path / "equal"
    write_pair(equal, "same", two_calls(), two_calls())
    assert main(["report", str(equal), "-o", str(tmp_path / "r0")]) == 0
    cut = tmp_path / "cut"
    write_pair(cut, "cut", two_calls(), two_calls()[:-3])
    assert main(["report", str(cut), "-o", str(tmp_path / "r3")]) == 3


def test_two_capture_files_and_a_pair_directory_are_sources(hostile_tree: Path,
                                                            tmp_path: Path) -> None:
    pair = hostile_tree / "2026-11-30" / "fine"
    assert main(["report", str(pair / "upstream.sse"), str(pair / "downstream.sse"),
                 "-o", str(tmp_path / "files")]) == 0
    assert main(["report", str(pair), "-o", str(tmp_path / "dir")]) == 0
    results = json.loads((tmp_path / "dir" / "results.json").read_text())
    assert [p["capture"] for p in results["pairs"]] == ["fine"]


def test_a_source_without_captures_is_a_usage_error_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "-o", str(tmp_path / "out")]) == 2
    assert main(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()
    assert "no capture found" in capsys.readouterr().err


def test_every_link_in_the_report_points_inside_it(hostile_tree: Path, tmp_path: Path) -> None:
    write_pair(hostile_tree, "dropped", two_calls(), two_calls(keep=1))
    out = tmp_path / "report"
    main(["report", str(hostile_tree), "-o", str(out)])
    html = (out / "report.html").read_text()
    targets = set(re.findall(r'href="#([^"]+)"', html))
    ids = set(re.findall(r' id="([^"]+)"', html))
    assert targets and targets <= ids
    assert not re.findall(r'href="(?!#)', html)
    for number in (1, 2):
        assert any(t.startswith(f"p{number}-downstream-event-") for t in targets)
        assert any(t.startswith(f"p{number}-upstream-event-") for t in targets)
