"""POST an OTLP/HTTP export body to one endpoint, on the shipper's thread: one kept-alive
connection, gzip when asked, TLS with the standard variables' certificates.

A failure is a `False`, never an exception and never a wait past `timeout`: the shipper counts
the batch dropped and goes on. The only retry is the one a kept-alive connection needs when the
receiver closed it while idle (the request is sent again once, on a new connection).
"""

from __future__ import annotations

import gzip
import http.client
import ssl
from urllib.parse import urlsplit

from calltap.otel.settings import OtelSettings

RETRYABLE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class Poster:
    """One endpoint's connection; `post(body)` says whether the receiver took it (2xx)."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float, *,
                 compression: str | None = None, certificate: str | None = None,
                 client_certificate: str | None = None, client_key: str | None = None) -> None:
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.timeout = timeout
        self.gzip = compression == "gzip"
        self.headers = {**headers, "Content-Type": "application/x-protobuf",
                        "User-Agent": "calltap-otlp"}
        if self.gzip:
            self.headers["Content-Encoding"] = "gzip"
        self.context: ssl.SSLContext | None = None
        if self.https:
            self.context = ssl.create_default_context(cafile=certificate)
            if client_certificate:
                self.context.load_cert_chain(client_certificate, client_key)
        self._connection: http.client.HTTPConnection | None = None
        self.last_error: str | None = None

    @classmethod
    def to(cls, url: str, settings: OtelSettings) -> Poster:
        """A poster to `url` with the settings' headers, timeout, compression and TLS files."""
        return cls(url, settings.headers, settings.timeout, compression=settings.compression,
                   certificate=settings.certificate,
                   client_certificate=settings.client_certificate,
                   client_key=settings.client_key)

    def post(self, body: bytes) -> bool:
        payload = gzip.compress(body, compresslevel=5) if self.gzip else body
        reused = self._connection is not None
        try:
            return self._send(payload)
        except RETRYABLE as exc:
            self.close()
            if not reused:
                self.last_error = type(exc).__name__
                return False
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            self.last_error = type(exc).__name__
            return False
        try:
            return self._send(payload)
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            self.last_error = type(exc).__name__
            return False

    def _send(self, payload: bytes) -> bool:
        connection = self._connect()
        connection.request("POST", self.path, payload, self.headers)
        response = connection.getresponse()
        response.read()
        if response.will_close:
            self.close()
        if 200 <= response.status < 300:
            return True
        self.last_error = f"HTTP {response.status}"
        return False

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            if self.https:
                self._connection = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self.timeout, context=self.context)
            else:
                self._connection = http.client.HTTPConnection(self.host, self.port,
                                                              timeout=self.timeout)
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
