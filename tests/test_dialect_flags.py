"""Forcing a dialect offline: `calltap check --dialect` and `calltap compare --upstream-dialect /
--downstream-dialect`, as real subprocesses on real files.

A forced dialect replaces detection: the body is read as that dialect whatever it looks like, and
the JSON report names it. A value that is not a dialect's NAME is a usage error (exit 2) that
lists the valid ones.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from calltap.dialects import DIALECTS, NAMES, transcribe
from calltap.fakes import anthropic_messages
from calltap.fakes.gateway import decode, serialize
from calltap.fakes.model import answer
from calltap.fakes.provider import TOOLS_REQUEST, stream_events
from calltap.fakes.translate import FromMessages
from calltap.fakes.translate_request import to_messages
from calltap.sse import parse
from calltap.transcript import Capture


def calltap(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "calltap", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def report(*args: str | Path) -> tuple[int, dict[str, Any]]:
    done = calltap(*args, "--json")
    return done.returncode, json.loads(done.stdout)


def anthropic_stream() -> bytes:
    """What the fake provider streams for TOOLS_REQUEST translated into Messages."""
    request = to_messages(TOOLS_REQUEST)
    view = anthropic_messages.chat_view(request)
    reply = answer(orjson.dumps(request), view, text_events=8)
    return b"".join(anthropic_messages.stream_events(reply, view))


def chat_translation(upstream: bytes) -> bytes:
    """The Chat Completions stream a faithful translating gateway makes of it."""
    relay = FromMessages()
    events, _ = parse(upstream)
    payloads = [out for event in events for out in relay.feed(decode(event))] + relay.end()
    return b"".join(serialize("message", payload) for payload in payloads)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Bare capture files (no pair.json beside them, so no request path to go by)."""
    upstream = anthropic_stream()
    bodies = {
        "anthropic": upstream,
        "translation": chat_translation(upstream),
        "chat": b"".join(
            stream_events(
                answer(orjson.dumps(TOOLS_REQUEST), TOOLS_REQUEST, text_events=8),
                include_usage=True,
            )
        ),
        "empty": b": keep-alive\n\n",
    }
    paths = {}
    for name, body in bodies.items():
        paths[name] = tmp_path / f"{name}.sse"
        paths[name].write_bytes(body)
    return paths


def test_the_flag_choices_are_the_dialect_modules_names():
    assert tuple(dict.fromkeys(module.NAME for module in DIALECTS)) == NAMES
    assert NAMES == (
        "openai.chat",
        "anthropic.messages",
        "openai.responses",
        "ollama.chat",
        "bedrock.converse",
        "google.gemini",
    )


def test_a_capture_with_an_unknown_forced_dialect_is_a_value_error():
    with pytest.raises(
        ValueError, match=r"unknown dialect 'claude' \(known: openai\.chat, anthropic\.messages"
    ):
        transcribe(Capture(b"data: [DONE]\n\n", dialect="claude"))


def test_check_reads_a_body_whose_content_says_nothing_as_the_forced_dialect(files):
    detected_code, detected = report("check", files["empty"])
    forced_code, forced = report("check", files["empty"], "--dialect", "anthropic.messages")

    assert (detected_code, detected["capture"]["dialect"]) == (3, "unknown")
    assert (forced_code, forced["capture"]["dialect"]) == (1, "anthropic.messages")
    assert [finding["code"] for finding in forced["findings"]] == ["DONE_MISSING"]


def test_check_reads_a_chat_stream_as_anthropic_when_told_to(files):
    detected_code, detected = report("check", files["chat"])
    forced_code, forced = report("check", files["chat"], "--dialect", "anthropic.messages")

    assert (detected_code, detected["verdict"]) == (0, "clean")
    assert (detected["capture"]["dialect"], detected["capture"]["tool_calls"]) == (
        "openai.chat",
        2,
    )
    assert (forced_code, forced["verdict"]) == (3, "inconclusive")
    assert (forced["capture"]["dialect"], forced["capture"]["tool_calls"]) == (
        "anthropic.messages",
        0,
    )
    codes = {finding["code"] for finding in forced["findings"]}
    assert {"DONE_MISSING", "JSON_INVALID"} <= codes, "no message_stop, and [DONE] is not JSON"


def test_compare_with_each_side_forced_to_its_own_dialect_is_equal(files):
    code, result = report(
        "compare",
        files["anthropic"],
        files["translation"],
        "--upstream-dialect",
        "anthropic.messages",
        "--downstream-dialect",
        "openai.chat",
    )
    assert (code, result["verdict"]) == (0, "equal")
    assert result["upstream"]["dialect"] == "anthropic.messages"
    assert result["downstream"]["dialect"] == "openai.chat"
    assert result["upstream"]["tool_calls"] == result["downstream"]["tool_calls"] == 2


def test_compare_with_the_downstream_forced_to_the_wrong_dialect_finds_no_calls(files):
    code, result = report(
        "compare",
        files["anthropic"],
        files["translation"],
        "--downstream-dialect",
        "openai.responses",
    )
    assert (code, result["verdict"]) == (3, "inconclusive"), "[DONE] is not a Responses event"
    assert result["upstream"]["dialect"] == "anthropic.messages"
    assert result["downstream"]["dialect"] == "openai.responses"
    assert result["downstream"]["choices"] == 0
    assert {finding["code"] for finding in result["findings"]} == {
        "CHOICE_DROPPED",
        "DONE_MISSING",
        "USAGE_MISSING",
        "JSON_INVALID",
    }


@pytest.mark.parametrize(
    "args",
    [
        ("check", "{chat}", "--dialect", "claude"),
        ("compare", "{anthropic}", "{chat}", "--upstream-dialect", "claude"),
        ("compare", "{anthropic}", "{chat}", "--downstream-dialect", "claude"),
    ],
    ids=["check", "compare-upstream", "compare-downstream"],
)
def test_an_unknown_dialect_is_a_usage_error_that_lists_the_valid_ones(files, args):
    done = calltap(*(arg.format(**files) for arg in args))
    flag = args[-2]
    assert done.returncode == 2
    assert done.stdout == ""
    assert f"argument {flag}: invalid choice: 'claude'" in done.stderr
    assert all(name in done.stderr for name in NAMES)


@pytest.mark.parametrize(
    ("command", "flags"),
    [("check", ["--dialect"]), ("compare", ["--upstream-dialect", "--downstream-dialect"])],
)
def test_help_teaches_the_dialect_flags(command, flags):
    done = calltap(command, "--help")
    assert done.returncode == 0
    assert all(f"{flag} DIALECT" in done.stdout for flag in flags)
    assert all(name in done.stdout for name in NAMES)
    assert "instead of detecting it" in done.stdout
