"""Keep the index of pairs of a recordings location whole and small.

Every `calltap serve` writes Parquet segments under SOURCE/_index/day=YYYY-MM-DD/, one row per
stored pair, about one segment a minute per replica; readers (view, scan, report, replay,
query) find pairs through them. Two upkeep jobs:

  rebuild   rows for the pairs that have none: a tree or bucket written before the index, a
            segment lost, or one that cannot be read (a corrupt or truncated upload, skipped by
            every reader). Reads each such pair's pair.json and writes new segments beside the
            others; a pair a readable segment names is left alone. Safe while replicas write (a
            row written twice is read once).
  compact   merge a day's segments into one (or a few of --rows-per-segment rows), create-only,
            read back, then delete the inputs. Without --day: every closed day (before today,
            UTC) that has more than one segment. Safe while replicas write (segments written
            after the listing are not touched) and beside another compaction (each pair is
            still read once). A segment that cannot be read is left in place and reported.

SOURCE is a recordings directory or s3://BUCKET[/PREFIX] (credentials from the AWS_* variables).

exit codes: 0 done, 2 usage error, a SOURCE that cannot be read, or the store failing (one line
on stderr; what was written before stays valid: create-only segments, inputs deleted only after
their merged segment read back)

examples:
  calltap index rebuild recordings/
  calltap index rebuild s3://team-llm-recordings/staging --dry-run
  calltap index compact s3://team-llm-recordings/staging
  calltap index compact recordings/ --day today
  calltap index compact recordings/ --day 2026-11-30 --rows-per-segment 500000
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import duckdb

from calltap import recordings
from calltap.commands.check import usage_error
from calltap.index import compaction, rebuild, segments
from calltap.storage import Storage, StoreError

ACTIONS = ("rebuild", "compact")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", metavar="ACTION", choices=ACTIONS,
                        help="rebuild (rows for pairs without one) or compact (merge segments)")
    parser.add_argument("source", metavar="SOURCE",
                        help="a recordings directory or s3://BUCKET[/PREFIX]")
    parser.add_argument("--dry-run", action="store_true",
                        help="only count: what would be written (rebuild) or merged (compact)")
    parser.add_argument("--day", metavar="D",
                        help="compact: this day (YYYY-MM-DD, or `today`, safe while it is still"
                             " written) instead of every closed day")
    parser.add_argument("--rows-per-segment", metavar="N", type=int,
                        default=compaction.ROWS_PER_SEGMENT,
                        help="compact: rows of a merged segment at most (default 1000000)")


def run(args: argparse.Namespace) -> int:
    command = f"index {args.action}"
    if args.action == "rebuild" and args.day is not None:
        return usage_error(command, "--day applies to `calltap index compact` only")
    if args.rows_per_segment < 1:
        return usage_error(command, "--rows-per-segment must be at least 1")
    today = datetime.now(UTC).date().isoformat()
    day = today if args.day == "today" else args.day
    if day is not None and not _is_date(day):
        return usage_error(command, f"--day {args.day!r} is not a day (YYYY-MM-DD or today)")
    try:
        storage = segments.open_source(args.source)
        if args.action == "rebuild":
            _rebuild(storage, args.dry_run)
        else:
            _compact(storage, day, today, args.rows_per_segment, args.dry_run)
    except segments.BadSource as error:
        return usage_error(command, error)
    except (StoreError, compaction.CompactionError) as error:
        return usage_error(command, f"'{args.source}': {error}")
    except duckdb.Error as error:
        return usage_error(command, f"'{args.source}': {_first_line(error)}")
    return 0


def _rebuild(storage: Storage, dry_run: bool) -> None:
    done = rebuild.rebuild(storage, dry_run=dry_run)
    wrote = (f"would write {done.rows} rows" if dry_run
             else f"wrote {done.rows} rows in {len(done.written)} segments")
    print(f"{done.pairs} pairs seen, {done.indexed} already indexed,"
          f" {done.unreadable_pairs} without a readable pair.json; {wrote}")
    for key in done.written:
        print(f"  wrote {key}")
    _unreadable(done.unreadable)


def _compact(storage: Storage, day: str | None, today: str, rows_per_segment: int,
             dry_run: bool) -> None:
    days = [day] if day else compaction.closed_days(storage, today)
    if not days:
        print("no closed day has more than one segment: nothing to compact")
    for name in days:
        if dry_run:
            count = len(segments.listed(storage, name))
            print(f"{name}: {count} segments" + (", would merge" if count > 1 else ""))
            continue
        done = compaction.compact_day(storage, name, rows_per_segment)
        print(_day_line(done))
        _unreadable(done.unreadable)


def _day_line(done: compaction.DayCompacted) -> str:
    if done.gave_way:
        return (f"{done.day}: its segments kept vanishing (another compaction at work): left"
                " to it, nothing written or deleted")
    if not done.written:
        return f"{done.day}: {done.segments_in} readable segments, nothing to merge"
    per_row = f"{done.bytes_per_row:.1f}" if done.bytes_per_row else "-"
    return (f"{done.day}: {done.segments_in} segments in, {done.rows_in} rows in,"
            f" {done.rows_out} rows out, {len(done.written)} segments out,"
            f" {done.bytes_in} bytes before, {done.bytes_out} bytes after"
            f" ({per_row} bytes a row), {done.seconds:.2f} s")


def _unreadable(keys: list[str]) -> None:
    if keys:
        print(f"{len(keys)} segments skipped as unreadable (left in place;"
              " `calltap index rebuild` gives their pairs rows again):")
    for key in keys:
        print(f"  {key}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def _is_date(day: str) -> bool:
    if not recordings.is_day(day):
        return False
    try:
        datetime.strptime(day, "%Y-%m-%d")
    except ValueError:
        return False
    return True
