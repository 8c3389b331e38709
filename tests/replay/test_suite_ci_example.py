"""examples/ci/gateway-regression.yml runs calltap as it is: the workflow parses, its suite step
is a `calltap replay --suite` command whose every flag calltap's own parser accepts, and the
report it writes is the one the workflow uploads."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from calltap.cli import build_parser

WORKFLOW = Path(__file__).parents[2] / "examples" / "ci" / "gateway-regression.yml"


@pytest.fixture(scope="module")
def steps() -> list[dict[str, object]]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    (job,) = workflow["jobs"].values()
    return job["steps"]


def test_the_suite_step_is_a_command_calltap_accepts(steps):
    (command,) = [step["run"] for step in steps
                  if "calltap replay" in str(step.get("run", ""))]
    argv = shlex.split(command)
    assert argv[:2] == ["calltap", "replay"]
    args = build_parser("replay").parse_args(argv[1:])
    assert (args.suite, args.gateway, args.github) == (Path("cases"), "http://127.0.0.1:4000",
                                                       True)
    assert args.back is None  # the default, 127.0.0.1:8701: where ci/gateway.yaml points
    (upload,) = [step for step in steps if str(step.get("uses", "")).startswith(
        "actions/upload-artifact@")]
    assert upload["if"] == "always()" and upload["with"]["path"] == str(args.junit)


def test_the_gateway_starts_before_the_suite_runs(steps):
    names = [step.get("name", step.get("uses")) for step in steps]
    assert names.index("Start the gateway") < names.index("Replay every recorded divergence")
