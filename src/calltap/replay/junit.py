"""A regression suite's results as JUnit XML, the report every CI system reads.

One `<testsuite>` named after the suite, one `<testcase>` per case (its directory's name under
the suite), with a `<failure>` when the case diverged again (the message holds the recorded and
replayed verdicts and codes, the type its worst code, the text every replayed finding) or an
`<error>` when the run could not judge it. Each testcase carries properties: the case's
directory, the replayed pair's (when it was kept with `--recordings`), the recorded and replayed
verdicts and codes. Pure: results in, bytes out.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from calltap.replay.suite import CaseResult, counts

NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold, even escaped: a captured tool name may carry any of them."""
SUITE_CLASS = "calltap.replay"
"""The testcases' classname prefix: `calltap.replay.<suite directory name>`."""


def junit_xml(cases: Sequence[CaseResult], suite: str, *, seconds: float = 0.0) -> bytes:
    """The JUnit XML document for `cases`, run as the suite named `suite`."""
    tally = counts(cases)
    attributes = {"name": _xml(suite), "tests": str(len(cases)), "failures": str(tally["failed"]),
                  "errors": str(tally["error"]), "skipped": "0", "time": _seconds(seconds)}
    root = ET.Element("testsuites", attributes)
    testsuite = ET.SubElement(root, "testsuite", attributes)
    for case in cases:
        _testcase(testsuite, case, f"{SUITE_CLASS}.{suite}")
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _testcase(parent: ET.Element, case: CaseResult, classname: str) -> None:
    element = ET.SubElement(parent, "testcase", {"name": _xml(case.name),
                                                 "classname": _xml(classname),
                                                 "time": _seconds(_replayed_seconds(case))})
    properties = ET.SubElement(element, "properties")
    for name, value in _properties(case):
        ET.SubElement(properties, "property", {"name": name, "value": _xml(value)})
    outcome = case.outcome
    if outcome == "passed":
        return
    tag = "failure" if outcome == "failed" else "error"
    findings = case.findings
    kind = str(findings[0].get("code")) if outcome == "failed" and findings else outcome
    detail = ET.SubElement(element, tag, {"message": _xml(case.message()), "type": _xml(kind)})
    detail.text = _xml("\n".join([*map(_finding_line, findings), *case.notes()])) or None


def _properties(case: CaseResult) -> list[tuple[str, str]]:
    recorded, replayed = case.recorded, case.replayed
    found = [("calltap.case", str(case.directory))]
    if case.replayed_directory is not None:
        found.append(("calltap.replayed_pair", str(case.replayed_directory)))
    found += [("calltap.recorded.verdict", recorded[0]),
              ("calltap.recorded.codes", ",".join(recorded[1])),
              ("calltap.replayed.verdict", replayed[0]),
              ("calltap.replayed.codes", ",".join(replayed[1]))]
    return found


def _finding_line(finding: dict[str, Any]) -> str:
    where = ", ".join(str(finding[key]) for key in ("severity", "side") if finding.get(key))
    detail = finding.get("detail")
    return f"{finding.get('code')} ({where})" + (f": {detail}" if detail else "")


def _replayed_seconds(case: CaseResult) -> float:
    """How long the replayed client request took, from its downstream leg's timestamps."""
    pair = case.result.pair if case.result is not None else None
    legs = pair.get("legs") if isinstance(pair, dict) else None
    leg = legs.get("downstream") if isinstance(legs, dict) else None
    if not isinstance(leg, dict):
        return 0.0
    try:
        started = datetime.fromisoformat(str(leg.get("started_at")))
        finished = datetime.fromisoformat(str(leg.get("finished_at")))
    except ValueError:
        return 0.0
    return max(0.0, (finished - started).total_seconds())


def _xml(text: str) -> str:
    return NOT_XML.sub("\ufffd", text)


def _seconds(value: float) -> str:
    return f"{value:.3f}"
