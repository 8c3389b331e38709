"""Compaction of one realistic day of index segments: bytes a row before and after, and time.

Writes a day of `--rows N` rows (default 150,000: a million pairs over seven days) as the
replicas would leave it: `--replicas R` writers (default 10), each sealing a segment every
`--every M` minutes (default 1, as `index_interval = 60` does), so a day is R * 1440 / M
segments of a few dozen rows. The rows look like a staging fleet's: time-sortable request ids
spread over the day, three routes, eight models, 90% equal, 8% diverged with one to three codes,
2% inconclusive, sizes and durations of real streams, pod names as replicas. Then times
`compact_day` on that local tree (fetch, merge, write, read back, delete) and prints the
segments, bytes and bytes a row before and after. Prints figures; not a test.

usage: python bench/index_compaction.py [--rows N] [--replicas R] [--every M]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from calltap.index import compaction, layout  # noqa: E402
from calltap.index.parquet import connect, encode_lines, row_line  # noqa: E402
from calltap.index.rows import FORMAT  # noqa: E402
from calltap.storage import Storage  # noqa: E402

DAY = "2026-11-30"
ROUTES = [("/v1/chat/completions", "openai.chat"), ("/v1/messages", "anthropic.messages"),
          ("/v1/responses", "openai.responses")]
MODELS = ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3-mini", "claude-sonnet-4-5",
          "claude-haiku-4-5", "gemini-2.5-pro", "gemini-2.5-flash"]
CODES = ["TOOL_CALL_DROPPED", "TOOL_CALL_ARGUMENTS_CHANGED", "TOOL_CALL_INDEX_GAP",
         "FINISH_REASON_CHANGED", "TEXT_CHANGED", "USAGE_MISSING", "DONE_MISSING",
         "TOOL_DROPPED", "TOOL_CHOICE_CHANGED", "MESSAGE_DROPPED"]
SEVERITIES = ["fatal", "negotiable", "cosmetic"]


def row(random_: random.Random, started: datetime, replica: str, sequence: int) -> dict:
    millis = int(started.timestamp() * 1000)
    request_id = (f"{started.strftime('%Y%m%dT%H%M%S')}{millis % 1000:03d}Z-{sequence:08x}"
                  f"-{random_.getrandbits(24):06x}")
    route, dialect = random_.choice(ROUTES)
    draw = random_.random()
    verdict = "equal" if draw < 0.90 else "diverged" if draw < 0.98 else "inconclusive"
    findings = sorted({(random_.choice(CODES), random_.choice(SEVERITIES),
                        random_.choice(["downstream", "upstream", "requests"]))
                       for _ in range(random_.randint(1, 3))}) if verdict != "equal" else []
    duration = random_.uniform(300, 30_000)
    down = random_.randint(800, 200_000)
    return {
        "request_id": request_id, "stored_as": request_id, "day": DAY,
        "started_at": started, "finished_at": started + timedelta(milliseconds=duration),
        "route": route, "model": random_.choice(MODELS), "dialect_upstream": dialect,
        "dialect_downstream": dialect,
        "pairing": "header" if random_.random() < 0.8 else "fingerprint",
        "attempts": 1 if random_.random() < 0.97 else 2, "verdict": verdict,
        "codes": [code for code, _, _ in findings],
        "severities": [severity for _, severity, _ in findings],
        "sides": [side for _, _, side in findings],
        "bytes_upstream": down + random_.randint(-200, 200), "bytes_downstream": down,
        "duration_ms": round(duration, 1), "replica": replica,
        "capture_id": f"{random_.getrandbits(64):016x}", "kept": "diverged", "format": FORMAT,
    }


def write_day(root: Path, rows: int, replicas: int, every: int) -> tuple[int, int]:
    """The day's segments under `root`; (segments, bytes)."""
    random_ = random.Random(7)
    names = [f"litellm-7d9f8c6b5-{random_.getrandbits(20):05x}" for _ in range(replicas)]
    start = datetime.fromisoformat(f"{DAY}T00:00:00+00:00")
    windows = 1440 // every
    per_window = rows / (replicas * windows)
    segments = size = made = 0
    db = connect(threads=1)
    for window in range(windows):
        sealed = start + timedelta(minutes=(window + 1) * every)
        for n, replica in enumerate(names):
            count = int(per_window * (window * replicas + n + 1)) - made
            made += count
            batch = [row(random_, start + timedelta(minutes=window * every,
                                                    seconds=random_.uniform(0, every * 60)),
                         replica, made + k) for k in range(count)]
            if not batch:
                continue
            key = layout.segment(DAY, replica, int(sealed.timestamp() * 1000), "b0").key
            target = root / key
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(encode_lines(b"".join(map(row_line, batch)), db))
            segments += 1
            size += target.stat().st_size
    db.close()
    return segments, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=150_000)
    parser.add_argument("--replicas", type=int, default=10)
    parser.add_argument("--every", type=int, default=1, help="minutes between two segments")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="calltap-bench-") as scratch:
        root = Path(scratch)
        began = time.monotonic()
        segments, size = write_day(root, args.rows, args.replicas, args.every)
        print(f"wrote {segments} segments, {args.rows} rows, {size} bytes"
              f" ({size / args.rows:.1f} bytes a row) in {time.monotonic() - began:.1f} s")
        began = time.monotonic()
        done = compaction.compact_day(Storage(root), DAY)
        took = time.monotonic() - began
        print(f"compacted: {done.segments_in} segments in, {done.rows_in} rows in,"
              f" {done.rows_out} rows out, {len(done.written)} segments out")
        print(f"bytes before {done.bytes_in} ({done.bytes_in / done.rows_in:.1f} a row),"
              f" after {done.bytes_out} ({done.bytes_per_row:.1f} a row):"
              f" {done.bytes_in / done.bytes_out:.1f}x smaller")
        print(f"compaction took {took:.1f} s ({done.rows_out / took:,.0f} rows a second)"
              f" at {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    main()
