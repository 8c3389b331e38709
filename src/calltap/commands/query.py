"""Ask the index of pairs a question in SQL: DuckDB, embedded, over the view `pairs`.

The index of SOURCE (a recordings directory or s3://BUCKET[/PREFIX]) is loaded, one row per
stored pair (a bucket's segments are fetched once into the user's cache directory; a local tree's
pairs that have no row yet are read from their pair.json), and SQL runs over it. The columns:
request_id, stored_as, day, started_at, finished_at, route, model, dialect_upstream,
dialect_downstream, pairing, attempts, verdict, codes, severities, sides (three parallel lists,
one entry per finding), bytes_upstream, bytes_downstream, duration_ms, replica, capture_id, kept,
format. docs/index.md describes each.

Read-only: one SELECT (WITH ... SELECT, or EXPLAIN of one) is accepted; anything else is refused.
Once the index is loaded the query cannot read or write files or the network (read_csv,
read_text, COPY, ATTACH and extensions all fail).

exit codes: 0 answered, 2 usage error (a SOURCE that cannot be read, a statement refused, SQL
DuckDB rejects)

examples:
  calltap query recordings/ "SELECT verdict, count(*) FROM pairs GROUP BY verdict"
  calltap query recordings/ "SELECT day, code, count(*) AS pairs FROM pairs,
      unnest(codes) AS t(code) GROUP BY ALL ORDER BY day DESC, pairs DESC"
  calltap query s3://team-llm-recordings/staging --json \\
      "SELECT stored_as, started_at, codes FROM pairs WHERE verdict = 'diverged'
       AND route = '/v1/chat/completions' ORDER BY started_at DESC LIMIT 20"
  calltap query recordings/ --csv "SELECT * FROM pairs WHERE request_id = 'req-42'" > req-42.csv
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import unicodedata
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text

from calltap.commands.check import usage_error
from calltap.index import segments
from calltap.index.catalog import Catalog
from calltap.storage import StoreError

EXPLAIN = re.compile(r"\s*EXPLAIN(?:\s+ANALYZE)?\s+(?P<rest>.*)", re.IGNORECASE | re.DOTALL)
CELL_WIDTH = 48
TABLE_WIDTH = 160
LOCK_DOWN = ("SET TimeZone = 'UTC'", "SET enable_external_access = false",
             "SET lock_configuration = true")
"""Run once the index is loaded: timestamps in UTC, no file or network access from SQL, and no
statement may change either."""


class Refused(ValueError):
    """A statement `calltap query` does not run."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE",
                        help="a recordings directory or s3://BUCKET[/PREFIX]")
    parser.add_argument("sql", metavar="SQL", help="one SELECT over the view `pairs`")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true",
                        help="print a JSON array of objects (timestamps in ISO 8601, UTC)")
    output.add_argument("--csv", action="store_true",
                        help="print CSV with a header line (lists as JSON arrays)")


def run(args: argparse.Namespace) -> int:
    try:
        read_only(args.sql)
        segments.open_source(args.source)
    except (Refused, segments.BadSource) as error:
        return usage_error("query", error)
    try:
        catalog = Catalog(args.source)
        catalog.refresh()
    except StoreError as error:
        return usage_error("query", f"'{args.source}': {error}")
    try:
        for statement in LOCK_DOWN:
            catalog.db.execute(statement)
        cursor = catalog.db.execute(args.sql)
        names = [column[0] for column in cursor.description or ()]
        rows = cursor.fetchall()
    except duckdb.Error as error:
        return usage_error("query", _first_line(error))
    finally:
        catalog.close()
    if args.json:
        sys.stdout.buffer.write(as_json(names, rows) + b"\n")
    elif args.csv:
        write_csv(names, rows)
    else:
        Console(width=min(Console().width, TABLE_WIDTH)).print(as_table(names, rows))
    sys.stdout.flush()
    return 0


def read_only(sql: str) -> None:
    """Refuse anything but one SELECT (or EXPLAIN of one)."""
    explained = EXPLAIN.fullmatch(sql)
    text = explained["rest"] if explained else sql
    try:
        statements = duckdb.extract_statements(text)
    except duckdb.Error as error:
        raise Refused(_first_line(error)) from None
    if len(statements) != 1:
        raise Refused(f"one statement only, got {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise Refused(f"read-only: only SELECT is run, not {kind.name}")


def as_json(names: Sequence[str], rows: list[tuple[Any, ...]]) -> bytes:
    return orjson.dumps([dict(zip(names, row, strict=True)) for row in rows],
                        default=_json_default,
                        option=orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS)


def write_csv(names: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(names)
    writer.writerows([_text(value) for value in row] for row in rows)


def as_table(names: Sequence[str], rows: list[tuple[Any, ...]]) -> Table:
    """A rich table whose cells are plain text: markup, control characters and escape
    sequences in a value are shown, never interpreted."""
    table = Table(show_edge=False, pad_edge=False)
    for name in names:
        table.add_column(Text(_printable(name)), max_width=CELL_WIDTH, overflow="ellipsis")
    for row in rows:
        table.add_row(*(Text(_printable(_text(value))) for value in row))
    table.caption = Text(f"{len(rows)} rows")
    return table


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list | tuple | dict):
        return orjson.dumps(value, default=_json_default,
                            option=orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS).decode()
    return str(value)


def _printable(text: str) -> str:
    """`text` with control characters (newlines, escape sequences) shown as escapes."""
    return "".join(
        character.encode("unicode_escape").decode() if unicodedata.category(character) == "Cc"
        else character for character in text)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__
