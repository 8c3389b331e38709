"""Attribution: when the probed base URL is a calltap front, ask calltap's admin API what the
provider said for each probe, and so whose fault a failure is.

calltap records both legs of every probe request under the request id it returns in
`X-Request-ID`, and compares them. `GET {admin}/api/pairs/{id}` gives that comparison: a
`diverged` pair means the gateway changed the answer (its codes say how); an `equal` pair means
the gateway forwarded faithfully, so the provider itself answered wrongly. The admin is trusted
only when its `/healthz` names the probed base URL as its front (or `--admin` was given), so an
unrelated calltap on the default port never lends a verdict.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp

from calltap.probe.runner import Outcome

HEALTH_TIMEOUT = 3.0
PAIR_WAIT = 15.0
"""How long to wait for calltap to compare a pair after its legs ended."""
POLL_INTERVAL = 0.2


def gateway_fault(codes: list[str]) -> str:
    return f"gateway diverged ({', '.join(codes) or 'no codes'})"


PROVIDER_FAULT = "provider answered wrongly (pair equal)"


async def attribute(outcomes: list[Outcome], admin: str, base_url: str, *, explicit: bool) -> str:
    """Fill in each outcome's `pair` from the admin API; returns one line on what was done."""
    admin = admin.rstrip("/")
    timeout = aiohttp.ClientTimeout(total=HEALTH_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        health = await _health(session, admin)
        if health is None:
            return f"no calltap admin answered at {admin}"
        front = (health.get("listeners") or {}).get("front")
        if not explicit and _origin(front) != _origin(base_url):
            return f"{base_url} is not a calltap front (the admin at {admin} fronts {front})"
        looked_up = await asyncio.gather(
            *(_attribute_one(session, admin, outcome) for outcome in outcomes)
        )
    found = sum(looked_up)
    return f"{found} of {len(outcomes)} probes looked up through calltap's admin API at {admin}"


async def _health(session: aiohttp.ClientSession, admin: str) -> dict[str, Any] | None:
    try:
        async with session.get(f"{admin}/healthz", allow_redirects=False) as response:
            if response.status != 200:
                return None
            value = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    return value if isinstance(value, dict) else None


async def _attribute_one(session: aiohttp.ClientSession, admin: str, outcome: Outcome) -> bool:
    request_id = outcome.failed_request_id or (outcome.request_ids or [None])[-1]
    if request_id is None:
        return False
    pair = await _pair(session, admin, request_id)
    if pair is None:
        return False
    comparison = _comparison(pair)
    verdict = comparison.get("verdict")
    findings = comparison.get("findings") or []
    codes = list(dict.fromkeys(f.get("code") for f in findings if isinstance(f, dict)))
    entry: dict[str, Any] = {"request_id": request_id, "verdict": verdict, "codes": codes}
    if not outcome.passed:
        entry["attribution"] = (
            PROVIDER_FAULT
            if verdict == "equal"
            else gateway_fault(codes)
            if verdict == "diverged"
            else f"{verdict} ({', '.join(codes)}): calltap could not tell"
        )
    outcome.pair = entry
    return True


async def _pair(
    session: aiohttp.ClientSession, admin: str, request_id: str
) -> dict[str, Any] | None:
    """The pair once compared: a 404 is retried (calltap compares after both legs end)."""
    url = f"{admin}/api/pairs/{quote(request_id, safe='')}"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PAIR_WAIT
    while True:
        try:
            async with session.get(url, allow_redirects=False) as response:
                if response.status == 200:
                    value = await response.json(content_type=None)
                    if not isinstance(value, dict):
                        return None
                    if _verdict(value) is not None:
                        return value
                elif response.status != 404:
                    return None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        if loop.time() >= deadline:
            return None
        await asyncio.sleep(POLL_INTERVAL)


def _comparison(pair: dict[str, Any]) -> dict[str, Any]:
    """The comparison object of a pair (pair.json's metadata beside it, or the object itself)."""
    comparison = pair.get("comparison")
    return comparison if isinstance(comparison, dict) else pair


def _verdict(pair: dict[str, Any]) -> Any:
    """The pair's verdict; None while calltap has not compared it yet."""
    return _comparison(pair).get("verdict")


def _origin(url: Any) -> tuple[str, str, int | None] | None:
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = (parts.hostname or "").replace("localhost", "127.0.0.1")
    return parts.scheme, host, port
