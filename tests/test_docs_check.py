"""tools/docs_check.py: each kind of rot it must catch, on small trees, and the project's own docs.

The small trees are real files in a temporary project root (README.md, docs/, a Makefile); the
CLI it checks commands against is calltap's own argparse parser. The last tests run the check on
this repository's README.md and docs/*.md, and check that the configuration reference names every
setting and every option the CLI has.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from calltap import cli, codes, config

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "docs_check.py"
MAKEFILE = """\
STAMP := .venv/.installed
.PHONY: demo test
$(STAMP): pyproject.toml
\ttouch $(STAMP)
.venv-gw-%/.installed: requirements.txt
\ttouch $@
demo: $(STAMP)
\tcalltap demo
test: lint
\tpytest
"""
GOOD_GUIDE = """\
# A guide

## Looking at recordings: the view, the report, the API

## `calltap serve`'s flags

## Notes

## Notes

Back to [the top](#a-guide), [the second notes](#notes-1) and [home](../README.md#calltap).

```sh
calltap serve --gateway http://127.0.0.1:4000 --provider https://api.openai.com \\
    | jq -c 'select(.event=="divergence")'
calltap compare UPSTREAM DOWNSTREAM [--json] [--redact]
                [--upstream-dialect D] [--downstream-dialect D]
calltap replay PAIR_DIR (--gateway URL | --demo-gateway) [--pace recorded|none]
.venv/bin/calltap report recordings -o out   # a path to the script is calltap too
make demo && make .venv/.installed .venv-gw-1.82.0/.installed MUTANTS='x.*'
```

```console
$ calltap view demo-recordings --listen 127.0.0.1:8703
Beside a real gateway: calltap serve --not-checked-in-output
```

```text
calltap frobnicate --in-a-text-block-nothing-is-checked
```
"""


def load_docs_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


docs_check = load_docs_check()


def project(tmp_path: Path, guide: str = GOOD_GUIDE, readme: str = "# calltap\n") -> Path:
    """A project root with a README, one guide and the Makefile above."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "docs" / "guide.md").write_text(guide)
    (tmp_path / "Makefile").write_text(MAKEFILE)
    return tmp_path


def messages(root: Path) -> list[str]:
    return [str(problem) for problem in docs_check.check(root)]


def test_a_tree_whose_links_and_commands_all_hold_passes(tmp_path: Path) -> None:
    assert messages(project(tmp_path)) == []


def test_a_link_to_a_missing_file_fails_with_its_file_and_line(tmp_path: Path) -> None:
    readme = "# calltap\n\nSee [running](docs/running.md) and [the guide](docs/guide.md).\n"
    assert messages(project(tmp_path, readme=readme)) == [
        "README.md:3: broken link 'docs/running.md': no file 'docs/running.md'"]


def test_a_link_to_a_heading_that_is_not_there_fails(tmp_path: Path) -> None:
    readme = ("# calltap\n\n[a](docs/guide.md#looking-at-recordings-the-view-the-report-the-api)"
              " [b](docs/guide.md#reproduce-a-divergence) [c](#calltap) [d](#nowhere)\n")
    assert messages(project(tmp_path, readme=readme)) == [
        "README.md:3: broken link 'docs/guide.md#reproduce-a-divergence':"
        " no heading with anchor #reproduce-a-divergence",
        "README.md:3: broken link '#nowhere': no heading with anchor #nowhere"]


def test_links_inside_code_and_to_other_sites_are_not_followed(tmp_path: Path) -> None:
    readme = ("# calltap\n\n`[not a link](missing.md)` [site](https://example.org/x.md#y)\n\n"
              "```md\n[in a block](missing.md)\n```\n")
    assert messages(project(tmp_path, readme=readme)) == []


def test_an_unknown_subcommand_fails(tmp_path: Path) -> None:
    guide = "# A guide\n\n```sh\ncalltap inspect recordings/2026-11-30\n```\n"
    assert messages(project(tmp_path, guide)) == [
        "docs/guide.md:4: calltap has no subcommand 'inspect':"
        " calltap inspect recordings/2026-11-30"]


def test_an_unknown_flag_fails_even_when_another_subcommand_has_it(tmp_path: Path) -> None:
    guide = ("# A guide\n\n```bash\ncalltap serve --gateway http://127.0.0.1:4000 --listen x\n"
             "calltap replay PAIR_DIR --gateway URL \\\n    --pace none --speed 2\n```\n")
    assert messages(project(tmp_path, guide)) == [
        "docs/guide.md:4: calltap serve has no option --listen:"
        " calltap serve --gateway http://127.0.0.1:4000 --listen x",
        "docs/guide.md:5: calltap replay has no option --speed:"
        " calltap replay PAIR_DIR --gateway URL --pace none --speed 2"]


def test_a_flag_on_a_wrapped_usage_line_and_in_a_console_prompt_is_checked(tmp_path: Path) -> None:
    guide = ("# A guide\n\n```sh\ncalltap check CAPTURE [--json]\n"
             "              [--dialekt D]\n```\n\n"
             "```console\n$ CALLTAP_PROBE_API_KEY=sk calltap probe --demo --verbose\nPASS x\n```\n")
    problems = messages(project(tmp_path, guide))
    assert problems == [
        "docs/guide.md:4: calltap check has no option --dialekt:"
        " calltap check CAPTURE [--json] [--dialekt D]",
        "docs/guide.md:9: calltap probe has no option --verbose:"
        " CALLTAP_PROBE_API_KEY=sk calltap probe --demo --verbose"]


def test_an_unknown_make_target_fails(tmp_path: Path) -> None:
    guide = "# A guide\n\n```sh\nmake demo\nmake docs   # not a target\n```\n"
    assert messages(project(tmp_path, guide)) == [
        "docs/guide.md:5: the Makefile has no target 'docs'"]


@pytest.mark.parametrize(("heading", "anchor"), [
    ("Looking at recordings: the view, the report, the API",
     "looking-at-recordings-the-view-the-report-the-api"),
    ("`calltap serve`'s flags", "calltap-serves-flags"),
    ("What is kept: `keep`", "what-is-kept-keep"),
    ("Portkey and other gateways", "portkey-and-other-gateways"),
    ("The fix of #21331 (PR #21337)", "the-fix-of-21331-pr-21337"),
    ("A [linked](x.md) heading -- with_underscores", "a-linked-heading----with_underscores"),
])
def test_anchors_follow_githubs_heading_slugs(heading: str, anchor: str) -> None:
    assert docs_check.slug(heading) == anchor


def test_the_script_exits_1_and_prints_one_line_per_problem(tmp_path: Path) -> None:
    readme = "# calltap\n\n[gone](docs/gone.md)\n\n```sh\ncalltap serve --nope\n```\n"
    root = project(tmp_path, readme=readme)
    run = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                         text=True, cwd=root, check=False)
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        "README.md:3: broken link 'docs/gone.md': no file 'docs/gone.md'",
        "README.md:6: calltap serve has no option --nope: calltap serve --nope"]
    assert run.stderr.strip() == "docs-check: 2 files, 2 problems"


def test_this_projects_readme_and_guides_pass() -> None:
    assert messages(ROOT) == []


def test_the_configuration_reference_names_every_setting_and_option() -> None:
    """Every TOML key and its CALLTAP_ variable, and every option of every subcommand."""
    reference = (ROOT / "docs" / "configuration.md").read_text()
    missing = [f"`{name}`" for name in config.FIELDS if f"`{name}`" not in reference]
    missing += [variable for variable in (f"CALLTAP_{name.upper()}" for name in config.FIELDS)
                if variable not in reference]
    for name in cli.COMMANDS:
        parser = cli.build_parser(name)
        sub = next(action for action in parser._actions
                   if isinstance(action, argparse._SubParsersAction)).choices[name]
        missing += [f"calltap {name} {option}" for action in sub._actions
                    for option in action.option_strings
                    if option not in ("-h", "--help") and f"`{option}" not in reference]
    assert missing == []


def test_the_findings_guide_has_a_row_for_every_code_with_its_severity() -> None:
    """A code added to codes.py without a row in docs/findings.md's table fails here."""
    guide = (ROOT / "docs" / "findings.md").read_text()
    rows = {}
    for line in guide.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 3:
            for name in cells[0].split(" / "):
                rows[name] = cells[1]
    expected = {code.value: codes.SEVERITY[code].value for code in codes.Code}
    assert {name: rows.get(name) for name in expected} == expected
