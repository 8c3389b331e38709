"""A missing usage is a divergence only when the client asked for usage.

The fixtures are the exact bytes of one request through LiteLLM 1.108.7: the client streamed
without `stream_options`, LiteLLM added `"stream_options":{"include_usage":true}` to the request
it sent the provider (to count tokens for itself), got the usage chunk, and sent the client the
stream it asked for, without usage. That is faithful; the same downstream bytes after a request
that did ask for usage are a dropped usage chunk.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calltap.codes import Code
from calltap.compare import compare_captures
from calltap.dialects.openai_chat import usage_requested
from calltap.transcript import Capture

LITELLM = Path(__file__).parent / "fixtures" / "litellm"
CHAT_PATH = "/v1/chat/completions"


def fixture(name: str) -> bytes:
    return (LITELLM / f"text-no-usage.{name}").read_bytes()


def compared(downstream_request: bytes | None) -> tuple[str, set[Code]]:
    comparison = compare_captures(
        Capture(fixture("upstream.sse"), CHAT_PATH, status=200),
        Capture(fixture("downstream.sse"), CHAT_PATH, status=200),
        downstream_request=downstream_request,
    )
    return comparison.verdict, {finding.code for finding in comparison.findings}


def test_the_gateway_asked_the_provider_for_usage_the_client_did_not_ask_for() -> None:
    assert not usage_requested(fixture("downstream.request"))
    assert usage_requested(fixture("upstream.request"))


def test_usage_kept_from_a_client_that_asked_for_none_is_equal() -> None:
    assert compared(fixture("downstream.request")) == ("equal", set())


def test_usage_dropped_from_a_client_that_asked_for_it_is_missing() -> None:
    request = orjson.loads(fixture("downstream.request"))
    request["stream_options"] = {"include_usage": True}
    assert compared(orjson.dumps(request)) == ("diverged", {Code.USAGE_MISSING})


def test_without_the_request_a_missing_usage_is_still_reported() -> None:
    assert compared(None) == ("diverged", {Code.USAGE_MISSING})


@pytest.mark.parametrize(
    ("body", "requested"),
    [
        (b'{"stream":true}', False),
        (b'{"stream":true,"stream_options":{"include_usage":false}}', False),
        (b'{"stream":true,"stream_options":{"include_usage":"yes"}}', False),
        (b'{"stream":true,"stream_options":null}', False),
        (b'{"stream":true,"stream_options":{"include_usage":true}}', True),
        (b'{"stream":false}', True),
        (b"{}", True),
        (b'{"stream":"true"}', True),
        (b"[1]", True),
        (b"not json", True),
        (b"", True),
    ],
)
def test_usage_requested(body: bytes, requested: bool) -> None:
    assert usage_requested(body) is requested


JSON_SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8,
)


@given(body=st.dictionaries(st.sampled_from(["stream", "stream_options", "model", "n"]),
                            JSON_VALUES | st.fixed_dictionaries({"include_usage": JSON_VALUES})))
def test_only_a_stream_can_ask_for_no_usage(body: dict) -> None:
    """A whole answer always carries usage; a stream carries it exactly when include_usage is
    the JSON value true."""
    options = body.get("stream_options")
    expected = body.get("stream") is not True or (
        isinstance(options, dict) and options.get("include_usage") is True)
    assert usage_requested(orjson.dumps(body)) is expected


def _recording(directory: Path, *, request_file: str | None) -> Path:
    """The LiteLLM fixtures laid out as calltap records a pair, with or without the pair.json
    leg that names the client's request."""
    directory.mkdir()
    for name in ("upstream.sse", "downstream.sse", "downstream.request", "upstream.request"):
        (directory / name).write_bytes(fixture(name))
    leg = {"path": CHAT_PATH, "status": 200, "request_file": request_file}
    legs = {"upstream": {**leg, "request_file": "upstream.request"}, "downstream": leg}
    (directory / "pair.json").write_bytes(orjson.dumps({"legs": legs}))
    return directory


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "calltap", *map(str, args), "--json"],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(("request_file", "verdict"),
                         [("downstream.request", "equal"), (None, "diverged"),
                          ("../downstream.request", "diverged")])
def test_compare_and_scan_read_the_recorded_client_request(
    tmp_path: Path, request_file: str | None, verdict: str
) -> None:
    pair = _recording(tmp_path / "req-1", request_file=request_file)
    # A request file outside the pair's directory, which a leg naming "../downstream.request"
    # would reach: it must not be read.
    (tmp_path / "downstream.request").write_bytes(fixture("downstream.request"))
    compare_run = _cli("compare", pair / "upstream.sse", pair / "downstream.sse")
    assert orjson.loads(compare_run.stdout)["verdict"] == verdict
    scanned = _cli("scan", tmp_path)
    assert orjson.loads(scanned.stdout)["verdicts"] == {verdict: 1}
