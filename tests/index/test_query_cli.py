"""`calltap query` as a user runs it: a table, JSON and CSV over `pairs`, hostile values
unharmed, and every statement that could write or reach a file refused."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.index import pairs

from calltap import recordings

DAY = "2026-11-30"
LONGEST_KEY = "r" * 127 + "z"
HOSTILE_MODELS = {
    "quotes": 'gpt-4o "quoted" \'single\'',
    "newline": "gpt-4o\nsecond line\r\n\ttab",
    "injection": "'; DROP TABLE pairs; --",
    "markup": "[bold]x[/] [link=https://example.org]y[/link]",
    "escape": "\x1b[31mred\x1b[0m",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pairs with hostile models and a request id at the key length limit, indexed."""
    root = tmp_path_factory.mktemp("tree")
    for name, model in HOSTILE_MODELS.items():
        pairs.write(root, DAY, f"hostile-{name}", model=model, verdict="diverged",
                    codes=("TOOL_CALL_DROPPED",))
    pairs.write(root, DAY, LONGEST_KEY, request_id=LONGEST_KEY, model="gpt-4o-mini")
    pairs.write(root, "2026-11-29", "plain-1", verdict="diverged", codes=("DONE_MISSING",))
    assert recordings.is_key(LONGEST_KEY)
    pairs.calltap("index", "rebuild", str(root))
    return root


def query(root: Path, sql: str, *flags: str) -> str:
    return pairs.calltap("query", str(root), sql, *flags).stdout


def test_json_gives_back_hostile_values_exactly(tree: Path) -> None:
    out = json.loads(query(tree, "SELECT stored_as, request_id, model, codes, started_at"
                                 " FROM pairs ORDER BY stored_as", "--json"))
    by_key = {row["stored_as"]: row for row in out}
    for name, model in HOSTILE_MODELS.items():
        assert by_key[f"hostile-{name}"]["model"] == model
        assert by_key[f"hostile-{name}"]["codes"] == ["TOOL_CALL_DROPPED"]
    assert by_key[LONGEST_KEY]["request_id"] == LONGEST_KEY and len(LONGEST_KEY) == 128
    assert by_key["plain-1"]["started_at"].startswith("2026-11-29T")
    assert by_key["plain-1"]["started_at"].endswith("Z")


def test_a_hostile_value_is_data_in_a_where_clause(tree: Path) -> None:
    sql = ("SELECT count(*) AS n FROM pairs WHERE model = "
           + "'" + HOSTILE_MODELS["injection"].replace("'", "''") + "'")
    assert json.loads(query(tree, sql, "--json")) == [{"n": 1}]
    assert json.loads(query(tree, "SELECT count(*) AS n FROM pairs", "--json")) == [{"n": 7}]


def test_csv_has_a_header_and_every_value_round_trips(tree: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "calltap", "query", str(tree),
                           "SELECT stored_as, model, codes FROM pairs ORDER BY stored_as",
                           "--csv"], capture_output=True, cwd=pairs.ROOT, check=True)
    table = list(csv.reader(io.StringIO(done.stdout.decode(), newline="")))
    assert table[0] == ["stored_as", "model", "codes"]
    body = {row[0]: row[1:] for row in table[1:]}
    for name, model in HOSTILE_MODELS.items():
        assert body[f"hostile-{name}"] == [model, '["TOOL_CALL_DROPPED"]']
    assert body["plain-1"][1] == '["DONE_MISSING"]'


def test_the_table_shows_markup_and_control_characters_as_text(tree: Path) -> None:
    out = query(tree, "SELECT stored_as, model FROM pairs WHERE stored_as LIKE 'hostile-%'"
                      " ORDER BY stored_as")
    assert "[bold]x[/]" in out
    assert "gpt-4o\\nsecond line\\r\\n\\ttab" in out
    assert "\\x1b[31mred\\x1b[0m" in out and "\x1b" not in out
    assert "5 rows" in out


def test_the_three_questions_answer(tree: Path) -> None:
    per_code = json.loads(query(tree, "SELECT day, code, count(*) AS pairs FROM pairs,"
                                      " unnest(codes) AS t(code) GROUP BY ALL"
                                      " ORDER BY day DESC, pairs DESC", "--json"))
    assert per_code == [{"day": DAY, "code": "TOOL_CALL_DROPPED", "pairs": 5},
                        {"day": "2026-11-29", "code": "DONE_MISSING", "pairs": 1}]
    newest = json.loads(query(tree, "SELECT stored_as FROM pairs WHERE verdict = 'diverged'"
                                    " AND route = '/v1/chat/completions'"
                                    " ORDER BY started_at DESC LIMIT 3", "--json"))
    assert len(newest) == 3
    of_id = json.loads(query(tree, f"SELECT stored_as FROM pairs WHERE request_id ="
                                   f" '{LONGEST_KEY}'", "--json"))
    assert of_id == [{"stored_as": LONGEST_KEY}]


@pytest.mark.parametrize(("sql", "why"), [
    ("INSERT INTO pairs (stored_as) VALUES ('x')", "read-only: only SELECT"),
    ("UPDATE pairs SET model = 'x'", "read-only: only SELECT"),
    ("DELETE FROM pairs", "read-only: only SELECT"),
    ("CREATE TABLE t AS SELECT * FROM pairs", "read-only: only SELECT"),
    ("COPY (SELECT * FROM pairs) TO '{out}'", "read-only: only SELECT"),
    ("ATTACH '{out}' AS other", "read-only: only SELECT"),
    ("INSTALL httpfs", "read-only: only SELECT"),
    ("LOAD httpfs", "read-only: only SELECT"),
    ("SET enable_external_access = true", "read-only: only SELECT"),
    ("PRAGMA database_list", "read-only: only SELECT"),
    ("EXPORT DATABASE '{out}'", "read-only: only SELECT"),
    ("CALL pragma_version()", "read-only: only SELECT"),
    ("SELECT 1; SELECT 2", "one statement only"),
    ("SELECT * FROM pairs; COPY (SELECT 1) TO '{out}'", "one statement only"),
    ("EXPLAIN COPY (SELECT 1) TO '{out}'", "read-only: only SELECT"),
    ("SELECT * FROM read_text('/etc/passwd')", "disabled by configuration"),
    ("SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"),
    ("SELECT * FROM read_parquet('{segments}')", "disabled by configuration"),
    ("SELECT * FROM 'https://example.org/x.parquet'", "disabled by configuration"),
    ("SELEKT 1", "syntax error"),
])
def test_a_statement_that_writes_or_reaches_outside_is_refused(tree: Path, tmp_path: Path,
                                                                sql: str, why: str) -> None:
    out = tmp_path / "out"
    statement = sql.format(out=out, segments=tree / "_index" / "*" / "*.parquet")
    done = pairs.calltap("query", str(tree), statement, "--json", check=False)
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("calltap query: ")
    assert why in done.stderr, done.stderr
    assert not out.exists()


def test_explain_of_a_select_and_a_bad_source(tree: Path, tmp_path: Path) -> None:
    assert "physical_plan" in query(tree, "EXPLAIN SELECT * FROM pairs", "--csv")
    missing = pairs.calltap("query", str(tmp_path / "nope"), "SELECT 1", check=False)
    assert missing.returncode == 2 and "no such directory" in missing.stderr
    both = pairs.calltap("query", str(tree), "SELECT 1", "--json", "--csv", check=False)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
