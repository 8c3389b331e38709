"""The mutation score of each mutated module, from the results `mutmut run` left in `mutants/`.

mutmut prints one total; a module whose tests leave many mutants alive hides behind the others
there. This reads the per-file result files (`mutants/<path>.meta`) and prints, per module, how
many mutants there were, how many the tests killed (a timeout counts as killed: the tests did not
pass), how many survived or had no test running them, and the score, killed over all. A module none
of whose mutants ran (a run narrowed to other mutant names) is left out.

Run from the project root after `mutmut run`: `python tools/mutation_scores.py`.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

MUTANTS = Path("mutants")
META = ".meta"
KILLED = frozenset({"killed", "timeout", "caught by type check"})
COLUMNS = "{:<40} {:>6} {:>6} {:>8} {:>8} {:>6}  {}"


def statuses(meta: Path) -> Counter[str]:
    """How many mutants of one file ended in each mutmut status."""
    exit_codes = json.loads(meta.read_text())["exit_code_by_key"]
    return Counter(status_by_exit_code[code] for code in exit_codes.values())


def row(name: str, counts: Counter[str]) -> str:
    total = counts.total()
    killed = sum(counts[status] for status in KILLED)
    score = f"{100 * killed / total:5.1f}%" if total else "    -"
    untested = counts["no tests"]
    survived = counts["survived"]
    other = total - killed - untested - survived
    return COLUMNS.format(name, total, killed, survived, untested, other, score)


def main() -> int:
    metas = sorted(MUTANTS.rglob("*.py" + META))
    if not metas:
        print(f"no results in {MUTANTS}/: run `mutmut run` first", file=sys.stderr)
        return 1
    print(COLUMNS.format("module", "total", "killed", "survived", "no tests", "other", "score"))
    overall: Counter[str] = Counter()
    for meta in metas:
        counts = statuses(meta)
        if counts["not checked"] == counts.total():
            continue
        overall += counts
        print(row(str(meta.relative_to(MUTANTS))[: -len(META)], counts))
    print(row("all", overall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
