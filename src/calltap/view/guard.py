"""Who may look, and the headers every answer carries.

Loopback only unless the view was started with `--allow-remote` (or `calltap serve` with it):
then every request must carry `Authorization: Bearer <CALLTAP_VIEW_TOKEN>`, and without a token
configured every request is refused. On loopback the Host header must name loopback too, so that
a web page on another site cannot reach the view through a DNS name rebound to 127.0.0.1.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from calltap.config import is_loopback as is_loopback_address

TOKEN_VARIABLE = "CALLTAP_VIEW_TOKEN"
CSP = ("default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; "
       "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class Access:
    """`remote` False: loopback peers and Host names only; True: the token on every request."""

    remote: bool = False
    token: str | None = None


def is_loopback(host: str) -> bool:
    """As the listeners' rule (`config.is_loopback`), for a Host or peer that may come
    bracketed (`[::1]`)."""
    return is_loopback_address(host.strip("[]"))


def guard(access: Access) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """The middleware that enforces `access`."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        refusal = _refusal(request, access)
        if refusal is not None:
            return refusal
        return await handler(request)

    return middleware


def _refusal(request: web.Request, access: Access) -> web.Response | None:
    if access.remote:
        if access.token is None:
            return _text(401, f"the view is remote: set {TOKEN_VARIABLE} to enable it\n")
        offered = request.headers.get("Authorization", "")
        scheme, _, value = offered.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
                value.strip().encode(), access.token.encode()):
            return _text(401, "a bearer token is required\n",
                         {"WWW-Authenticate": 'Bearer realm="calltap"'})
        return None
    if not is_loopback(request.remote or ""):
        return _text(403, "the view answers loopback only (see --allow-remote)\n")
    if not is_loopback(request.url.host or ""):
        return _text(403, "the Host header must name loopback\n")
    return None


def _text(status: int, text: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=text, headers=headers)


async def secure_headers(_request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: the security headers on every answer, errors and streams included."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
