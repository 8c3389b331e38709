"""Ask a gateway directly whether tool calls survive it: eight small active probes.

Each probe forces a named function whose schema states every expected argument value as `const`
(strict), with a prompt that repeats them, and judges the answer with calltap's own parser,
dialect reducers and argument equality: exact types (`true` is not `1`), duplicate keys and
NaN/Infinity rejected, streams must end with finish reason `tool_calls` and the terminal marker.
Two probes ask for what their tool choice rules out, so a gateway that drops or loosens the
choice fails them.

  forced-echo     one forced call, strings and a number, JSON answer
  forced-nested   nested objects and arrays, unicode, true vs 1, floats, null, 2^53-1
  stream-echo     forced-echo streamed
  stream-nested   forced-nested streamed across fragment boundaries
  round-trip      the validated call answered with a fixed local result; the next answer must
                  quote it exactly
  parallel        two calls in one streamed turn: both must arrive
  choice-none     tool_choice none while the prompt asks for a call: text, no call
  choice-named    two tools, the second named while the prompt asks for the first: one call of
                  the named one

Bounded: redirects refused, requests up to 64 KiB, responses up to 256 KiB, a 15 s socket timeout,
20 s per probe (40 s for round-trip) and --timeout overall, even against a server that trickles
bytes. The key is read from the environment variable --api-key-env names (never from the command
line), sent as `Authorization: Bearer`, and masked in everything saved.

Attribution: when --base-url is a calltap front (`calltap serve`), each probe is looked up by its
request id through calltap's admin API (--admin), and a failure says whether the gateway diverged
from the provider (the pair's codes) or the provider itself answered wrongly (the pair is equal).

Output: a new directory (refused if it exists), 0700, with report.html, results.json and
trace.json (files 0600). Exit 0 when every probe passed, 1 when any failed, 2 for bad
configuration or an output that cannot be written.

examples:
  CALLTAP_PROBE_API_KEY=sk-... calltap probe --base-url http://127.0.0.1:4000/v1 --model gpt-4o
  calltap probe --base-url http://127.0.0.1:8700 --output probe-run     # through calltap serve
  calltap probe --base-url http://127.0.0.1:4000 --dialect anthropic.messages --only parallel
  calltap probe --demo            # fake provider and faithful fake gateway on loopback: exit 0
  calltap probe --demo-broken     # a gateway that re-types values, ignores the tool choice: exit 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console
from rich.markup import escape

from calltap.fakes import FakeGateway, FakeProvider
from calltap.fakes.model import DEFAULT_MODEL
from calltap.otel.runs import RunSpan, export_run, from_environment
from calltap.probe.attribution import attribute
from calltap.probe.client import OVERALL_LIMIT, Limits
from calltap.probe.masking import Masker
from calltap.probe.output import REPORT, OutputError, Results, check_output, write_output
from calltap.probe.probes import PROBES, Probe, selected
from calltap.probe.requests import SHAPES
from calltap.probe.runner import Run, Target, run_probes

DEFAULT_KEY_ENV = "CALLTAP_PROBE_API_KEY"
DEFAULT_ADMIN = "http://127.0.0.1:8702"
BROKEN_DEFECT = "change-two-values,named-choice-required,drop-none-choice"
"""The bugs of --demo-broken's gateway: every probe meets one it catches."""
SYNTHETIC = {
    "demo": "calltap's fake provider behind a faithful fake gateway, on loopback",
    "demo-broken": "calltap's fake provider behind a fake gateway that re-types two argument"
    " values (change-two-values), sends a named tool choice as required"
    " (named-choice-required) and drops tool_choice none (drop-none-choice), on loopback",
}


class ConfigurationError(Exception):
    """A bad flag or environment; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What one run does, checked before anything is sent."""

    probes: list[Probe]
    output: Path
    key: str | None
    key_note: str | None
    demo: str | None
    """None, "demo" or "demo-broken"."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="the gateway (or calltap front) to probe; with or without its /v1",
    )
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help="model name to ask for (default: %(default)s)"
    )
    parser.add_argument(
        "--dialect",
        choices=list(SHAPES),
        default="openai.chat",
        help="the endpoint to probe (default: %(default)s, /v1/chat/completions)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the"
        f" key (default: {DEFAULT_KEY_ENV}; unset: no Authorization is sent)",
    )
    parser.add_argument(
        "--output",
        metavar="DIR",
        type=Path,
        help="new directory for the report"
        " (default: calltap-probe-<UTC time> here); refused if it exists",
    )
    parser.add_argument("--only", metavar="NAME,…", help=f"probes to run: {', '.join(PROBES)}")
    parser.add_argument(
        "--admin",
        metavar="URL",
        help="calltap's admin listener, for attribution"
        f" (default: {DEFAULT_ADMIN}, used when it fronts --base-url)",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=OVERALL_LIMIT,
        help="overall limit for the whole run (default: %(default)g)",
    )
    demo = parser.add_mutually_exclusive_group()
    demo.add_argument(
        "--demo",
        action="store_true",
        help="probe a faithful fake gateway on loopback (synthetic; exit 0)",
    )
    demo.add_argument(
        "--demo-broken",
        action="store_true",
        help="probe a fake gateway that re-types two argument values and ignores the tool"
        " choice (synthetic; exit 1)",
    )


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False, soft_wrap=True)
    try:
        plan = _plan(args)
    except (ConfigurationError, OutputError) as error:
        console.print(f"calltap probe: {escape(str(error))}")
        return 2
    if plan.key_note:
        console.print(f"[dim]{escape(plan.key_note)}[/]")
    if plan.demo:
        console.print(f"[bold yellow]SYNTHETIC[/] {escape(SYNTHETIC[plan.demo])}")
    started = datetime.now(UTC)
    masker = Masker(plan.key)
    run_, base_url, note = asyncio.run(_traced(args, plan, masker))
    meta = {
        "tool": "calltap probe",
        "synthetic": SYNTHETIC.get(plan.demo or ""),
        "base_url": masker.text(base_url),
        "dialect": args.dialect,
        "model": masker.text(args.model),
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "attribution": note,
    }
    results = Results(meta, run_.outcomes, run_.trace)
    _print(console, results)
    try:
        write_output(plan.output, results)
    except OutputError as error:
        console.print(f"calltap probe: {escape(str(error))}")
        return 2
    console.print(f"Report: {escape(str(plan.output / REPORT))}")
    return 0 if results.passed == len(results.outcomes) else 1


def _plan(args: argparse.Namespace) -> Plan:
    demo = "demo" if args.demo else "demo-broken" if args.demo_broken else None
    if demo and args.base_url:
        raise ConfigurationError(f"--{demo} probes its own fakes; drop --base-url")
    if not demo:
        _check_url(args.base_url)
    if demo == "demo-broken" and args.dialect != "openai.chat":
        raise ConfigurationError(
            f"--demo-broken's gateway re-types values in Chat Completions answers only;"
            f" drop --dialect {args.dialect} (--demo probes any dialect)"
        )
    if args.timeout <= 0:
        raise ConfigurationError("--timeout must be a positive number of seconds")
    try:
        probes = selected(args.only)
    except ValueError as error:
        raise ConfigurationError(f"--only: {error}") from None
    variable = args.api_key_env or DEFAULT_KEY_ENV
    key = os.environ.get(variable) or None
    note = None
    if key is None:
        if args.api_key_env:
            raise ConfigurationError(f"--api-key-env: {variable} is not set (or empty)")
        note = f"no API key ({variable} is not set): no Authorization header is sent"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    output = args.output or Path(f"calltap-probe-{stamp}")
    check_output(output)
    return Plan(probes, output, key, note, demo)


def _check_url(url: str | None) -> None:
    if not url:
        raise ConfigurationError("--base-url is required (or --demo / --demo-broken)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"--base-url {url!r} is not an http(s) URL with a host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ConfigurationError(
            "--base-url must not carry credentials, a query or a fragment;"
            " the key comes from --api-key-env"
        )


async def _traced(
    args: argparse.Namespace, plan: Plan, masker: Masker
) -> tuple[Run, str, str | None]:
    """The run, as a span of its own when the standard OTEL_* variables turn export on: every
    probe request carries its traceparent, so a calltap front's pair spans land beneath it."""
    otel = from_environment()
    if otel is None:
        return await _execute(args, plan, masker, None)
    span = RunSpan("calltap probe")
    executed = await _execute(args, plan, masker, span.traceparent)
    failed = [outcome.name for outcome in executed[0].outcomes if not outcome.passed]
    attributes = {"calltap.probe.probes": len(executed[0].outcomes),
                  "calltap.probe.failed": failed, "calltap.probe.dialect": args.dialect}
    await export_run(otel, span.finish(attributes, ", ".join(failed) or None))
    return executed


async def _execute(
    args: argparse.Namespace, plan: Plan, masker: Masker, traceparent: str | None
) -> tuple[Run, str, str | None]:
    limits = Limits(overall=args.timeout)
    if plan.demo:
        defect = BROKEN_DEFECT if plan.demo == "demo-broken" else None
        async with _fakes(defect) as base_url:
            target = Target(base_url, args.model, args.dialect, plan.key, traceparent)
            return await run_probes(target, plan.probes, limits, masker), base_url, None
    target = Target(args.base_url, args.model, args.dialect, plan.key, traceparent)
    run_ = await run_probes(target, plan.probes, limits, masker)
    note = await attribute(
        run_.outcomes, args.admin or DEFAULT_ADMIN, args.base_url, explicit=bool(args.admin)
    )
    return run_, args.base_url, note


@asynccontextmanager
async def _fakes(defect: str | None) -> AsyncIterator[str]:
    """A fake provider and a fake gateway (injecting `defect`) on loopback; yields its URL."""
    async with FakeProvider() as provider, FakeGateway(provider.url, defect=defect) as gateway:
        yield gateway.url


def _print(console: Console, results: Results) -> None:
    for outcome in results.outcomes:
        if outcome.passed:
            console.print(f"[green]PASS[/] {outcome.name}")
            continue
        console.print(f"[red]FAIL[/] {outcome.name}: {escape(outcome.reason)}")
        if outcome.pair is not None and outcome.pair.get("attribution"):
            console.print(
                f"     {escape(outcome.pair['attribution'])}"
                f" [dim](calltap pair {escape(outcome.pair['request_id'])})[/]"
            )
    if results.meta.get("attribution"):
        console.print(f"[dim]{escape(results.meta['attribution'])}[/]")
    console.print(f"Checks: {results.passed}/{len(results.outcomes)} passed")
