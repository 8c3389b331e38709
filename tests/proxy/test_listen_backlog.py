"""A burst of connections while calltap's loop is busy waits in the kernel, not in retries: with
aiohttp's listen backlog of 128 the kernel dropped the handshakes past it, and a gateway's connect
timeout turned the retries into failed requests (3,355 to 7,400 listen overflows and 29 to 127
failed requests in 30 s overload runs, none with the larger backlog)."""

from __future__ import annotations

import asyncio
import select
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

BURST = 512
"""Connections opened at once: four times aiohttp's default backlog."""
HANDSHAKE_WAIT = 0.5
"""Less than the kernel's first retry of a dropped handshake (1 s)."""


def connect_burst(host: str, port: int) -> int:
    """Open `BURST` connections at once; how many completed their handshake within
    `HANDSHAKE_WAIT` seconds."""
    sockets = []
    try:
        for _ in range(BURST):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.connect_ex((host, port))
            sockets.append(sock)
        poller = select.poll()
        for sock in sockets:
            poller.register(sock, select.POLLOUT)
        connected: set[int] = set()
        ends = time.monotonic() + HANDSHAKE_WAIT
        while len(connected) < BURST and (left := ends - time.monotonic()) > 0:
            for fd, _ in poller.poll(left * 1000):
                poller.unregister(fd)
                sock = next(s for s in sockets if s.fileno() == fd)
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    connected.add(fd)
        return len(connected)
    finally:
        for sock in sockets:
            sock.close()


async def test_a_burst_of_connections_is_held_while_the_loop_is_busy(provider, make_tap) -> None:
    _, provider_url = provider
    tap = await make_tap(back=("127.0.0.1", 0), provider=provider_url)
    url = urlsplit(tap.back_url)
    burst = asyncio.get_running_loop().run_in_executor(None, connect_burst, url.hostname,
                                                       url.port)
    time.sleep(HANDSHAKE_WAIT + 0.3)
    assert await burst == min(BURST, somaxconn() + 1)


def somaxconn() -> int:
    """The kernel's cap on a listen backlog (4096 by default since Linux 5.4)."""
    return int(Path("/proc/sys/net/core/somaxconn").read_text())
