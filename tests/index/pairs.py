"""Recordings written by hand for the index tests: pair directories (pair.json and the client's
request) in the layout the proxy writes, with the verdicts and findings a comparison leaves, and
the same objects for a bucket."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from calltap import recordings

CHAT = "/v1/chat/completions"
ROOT = Path(__file__).resolve().parents[2]


def document(key: str, started: datetime, *, verdict: str = "equal",
             codes: tuple[str, ...] = (), request_id: str | None = None,
             path: str = CHAT) -> dict[str, Any]:
    """pair.json of a compared pair: both legs, and its comparison's verdict and findings."""
    finished = started + timedelta(milliseconds=250)
    leg = {"method": "POST", "path": path, "status": 200,
           "started_at": started.isoformat(), "finished_at": finished.isoformat(),
           "bytes": 1200, "ended": "complete"}
    findings = [{"code": code, "severity": "fatal", "side": "downstream"} for code in codes]
    return {"request_id": request_id or key, "pairing": "header", "attempts": 1,
            "capture_id": f"cap-{key}"[:32],
            "legs": {"downstream": {**leg, "file": "downstream.sse",
                                    "request_file": "downstream.request"},
                     "upstream": {**leg, "file": "upstream.sse"}},
            "comparison": {"verdict": verdict, "findings": findings}}


def request(model: str) -> bytes:
    return orjson.dumps({"model": model, "stream": True, "messages": []})


def objects(day: str, key: str, doc: dict[str, Any], model: str) -> dict[str, bytes]:
    """A pair's objects as a bucket holds them (the bodies left out: the index never reads them)."""
    return {f"{day}/{key}/downstream.request": request(model),
            f"{day}/{key}/{recordings.PAIR_JSON}": recordings.encode_pair(doc)}


def write(root: Path, day: str, key: str, *, model: str = "gpt-4o", **fields: Any) -> None:
    """One pair of `root`, started on `day` at a time its key orders."""
    started = datetime.fromisoformat(f"{day}T00:00:00+00:00") + timedelta(
        seconds=sum(map(ord, key)) % 80000)
    for name, data in objects(day, key, document(key, started, **fields), model).items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def tree(root: Path, days: dict[str, int], diverged_every: int = 5) -> set[tuple[str, str]]:
    """`days[day]` pairs for each day; every `diverged_every`-th diverged. Their (day, key)."""
    written = set()
    for day, count in days.items():
        for n in range(count):
            key = f"{day.replace('-', '')}T0000{n:05d}Z-p{n}"
            diverged = n % diverged_every == 0
            write(root, day, key, verdict="diverged" if diverged else "equal",
                  codes=("TOOL_CALL_DROPPED",) if diverged else ())
            written.add((day, key))
    return written


def calltap(*args: str, env: dict[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """`python -m calltap ARGS` as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "calltap", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, check=False, timeout=300)
    if check:
        assert done.returncode == 0, done.stderr + done.stdout
    return done


def today() -> str:
    return datetime.now(UTC).date().isoformat()
