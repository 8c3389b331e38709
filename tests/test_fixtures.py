"""Every pair in tests/fixtures/cases.toml, through the library and through `calltap compare`."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from calltap.compare import compare_captures
from calltap.transcript import Capture

FIXTURES = Path(__file__).parent / "fixtures"
CASES: list[dict[str, Any]] = tomllib.loads((FIXTURES / "cases.toml").read_text())["case"]
EXIT_CODES = {"equal": 0, "diverged": 1, "inconclusive": 3}


def case_id(case: dict[str, Any]) -> str:
    return case["name"]


def expected_counts(case: dict[str, Any]) -> dict[str, int]:
    return case.get("counts", {})


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_library_gives_the_expected_verdict_and_codes(case: dict[str, Any]) -> None:
    upstream = Capture((FIXTURES / case["upstream"]).read_bytes())
    downstream = Capture((FIXTURES / case["downstream"]).read_bytes())
    comparison = compare_captures(upstream, downstream)
    assert comparison.verdict == case["verdict"]
    assert {str(f.code) for f in comparison.findings} == set(case["codes"])
    counts = {str(f.code): f.count for f in comparison.findings}
    for code, count in expected_counts(case).items():
        assert counts[code] == count


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_cli_gives_the_expected_exit_code_and_json(case: dict[str, Any]) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "calltap",
            "compare",
            case["upstream"],
            case["downstream"],
            "--json",
        ],
        cwd=FIXTURES,
        capture_output=True,
        check=False,
    )
    assert completed.returncode == EXIT_CODES[case["verdict"]], completed.stderr
    assert completed.stderr == b""
    report = json.loads(completed.stdout)
    assert report["verdict"] == case["verdict"]
    assert {f["code"] for f in report["findings"]} == set(case["codes"])
    for code, count in expected_counts(case).items():
        assert [f["count"] for f in report["findings"] if f["code"] == code] == [count]


def test_every_fixture_body_takes_part_in_a_case() -> None:
    used = Counter(case[side] for case in CASES for side in ("upstream", "downstream"))
    bodies = {
        str(path.relative_to(FIXTURES))
        for path in FIXTURES.rglob("*")
        if path.suffix in (".sse", ".json")
    }
    assert bodies - used.keys() == set()
    assert used.keys() - bodies == set()
