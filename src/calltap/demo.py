"""Watch calltap catch a gateway that drops a tool call: everything on loopback, in seconds.

The demo starts four things on 127.0.0.1, on ports the system picks:

  fake provider   answers Chat Completions: two parallel tool calls, weather({"city":"Taipei"})
                  and clock({"zone":"UTC"}), streamed in fragments, then usage and [DONE]
  fake gateway    relays faithfully, or injects one known defect when a request carries
                  `X-Fake-Gateway-Defect: <name>` (each reproduces a public bug report); with
                  `X-Fake-Gateway-Translate: anthropic|responses|ollama|converse|gemini|
                  bedrock-invoke` it translates, as LiteLLM's routes do, and the provider
                  answers in that dialect
  calltap         front and back, exactly as `calltap serve` runs them beside a real gateway:
                  client -> front -> gateway -> back -> provider
  a client        sends a faithful text request, a faithful tool-call request, one tool-call
                  request per stream defect; a conversation (a tool call and its result in
                  history, an enum in a tool's schema, a named tool_choice, temperature 0) and
                  an Anthropic Messages conversation whose tool result holds an image, faithful
                  and once per request defect; then tool-call requests and conversations through
                  the translating gateway (faithful on every route, and losing the second call on
                  every route), and waits for calltap to compare each pair

For each request it prints the request id (the capture's directory name), the defect injected,
what calltap should report, what it reported, and whether that matched. Faithful and cosmetic
relays (rewritten ids, re-cut fragments, stripped headers, a retried upstream) must compare
`equal`; every lossy defect must be `diverged` with its code (TOOL_CALLS_DROPPED, DONE_MISSING, …).
calltap also compares the client's request with the one the provider got: a request defect (a tool
dropped, the tool choice changed or its "none" dropped, a tool result's image dropped,
temperature 0 dropped, an enum lost) must be `diverged` with its request code
(REQUEST_TOOL_DROPPED, TOOL_CHOICE_CHANGED, …).
A translated pair crosses dialects (Anthropic Messages, OpenAI Responses, Ollama's NDJSON, Bedrock
Converse's binary event stream, Gemini's SSE or Anthropic events in Bedrock's event stream
upstream, Chat Completions downstream) and is compared by meaning all the same.

Exit status: 0 when every defect was caught and every faithful pair was equal, 1 otherwise.
Needs no configuration and no network. The captures and calltap's own JSON log (calltap.log) go
to a temporary directory removed at exit, unless --recordings DIR keeps them.

examples:
  calltap demo
  calltap demo --recordings demo-recordings
  jq 'select(.event=="divergence" or .event=="leg.defect")' demo-recordings/calltap.log
  calltap compare demo-recordings/<day>/<request id>/upstream.sse \\
                  demo-recordings/<day>/<request id>/downstream.sse
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import aiohttp
from rich.console import Console
from rich.table import Table

from calltap.codes import Code, Severity
from calltap.config import Config, ConfigError
from calltap.fakes import DEFECT_HEADER, DEFECTS, FAITHFUL, Defect, FakeGateway, FakeProvider
from calltap.fakes.conversation import (
    CONVERSATION_REQUEST,
    MESSAGES_CONVERSATION_REQUEST,
    NONE_CHOICE_CONVERSATION_REQUEST,
)
from calltap.fakes.gateway import TRANSLATE_HEADER
from calltap.fakes.provider import CHAT_PATH, MESSAGES_PATH, TEXT_REQUEST, TOOLS_REQUEST
from calltap.fakes.translate import LOSE_SECOND_TOOL_USE, TRANSLATION_DEFECTS
from calltap.proxy.app import Calltap

LOOPBACK = ("127.0.0.1", 0)
LOG_NAME = "calltap.log"
PAIR_TIMEOUT = 10.0
WIDE = 160
ALARMS = 'select(.event=="divergence" or .event=="leg.defect")'
"""The jq filter for the lines people tail."""
"""Columns for the table when the output is not a terminal (a pipe or a CI log)."""
STYLES = {
    Severity.FATAL: "bold red",
    Severity.NEGOTIABLE: "yellow",
    Severity.COSMETIC: "dim",
    Severity.WARNING: "magenta",
}


@dataclass(frozen=True, slots=True)
class Scenario:
    """One request the demo sends: what it asks for and which defect the gateway injects."""

    label: str
    request: dict[str, Any]
    defect: Defect
    translate: str | None = None
    """The dialect the gateway translates into (`X-Fake-Gateway-Translate`), if any."""
    path: str = CHAT_PATH
    """Where the client sends it: Chat Completions, or Anthropic Messages relayed untranslated."""

    @property
    def title(self) -> str:
        """The defect's name, with what was sent unless it is the plain tool-call request."""
        if self.defect is FAITHFUL or self.translate or self.defect.request is not None:
            return f"{self.defect.name} ({self.label})"
        return self.defect.name


ROUTES = {
    "anthropic": "Anthropic Messages",
    "responses": "OpenAI Responses",
    "ollama": "Ollama",
    "converse": "Bedrock Converse",
    "gemini": "Gemini",
    "bedrock-invoke": "Anthropic on Bedrock",
}
"""Every translation the gateway offers, by the name the demo shows."""
MESSAGES_CLIENT = frozenset({"drop-result-image"})
"""Request defects sent as the Anthropic Messages conversation: only it has an image in a tool
result (a Chat Completions tool message holds text)."""
NONE_CHOICE_CLIENT = frozenset({"drop-none-choice"})
"""Request defects sent as the conversation that says `tool_choice: "none"`."""


def conversation(defect: Defect) -> Scenario:
    """The conversation a request defect (or a faithful relay) is sent with."""
    if defect.name in MESSAGES_CLIENT:
        return Scenario("Messages conversation", MESSAGES_CONVERSATION_REQUEST, defect,
                        path=MESSAGES_PATH)
    if defect.name in NONE_CHOICE_CLIENT:
        return Scenario("conversation, choice none", NONE_CHOICE_CONVERSATION_REQUEST, defect)
    return Scenario("conversation", CONVERSATION_REQUEST, defect)


SCENARIOS = (
    Scenario("text", TEXT_REQUEST, FAITHFUL),
    Scenario("tool calls", TOOLS_REQUEST, FAITHFUL),
    *(Scenario("tool calls", TOOLS_REQUEST, defect)
      for defect in DEFECTS.values() if defect.request is None),
    Scenario("conversation", CONVERSATION_REQUEST, FAITHFUL),
    Scenario("Messages conversation", MESSAGES_CONVERSATION_REQUEST, FAITHFUL, path=MESSAGES_PATH),
    *(conversation(defect) for defect in DEFECTS.values() if defect.request is not None),
    *(Scenario(f"via {route}", TOOLS_REQUEST, FAITHFUL, target)
      for target, route in ROUTES.items()),
    *(Scenario(f"conversation via {route}", CONVERSATION_REQUEST, FAITHFUL, target)
      for target, route in ROUTES.items()),
    *(Scenario(f"via {route}", TOOLS_REQUEST, LOSE_SECOND_TOOL_USE, target)
      for target, route in ROUTES.items()),
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What calltap wrote in pair.json for one scenario, and whether it was what we expected."""

    scenario: Scenario
    request_id: str
    pair: dict[str, Any]

    @property
    def comparison(self) -> dict[str, Any]:
        return self.pair.get("comparison") or {}

    @property
    def verdict(self) -> str:
        return self.comparison.get("verdict") or "not compared"

    @property
    def codes(self) -> list[str]:
        return list(dict.fromkeys(f["code"] for f in self.comparison.get("findings", [])))

    @property
    def as_expected(self) -> bool:
        defect = self.scenario.defect
        return (
            self.verdict == defect.verdict
            and defect.codes <= set(self.codes)
            and self.pair.get("pairing") == defect.pairing
            and self.pair.get("attempts") == defect.attempts
        )

    def got(self) -> list[str]:
        """The verdict, then how the pair was made when that is not the plain header case."""
        notes = [self.verdict]
        if self.pair.get("pairing") != "header":
            notes.append(f"paired by {self.pair.get('pairing')}")
        if self.pair.get("attempts") != 1:
            notes.append(f"{self.pair.get('attempts')} attempts")
        return notes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--recordings",
        metavar="DIR",
        type=Path,
        help="keep the captures and calltap.log in DIR (default: a temporary directory)",
    )


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = max(console.width, WIDE)
    keep = args.recordings is not None
    recordings = args.recordings if keep else Path(tempfile.mkdtemp(prefix="calltap-demo-"))
    try:
        outcomes = asyncio.run(demo(recordings, console))
        show(outcomes, recordings, keep, console)
    except (ConfigError, OSError) as exc:
        console.print(f"calltap demo: {exc}")
        return 2
    finally:
        if not keep:
            shutil.rmtree(recordings, ignore_errors=True)
    return 0 if all(outcome.as_expected for outcome in outcomes) else 1


async def demo(recordings: Path, console: Console) -> list[Outcome]:
    """Start the fakes and calltap on loopback, send every scenario, collect pair.json."""
    recordings.mkdir(parents=True, exist_ok=True)
    provider = FakeProvider()
    with (recordings / LOG_NAME).open("w", encoding="utf-8") as log:
        async with loopback(provider, recordings, log) as (gateway, calltap):
            await gateway.probe_upstream()
            console.print(
                f"provider {provider.url}  gateway {gateway.url}  "
                f"calltap front {calltap.front_url} back {calltap.back_url}"
            )
            async with aiohttp.ClientSession(auto_decompress=False) as client:
                return [await send(client, calltap, scenario) for scenario in SCENARIOS]


@asynccontextmanager
async def loopback(
    provider: FakeProvider, recordings: Path, log_stream: TextIO, **config: Any
) -> AsyncIterator[tuple[FakeGateway, Calltap]]:
    """Start `provider`, a fake gateway and calltap on loopback ports the system picks, wired as
    client -> calltap front -> gateway -> calltap back -> provider; `config` sets other Config
    fields. Yields the gateway and calltap; a client sends to `calltap.front_url`."""
    async with provider, FakeGateway() as gateway:
        settings = Config(
            front=LOOPBACK,
            gateway=gateway.url,
            back=LOOPBACK,
            provider=provider.url,
            admin=LOOPBACK,
            recordings=recordings,
            **config,
        )
        async with Calltap(settings, log_stream=log_stream) as calltap:
            assert calltap.front_url is not None and calltap.back_url is not None
            gateway.upstream = calltap.back_url
            yield gateway, calltap


async def send(client: aiohttp.ClientSession, calltap: Calltap, scenario: Scenario) -> Outcome:
    """One request through calltap's front; returns once calltap compared its pair."""
    headers = {"Authorization": "Bearer sk-demo-not-a-real-key"}
    if scenario.defect is not FAITHFUL:
        headers[DEFECT_HEADER] = scenario.defect.name
    if scenario.translate is not None:
        headers[TRANSLATE_HEADER] = scenario.translate
    url = f"{calltap.front_url}{scenario.path}"
    async with client.post(url, json=scenario.request, headers=headers) as response:
        await response.read()
        request_id = response.headers["X-Request-ID"]
    try:
        pair = await calltap.wait_compared(request_id, timeout=PAIR_TIMEOUT)
    except TimeoutError:
        pair = {"request_id": request_id}
    return Outcome(scenario, request_id, pair)


def show(outcomes: list[Outcome], recordings: Path, kept: bool, console: Console) -> None:
    table = Table(
        title="calltap demo: one request per injected gateway defect and translated route"
    )
    table.add_column("request id", overflow="fold")
    table.add_column("defect injected", no_wrap=True)
    table.add_column("expected")
    table.add_column("calltap said")
    table.add_column("codes", overflow="fold")
    table.add_column("", no_wrap=True)
    for outcome in outcomes:
        defect = outcome.scenario.defect
        table.add_row(
            outcome.request_id,
            outcome.scenario.title,
            "\n".join(defect.expectations),
            "\n".join(outcome.got()),
            "\n".join(f"[{STYLES[Code(code).severity]}]{code}[/]" for code in outcome.codes) or "-",
            "[green]caught[/]"
            if outcome.as_expected and defect.verdict == "diverged"
            else "[green]ok[/]"
            if outcome.as_expected
            else "[red]MISSED[/]",
        )
    console.print(table)
    legend = Table.grid(padding=(0, 2))
    for defect in (*DEFECTS.values(), *TRANSLATION_DEFECTS.values()):
        legend.add_row(defect.name, defect.summary, f"[dim]{defect.seen_in}[/]")
    console.print("What each defect does, and where it was seen:")
    console.print(legend)
    good = sum(outcome.as_expected for outcome in outcomes)
    console.print(f"{good}/{len(outcomes)} as expected.")
    days = sorted(path.name for path in recordings.iterdir() if path.is_dir())
    where = recordings / (days[-1] if days else "<day>")
    log = recordings / LOG_NAME
    if kept:
        console.print(f"Captures: {where}/<request id>/ (pair.json, upstream.*, downstream.*)")
        console.print(f"calltap's JSON log: {log}")
        console.print(f"Tail the divergences: jq -c '{ALARMS}' {log}")
    else:
        console.print(
            "Captures and calltap's log were in a temporary directory, now removed; "
            "keep them with --recordings DIR."
        )
        console.print(f"Beside a real gateway: calltap serve ... | jq -c '{ALARMS}'")
