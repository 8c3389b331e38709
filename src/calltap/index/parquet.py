"""Rows to a Parquet segment and back, through an embedded DuckDB that never loads an extension.

Rows travel as JSON lines (the spool's format); a segment is zstd-compressed Parquet sorted by
`started_at`, so that timestamps and time-sortable ids sit beside their neighbours and compress
to a few bytes a row. DuckDB reads and writes local files only: segments in a bucket are fetched
by `calltap.storage` first.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from calltap.index.rows import COLUMNS

if TYPE_CHECKING:
    import duckdb

CONFIG = {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
"""No extension is ever downloaded or loaded: the process reads what it already has."""
ROW_GROUP_SIZE = 122_880
ORDER = "started_at NULLS LAST, stored_as"


def connect(*, threads: int | None = None, memory_limit: str | None = None
            ) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with extensions off (and bounded, for a writer beside the relay).
    DuckDB is imported here, on first use: a `serve` that has written no segment yet, and
    every command that reads no index, never load it."""
    import duckdb
    config: dict[str, Any] = dict(CONFIG)
    if threads:
        config["threads"] = threads
    if memory_limit:
        config["memory_limit"] = memory_limit
    connection = duckdb.connect(":memory:", config=config)
    connection.execute("SET TimeZone = 'UTC'")
    return connection


def json_columns() -> str:
    """The `columns` argument of `read_json`: every column with its type."""
    return "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in COLUMNS.items()) + "}"


def row_line(row: dict[str, Any]) -> bytes:
    """One row as the spool and `encode_lines` take it."""
    return orjson.dumps(row, option=orjson.OPT_UTC_Z) + b"\n"


class RowsRejected(ValueError):
    """Rows that cannot be a segment (a value of the wrong type: a hand-edited or corrupt
    spool), said by DuckDB."""


def encode_lines(lines: bytes, connection: duckdb.DuckDBPyConnection | None = None) -> bytes:
    """A segment holding the rows of `lines` (JSON lines); RowsRejected when DuckDB refuses
    them."""
    import duckdb

    own = connection is None
    db = connection or connect(threads=1)
    with tempfile.TemporaryDirectory(prefix="calltap-index-") as scratch:
        source, target = Path(scratch, "rows.json"), Path(scratch, "segment.parquet")
        source.write_bytes(lines)
        try:
            db.execute(
                f"COPY (SELECT * FROM read_json(?, format='newline_delimited',"
                f" columns={json_columns()}) ORDER BY {ORDER}) TO '{_sql_path(target)}'"
                f" (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP_SIZE})",
                [str(source)])
        except duckdb.Error as error:
            raise RowsRejected(str(error).strip().splitlines()[0][:300]) from None
        finally:
            if own:
                db.close()
        return target.read_bytes()


def encode_rows(rows: Iterable[dict[str, Any]]) -> bytes:
    return encode_lines(b"".join(row_line(row) for row in rows))


def decode(data: bytes) -> list[dict[str, Any]]:
    """The rows of a segment, as dicts (tests, rebuild)."""
    with tempfile.NamedTemporaryFile(suffix=".parquet") as handle:
        handle.write(data)
        handle.flush()
        return read_file(Path(handle.name))


def read_file(path: Path) -> list[dict[str, Any]]:
    db = connect(threads=1)
    try:
        cursor = db.execute("SELECT * FROM read_parquet(?, union_by_name=true)", [str(path)])
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    finally:
        db.close()


def _sql_path(path: Path) -> str:
    """A path as a SQL string literal (COPY's target cannot be a parameter)."""
    return str(path).replace("'", "''")
