"""The relay benchmark's processes: started in their own process group, read from /proc, killed.

Every server runs in a new session (`start_new_session`), so Ctrl-C on the benchmark reaches
only the benchmark, whose `finally` then stops each server by its id: SIGTERM, a few seconds to
exit cleanly (calltap stops its comparison workers itself), then SIGKILL for whatever is left
of its process group.

CPU time comes from /proc/<pid>/stat (utime + stime, in clock ticks): it counts what a process
did, not how long it waited for a core, so it stays meaningful on a shared machine. A process
tree's time adds every live descendant and what each has already collected from the children it
reaped (cutime + cstime), so a worker pool's work is counted wherever it ran.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

TICKS = os.sysconf("SC_CLK_TCK")
BENCH = Path(__file__).resolve().parent
SERVERS = BENCH / "relay_servers.py"
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


@dataclass(frozen=True, slots=True)
class Cpu:
    """CPU seconds of one process alone and of it with all its descendants, and of the
    process's main thread (for an event loop server: the loop; the rest of `own` is its other
    threads, such as calltap's disk thread)."""

    own: float
    tree: float
    main_thread: float = 0.0

    def __add__(self, other: Cpu) -> Cpu:
        return Cpu(self.own + other.own, self.tree + other.tree,
                   self.main_thread + other.main_thread)

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(self.own - other.own, self.tree - other.tree,
                   self.main_thread - other.main_thread)


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, own ticks, reaped children's ticks), or None when the process is gone."""
    return _stat_file(f"/proc/{pid}/stat")


def _stat_file(path: str) -> tuple[int, int, int] | None:
    """A process's or a thread's (ppid, ticks, reaped children's ticks) from its stat file."""
    try:
        text = Path(path).read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    ppid, utime, stime, cutime, cstime = (int(fields[i]) for i in (1, 11, 12, 13, 14))
    return ppid, utime + stime, cutime + cstime


def cpu(pid: int) -> Cpu:
    """The CPU time of `pid` and of its whole live process tree, in seconds."""
    stats = {int(entry): _stat(int(entry)) for entry in os.listdir("/proc") if entry.isdigit()}
    root = stats.get(pid)
    if root is None:
        raise ProcessLookupError(pid)
    children: dict[int, list[int]] = {}
    for child, stat in stats.items():
        if stat is not None:
            children.setdefault(stat[0], []).append(child)
    tree_ticks, pending = 0, [pid]
    while pending:
        current = pending.pop()
        stat = stats[current]
        if stat is not None:
            tree_ticks += stat[1] + stat[2]
            pending.extend(children.get(current, ()))
    main = _stat_file(f"/proc/{pid}/task/{pid}/stat")
    main_ticks = main[1] if main is not None else root[1]
    return Cpu(root[1] / TICKS, tree_ticks / TICKS, main_ticks / TICKS)


def own_cpu() -> Cpu:
    """This process's CPU time (the load client's), children not included."""
    times = os.times()
    seconds = times.user + times.system
    return Cpu(seconds, seconds, seconds)


def machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of every CPU since boot, from /proc/stat."""
    line = Path("/proc/stat").read_text().split("\n", 1)[0]
    values = [int(value) for value in line.split()[1:9]]  # guest time is already in user
    total = sum(values)
    return total - values[3] - values[4], total


def free_port() -> int:
    """A loopback port nobody listens on right now (for a server that must be named first)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_env(malloc_tunables: str | None) -> dict[str, str]:
    """The servers' environment: this one without CALLTAP_* settings (only the benchmark's
    flags apply), with `GLIBC_TUNABLES` set to `malloc_tunables` unless already set."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CALLTAP_")}
    if malloc_tunables is not None:
        env.setdefault("GLIBC_TUNABLES", malloc_tunables)
    return env


@dataclass(eq=False)
class Server:
    """One started server process: its pid, its announced URLs and its log files."""

    name: str
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    urls: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu(self) -> Cpu:
        return cpu(self.pid)

    def stderr_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.stderr.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM the server (it stops its own workers), wait, then SIGKILL whatever is left
        of its process group."""
        self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOP_TIMEOUT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


class ServerFailed(RuntimeError):
    """A server exited or never announced itself."""


def launch(name: str, argv: list[str], workdir: Path, env: dict[str, str],
           ready_event: str | None = None) -> Server:
    """Start `argv` and wait for its first JSON line announcing its URLs (the line whose `event`
    is `ready_event`, when given). stdout and stderr go to files in `workdir`."""
    stdout, stderr = workdir / f"{name}.out", workdir / f"{name}.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                   cwd=workdir, env=env, start_new_session=True)
    server = Server(name, process, stdout, stderr)
    deadline = time.monotonic() + READY_TIMEOUT
    try:
        while time.monotonic() < deadline:
            for line in stdout.read_bytes().splitlines(keepends=True):
                if not line.endswith(b"\n"):
                    break
                try:
                    announced = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if ready_event is None or announced.get("event") == ready_event:
                    server.urls = announced
                    return server
            if process.poll() is not None:
                raise ServerFailed(f"{name} exited with {process.returncode}:\n"
                                   f"{server.stderr_tail()}")
            time.sleep(0.02)
        raise ServerFailed(f"{name} did not start within {READY_TIMEOUT:.0f} s")
    except BaseException:
        server.stop()
        raise


def launch_fake(name: str, args: list[str], workdir: Path, env: dict[str, str]) -> Server:
    """One of relay_servers.py's servers (provider, gateway, passthrough)."""
    return launch(name, [sys.executable, str(SERVERS), *args], workdir, env)


def launch_calltap(workdir: Path, env: dict[str, str], gateway: str, provider: str,
                   recordings: Path, bucket: str | None = None) -> Server:
    """`python -m calltap serve` with every listener on an ephemeral loopback port; with a
    `bucket`, `recordings` is its spool."""
    argv = [sys.executable, "-m", "calltap", "serve", "--front", "127.0.0.1:0",
            "--gateway", gateway, "--back", "127.0.0.1:0", "--provider", provider,
            "--admin", "127.0.0.1:0"]
    argv += (["--recordings", f"{bucket}/{recordings.name}", "--spool", str(recordings)]
             if bucket else ["--recordings", str(recordings)])
    return launch("calltap", argv, workdir, env, ready_event="serve.started")
