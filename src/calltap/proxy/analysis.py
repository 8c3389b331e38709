"""The work done on a finished capture, away from the relay loop (in a worker process).

It reads the recorded files back, masks them when body patterns are configured, takes their
size and sha256, and runs the comparator (both legs) or the single-side checks (one leg).
Everything crosses the process boundary as plain data: file names in, JSON-ready dicts out.

How a leg ended is judged here, from what was relayed: a client (or gateway) that hangs up right
after the terminal marker (the official openai SDK closes as soon as it reads `data: [DONE]`)
ended a complete leg, whatever the socket said. An error relayed inside the stream ends it the
same way: the official SDKs raise on an error payload and hang up, so a client that closes after
an error frame was told the stream failed. Only a leg cut before its marker or an error frame
stays cut.

Workers run at a lower CPU priority (`os.nice`): under a burst the relay gets the cores and
the comparisons catch up afterwards. A faithful gateway hands the client the provider's exact
bytes, so when both legs' captures are identical the body is hashed and transcribed once and
that transcript compared with itself: same bytes, same transcript, same report, half the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import multiprocessing
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Literal, NotRequired, TypedDict

import orjson

from calltap import recordings
from calltap.codes import Code
from calltap.compare import Comparison, check_capture, compare, compare_captures
from calltap.compare_pair import with_requests
from calltap.compare_requests import PairRequests, RecordedRequest
from calltap.dialects import UNKNOWN, transcribe
from calltap.proxy.capture import write_fully
from calltap.redact import BodyMasker
from calltap.report import check_json, comparison_json
from calltap.transcript import Capture, Finding, Position, Transcript

READ_PIECE = 1 << 20


class BodySpec(TypedDict):
    """A recorded response body and what the comparator needs to know about it."""

    file: str
    request_file: str | None
    """The request body's file, when it was recorded: the client's tells whether it asked for
    usage."""
    path: str
    content_encoding: str | None
    content_type: NotRequired[str | None]
    """The response's Content-Type: it tells a one-line NDJSON stream from a JSON body."""
    status: int | None
    truncated: bool
    ended: str | None
    """How the relay saw the leg end (`client_aborted`, …)."""
    bytes_relayed: int
    """Body bytes that reached the other side: the recorded body may hold one chunk more."""


class RequestSpec(TypedDict):
    """An earlier upstream attempt's recorded request: compared with the client's, kept apart."""

    attempt: int
    file: str
    path: str


class Job(TypedDict):
    directory: str
    files: list[str]
    """Every recorded file of the capture to measure (and mask)."""
    mask_patterns: list[str]
    upstream: BodySpec | None
    downstream: BodySpec | None
    mode: Literal["compare", "check", "record"]
    """Compare upstream with downstream, check the one body given, or only measure files."""
    document: dict[str, Any]
    """pair.json without what the worker finds: its legs' `bytes` and `sha256`, the report."""
    earlier_requests: NotRequired[list[RequestSpec]]
    """The requests of the upstream attempts other than the compared one."""
    closed_at: float
    """When the capture closed (wall clock): a comparison that waited for the load to pass
    says how long, as pair.json's `compared_after` (seconds)."""


class FileFacts(TypedDict):
    bytes: int
    sha256: str


class WriteError(TypedDict):
    errno: int | None
    strerror: str | None


@dataclass(slots=True)
class Judgement:
    """The verdict and the findings, typed, as the log and the metrics need them: crossing the
    worker boundary, they are encoded by orjson and rebuilt with `decode`."""

    verdict: str
    findings: list[Finding]
    """The comparison's (or the check's) findings."""
    sides: dict[str, list[Finding]] = field(default_factory=dict)
    """Each side's own findings (a comparison's)."""
    readable: bool = True
    """Both sides were read in a known dialect (a comparison's)."""

    @classmethod
    def of_comparison(cls, comparison: Comparison) -> Judgement:
        sides = {"upstream": comparison.upstream, "downstream": comparison.downstream}
        return cls(comparison.verdict, comparison.findings,
                   {side: transcript.findings for side, transcript in sides.items()},
                   all(transcript.dialect != UNKNOWN for transcript in sides.values()))

    @classmethod
    def decode(cls, data: dict[str, Any]) -> Judgement:
        return cls(data["verdict"], [_finding(item) for item in data["findings"]],
                   {side: [_finding(item) for item in items]
                    for side, items in data["sides"].items()},
                   data["readable"])


def _finding(data: dict[str, Any]) -> Finding:
    position = data["position"]
    return Finding(Code(data["code"]), data["side"], data["choice"], data["count"],
                   Position(**position) if position is not None else None, data["detail"],
                   data.get("turn"), data.get("tool"))


class Result(TypedDict):
    files: dict[str, FileFacts]
    report: dict[str, Any] | None
    judgement: Judgement | None
    compared_after: float
    endings: dict[str, str]
    """Legs (by body file) judged complete from what was relayed, though the socket was hung up."""
    pair_json_bytes: int
    pair_json_error: WriteError | None


def analyze(job: Job) -> Result:
    """A finished capture's files measured (and masked), its bodies compared or checked, its
    pair.json completed and written: each step below is one of these."""
    waited = job["document"]["compared_after"] = round(max(0.0, time.time() - job["closed_at"]),
                                                       3)
    bodies, files = _measure(job["directory"], job["files"], BodyMasker(job["mask_patterns"]))
    report, judgement, endings = _judge(job, bodies)
    document = complete(job["document"], files, job["mode"], report, endings)
    payload = recordings.encode_pair(document)
    result: Result = {"files": files, "report": report, "judgement": judgement,
                      "endings": endings, "compared_after": waited,
                      "pair_json_bytes": len(payload),
                      "pair_json_error": None}
    try:
        _write_atomically(os.path.join(job["directory"], recordings.PAIR_JSON), payload)
    except OSError as exc:
        result["pair_json_bytes"] = 0
        result["pair_json_error"] = {"errno": exc.errno, "strerror": exc.strerror}
    return result


def _measure(directory: str, names: list[str],
             masker: BodyMasker) -> tuple[dict[str, bytes], dict[str, FileFacts]]:
    """Each file's bytes (masked in place when patterns match), size and sha256."""
    bodies: dict[str, bytes] = {}
    files: dict[str, FileFacts] = {}
    for name in names:
        path = os.path.join(directory, name)
        body = _read(path)
        if masker:
            masked = masker.mask(body)
            if masked != body:
                rewrite(path, masked)
                body = masked
        twin = _twin(body, bodies)
        if twin is None:
            files[name] = {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        else:
            body = bodies[twin]
            files[name] = files[twin].copy()
        bodies[name] = body
    return bodies, files


def _judge(job: Job, bodies: dict[str, bytes]
           ) -> tuple[dict[str, Any] | None, Judgement | None, dict[str, str]]:
    """The comparison (or check) report and its typed findings, and the hung-up legs whose
    relayed bytes ended the stream."""
    upstream, downstream = job["upstream"], job["downstream"]
    specs = [spec for spec in (upstream, downstream) if spec is not None]
    transcripts: list[Transcript] = []
    report: dict[str, Any] | None = None
    judgement: Judgement | None = None
    if job["mode"] == "compare" and upstream is not None and downstream is not None:
        up, down = _capture(upstream, bodies), _capture(downstream, bodies)
        if up == down:
            transcript = check_capture(up).transcript
            comparison = compare(transcript, transcript)
        else:
            request = bodies.get(downstream["request_file"] or "")
            comparison = compare_captures(up, down, downstream_request=request)
        comparison = with_requests(comparison, _requests(job, bodies))
        report = comparison_json(comparison)
        judgement = Judgement.of_comparison(comparison)
        transcripts = [comparison.upstream, comparison.downstream]
    elif job["mode"] == "check" and specs:
        specs = specs[:1]
        checked = check_capture(_capture(specs[0], bodies))
        report = check_json(checked)
        judgement = Judgement(checked.verdict, checked.findings)
        transcripts = [checked.transcript]
    endings = {
        spec["file"]: recordings.COMPLETE
        for spec, transcript in zip(specs, transcripts, strict=False)
        if spec["ended"] in recordings.HUNG_UP and _end_relayed(spec, transcript, bodies)
    }
    return report, judgement, endings


def _requests(job: Job, bodies: dict[str, bytes]) -> PairRequests | None:
    """The pair's recorded requests, when the client's and the compared attempt's were."""
    upstream, downstream = job["upstream"], job["downstream"]
    assert upstream is not None and downstream is not None
    client = bodies.get(downstream["request_file"] or "")
    compared = bodies.get(upstream["request_file"] or "")
    if client is None or compared is None:
        return None
    earlier = {spec["attempt"]: RecordedRequest(bodies[spec["file"]], spec["path"])
               for spec in job.get("earlier_requests", ()) if spec["file"] in bodies}
    return PairRequests(RecordedRequest(client, downstream["path"]),
                        RecordedRequest(compared, upstream["path"]), earlier)


def _end_relayed(spec: BodySpec, transcript: Transcript, bodies: dict[str, bytes]) -> bool:
    """Did the bytes that reached the other side end the stream? The recorded body is what was
    read; only its first `bytes_relayed` bytes surely went on."""
    if not _ended(transcript) or spec["truncated"]:
        return False
    body = bodies[spec["file"]]
    if spec["bytes_relayed"] >= len(body):
        return True
    relayed = _capture(spec, {spec["file"]: body[: spec["bytes_relayed"]]})
    return _ended(transcribe(relayed))


def _ended(transcript: Transcript) -> bool:
    """The stream told its reader it was over: the dialect's terminal marker, or an error frame
    (the official SDKs raise on an error payload and stop reading)."""
    return transcript.terminal_seen or bool(transcript.errors)


def complete(document: dict[str, Any], files: dict[str, FileFacts], mode: str,
             report: dict[str, Any] | None, endings: dict[str, str]) -> dict[str, Any]:
    """Fill a pair.json draft in: each leg's `bytes` and `sha256`, how it ended as judged from
    what was relayed (the socket's word kept as `relay_ended`), the comparison or check."""
    legs = document["legs"]
    for leg in (legs.get("downstream"), legs.get("upstream"), *legs.get("upstream_attempts", ())):
        if leg is not None and leg["file"] in files:
            leg["bytes"] = files[leg["file"]]["bytes"]
            leg["sha256"] = files[leg["file"]]["sha256"]
        if leg is not None and leg["file"] in endings and leg["ended"] != endings[leg["file"]]:
            leg.setdefault("relay_ended", leg["ended"])
            leg["ended"] = endings[leg["file"]]
    if mode == "compare":
        document["comparison"] = report
    elif mode == "check":
        document["check"] = report
    return document


def _twin(body: bytes, bodies: dict[str, bytes]) -> str | None:
    """An earlier file holding the same bytes: a faithful gateway's two response bodies are
    hashed once and share one bytes object, which makes comparing their captures instant."""
    for name, other in bodies.items():
        if other == body:
            return name
    return None


def _capture(spec: BodySpec, bodies: dict[str, bytes]) -> Capture:
    return Capture(body=bodies[spec["file"]], path=spec["path"],
                   content_encoding=spec["content_encoding"],
                   content_type=spec.get("content_type"), status=spec["status"],
                   truncated=spec["truncated"])


def _read(path: str) -> bytes:
    """The whole file, in one read of its size plus one (the extra byte shows it grew)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        chunks = [os.read(fd, size + 1)]
        if len(chunks[0]) > size:
            while chunk := os.read(fd, READ_PIECE):
                chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def rewrite(path: str, body: bytes) -> None:
    """Replace a recorded file's bytes (masked) through a temporary file renamed over it."""
    temporary = _sibling(path, ".masking")
    _write_new(temporary, body, os.O_TRUNC)
    os.replace(temporary, path)


def _write_atomically(path: str, payload: bytes) -> None:
    """Write `path` (0600) through a temporary file renamed over it."""
    temporary = _sibling(path, f".{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        _write_new(temporary, payload, os.O_EXCL)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _sibling(path: str, suffix: str) -> str:
    """A hidden name next to `path` for the file that will be renamed over it."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}{suffix}")


def _write_new(path: str, data: bytes, flag: int) -> None:
    """Create `path` (0600) with `data`, straight through os.write: no buffered file object."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flag, 0o600)
    try:
        write_fully(fd, data)
    finally:
        os.close(fd)


class WorkerFailed(RuntimeError):
    """A comparison job raised in its worker, or the worker died while running it."""


def _worker_main(connection: Connection, niceness: int, idle: bool) -> None:
    """A worker's whole life: read a job, answer it, until the parent closes the pipe. Ctrl-C
    reaches the whole process group, but only the parent stops the workers (after the last
    comparison), so a worker ignores SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if idle and hasattr(os, "sched_setscheduler"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    elif niceness:
        os.nice(niceness)
    while True:
        try:
            job = orjson.loads(connection.recv_bytes())
        except EOFError:
            return
        try:
            answer: dict[str, Any] = {"result": analyze(job)}
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        connection.send_bytes(orjson.dumps(answer))


_CONTEXT = multiprocessing.get_context(
    "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
if _CONTEXT.get_start_method() == "forkserver":
    _CONTEXT.set_forkserver_preload([__name__])


class _Channel(asyncio.Protocol):
    """The loop's end of a worker's socket. Messages are framed as multiprocessing's
    `Connection` frames them (a 4-byte big-endian length, or -1 and an 8-byte one), so the
    worker keeps its plain blocking `recv_bytes`/`send_bytes` while the loop's transport does
    the reads and writes natively: no Python-level syscalls and no reader registered per job."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._received = bytearray()
        self._answer: asyncio.Future[bytes] | None = None
        self._lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._received += data
        message = _unframe(self._received)
        if message is not None and self._answer is not None and not self._answer.done():
            self._answer.set_result(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(EOFError("comparison worker closed its socket"))

    async def ask(self, message: bytes) -> bytes:
        """Send one message and wait for the one answer."""
        if self._lost or self.transport is None:
            raise EOFError("comparison worker closed its socket")
        self._answer = asyncio.get_running_loop().create_future()
        self.transport.write(_frame(message))
        return await self._answer


def _frame(message: bytes) -> bytes:
    size = len(message)
    if size > 0x7FFFFFFF:
        return b"\xff\xff\xff\xff" + size.to_bytes(8, "big") + message
    return size.to_bytes(4, "big") + message


def _unframe(received: bytearray) -> bytes | None:
    """The first whole message in `received`, taken out of it; None until one is whole."""
    if len(received) < 4:
        return None
    size, start = int.from_bytes(received[:4], "big", signed=True), 4
    if size == -1:
        if len(received) < 12:
            return None
        size, start = int.from_bytes(received[4:12], "big"), 12
    if len(received) < start + size:
        return None
    message = bytes(received[start:start + size])
    del received[:start + size]
    return message


class _Worker:
    def __init__(self, niceness: int, idle: bool) -> None:
        parent, child = _CONTEXT.Pipe()
        self.process = _CONTEXT.Process(target=_worker_main, args=(child, niceness, idle),
                                        daemon=True, name="calltap-compare")
        self.process.start()
        child.close()
        self._socket = socket.socket(fileno=os.dup(parent.fileno()))
        parent.close()
        self._channel: _Channel | None = None

    async def channel(self) -> _Channel:
        """The loop's connection to the worker, made on first use (on the running loop)."""
        if self._channel is None:
            loop = asyncio.get_running_loop()
            _, self._channel = await loop.create_unix_connection(_Channel, sock=self._socket)
        return self._channel

    def close(self) -> None:
        if self._channel is not None and self._channel.transport is not None:
            self._channel.transport.close()
        else:
            self._socket.close()


class Workers:
    """Worker processes running `analyze`, forked from a forkserver that has the comparator
    imported. The event loop talks to each over a socket of its own (`_Channel`): no helper
    thread competes with the relay for the GIL on their behalf. A worker that dies fails the job it
    was running and is replaced for the next one. A job waiting for a worker holds file names
    and its pair.json draft, never a body, so a backlog after a burst costs little memory."""

    def __init__(self, count: int, niceness: int = 0, *, idle: bool = False) -> None:
        self.count = count
        self.niceness = niceness
        self.idle = idle
        """Run under SCHED_IDLE (Linux): a worker gets only the CPU nothing else wants."""
        self._idle: asyncio.Queue[_Worker] | None = None
        self._workers: list[_Worker] = []

    def warm(self) -> None:
        """Start every worker (blocking: the first start also starts the forkserver)."""
        self._workers = [_Worker(self.niceness, self.idle) for _ in range(self.count)]

    async def analyze(self, job: Job) -> Result:
        if self._idle is None:
            self._idle = asyncio.Queue()
            for worker in self._workers:
                self._idle.put_nowait(worker)
        worker = await self._idle.get()
        try:
            channel = await worker.channel()
            answer = orjson.loads(await channel.ask(orjson.dumps(job)))
        except (OSError, EOFError) as exc:
            worker = self._replace(worker)
            raise WorkerFailed(f"comparison worker died: {type(exc).__name__}") from exc
        except asyncio.CancelledError:
            worker = self._replace(worker)
            raise
        finally:
            self._idle.put_nowait(worker)
        if "error" in answer:
            raise WorkerFailed(answer["error"])
        result: Result = answer["result"]
        if result["judgement"] is not None:
            result["judgement"] = Judgement.decode(result["judgement"])  # type: ignore[arg-type]
        return result

    def _replace(self, worker: _Worker) -> _Worker:
        """A fresh worker instead of one that died or whose answer nobody will read."""
        worker.close()
        worker.process.kill()
        self._workers.remove(worker)
        fresh = _Worker(self.niceness, self.idle)
        self._workers.append(fresh)
        return fresh

    async def stop(self) -> None:
        """Close the sockets (each worker then exits) and wait for the processes."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.close()
        await asyncio.to_thread(_join, workers)


def _join(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.process.join(timeout=5)
        if worker.process.is_alive():
            worker.process.kill()
