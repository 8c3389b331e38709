"""The reliability suite's tally: what its tests held, survived and tried, printed as one summary.

A test takes the `tally` fixture and records what it proved: `tally.streams(n)`,
`tally.fault("provider reset mid-stream")`, `tally.hostile("request id ../../x")`,
`tally.bytes_lost(n)`, `tally.secrets_found(n)`, `tally.figure("peak RSS", "212 MiB")`. Only a
test that passed adds its records to the summary, so a failing test can never be counted as a
fault survived. `make reliability` runs this directory alone; `make test` runs it with the rest, and
the summary closes either run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest


@dataclass
class Tally:
    """What one test, or the whole run, proved."""

    streams_held: int = 0
    faults: set[str] = field(default_factory=set)
    hostile_inputs: set[str] = field(default_factory=set)
    lost_bytes: int = 0
    found_secrets: int = 0
    figures: dict[str, str] = field(default_factory=dict)

    def streams(self, count: int) -> None:
        self.streams_held += count

    def fault(self, name: str) -> None:
        self.faults.add(name)

    def hostile(self, name: str) -> None:
        self.hostile_inputs.add(name)

    def bytes_lost(self, count: int) -> None:
        self.lost_bytes += count

    def secrets_found(self, count: int) -> None:
        self.found_secrets += count

    def figure(self, name: str, value: str) -> None:
        self.figures[name] = value

    def merge(self, other: Tally) -> None:
        self.streams_held += other.streams_held
        self.faults |= other.faults
        self.hostile_inputs |= other.hostile_inputs
        self.lost_bytes += other.lost_bytes
        self.found_secrets += other.found_secrets
        self.figures.update(other.figures)


RUN = Tally()
PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    if report.when == "call":
        item.stash[PASSED] = report.passed
    return report


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    mine = Tally()
    yield mine
    if request.node.stash.get(PASSED, False):
        RUN.merge(mine)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if Tally() == RUN:
        return
    write = terminalreporter.write_line
    terminalreporter.section("reliability")
    write(f"streams held (byte-identical, recorded, compared): {RUN.streams_held}")
    write(f"fault kinds survived: {len(RUN.faults)}")
    for name in sorted(RUN.faults):
        write(f"  - {name}")
    write(f"hostile inputs tried: {len(RUN.hostile_inputs)}")
    for name in sorted(RUN.hostile_inputs):
        write(f"  - {name}")
    write(f"bytes lost: {RUN.lost_bytes}")
    write(f"secrets found: {RUN.found_secrets}")
    for name, value in RUN.figures.items():
        write(f"{name}: {value}")
