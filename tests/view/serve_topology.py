"""`calltap serve`'s whole topology in a process of its own, for the browser tests: a fake
provider, the fake gateway and calltap on loopback, recording into the tree named by argv[1].
Prints one JSON line (`front`, `admin`) once listening and runs until its stdin closes."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from calltap.demo import loopback
from calltap.fakes import FakeProvider


async def main(recordings: Path) -> None:
    async with loopback(FakeProvider(), recordings, sys.stderr) as (gateway, calltap):
        await gateway.probe_upstream()
        print(json.dumps({"front": calltap.front_url, "admin": calltap.admin_url}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
