"""Whether calltap exports spans, and where: `[otel]` in the TOML file, then the standard
OpenTelemetry variables over it (endpoints, headers, timeout, compression, certificates, service
name and resource attributes) (the environment beats the file, as for every calltap setting).

Export is on when a traces endpoint is known: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is),
`OTEL_EXPORTER_OTLP_ENDPOINT` or `[otel] endpoint` (a base URL: `/v1/traces` is appended, as the
OTLP/HTTP specification says). The log-record twin of each finding is sent only when a logs
endpoint is asked for too. `OTEL_SDK_DISABLED=true` turns everything off. Pure: a table and an
environment in, settings or a one-line `ValueError` out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
DEFAULT_SERVICE = "calltap"
DEFAULT_TIMEOUT = 10.0
DEFAULT_QUEUE = 2048
KEYS = frozenset({"endpoint", "traces_endpoint", "logs_endpoint", "logs", "headers", "content",
                  "service_name", "timeout", "max_queue"})


@dataclass(frozen=True, slots=True)
class OtelSettings:
    """Where the spans (and, optionally, the findings' log records) go, and how."""

    traces_endpoint: str
    logs_endpoint: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    content: bool = False
    """Whether findings' details and tool names (which may hold names and values from the
    captured traffic) go out; off, only codes, counts and places do."""
    service_name: str = DEFAULT_SERVICE
    timeout: float = DEFAULT_TIMEOUT
    """Seconds one export request may take (a hanging receiver costs spans, never traffic)."""
    max_queue: int = DEFAULT_QUEUE
    """Spans waiting to be exported; past it new ones are dropped and counted."""
    resource: dict[str, str] = field(default_factory=dict)
    """The resource's attributes (`OTEL_RESOURCE_ATTRIBUTES`, then `service.name`)."""
    compression: str | None = None
    """`gzip` to compress each export request."""
    certificate: str | None = None
    """A CA bundle to trust for an https endpoint (else the system's)."""
    client_certificate: str | None = None
    client_key: str | None = None

    def describe(self) -> dict[str, Any]:
        """For the startup log line: endpoints without credentials, header names only."""
        return {"traces_endpoint": _public(self.traces_endpoint),
                "logs_endpoint": _public(self.logs_endpoint), "headers": sorted(self.headers),
                "content": self.content, "service_name": self.service_name}


def read_otel(table: Any, environ: Mapping[str, str]) -> OtelSettings | None:
    """The settings from `[otel]` (`table`, None when absent) and the environment, or None
    when export is off."""
    table = _table(table)
    if _flag("OTEL_SDK_DISABLED", environ.get("OTEL_SDK_DISABLED", "false")):
        return None
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or table.get("endpoint")
    traces = (environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or table.get("traces_endpoint")
              or _joined(base, TRACES_PATH))
    if not traces:
        return None
    logs = environ.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") or table.get("logs_endpoint")
    if logs is None and _flag("otel.logs", table.get("logs", False)):
        logs = _joined(base, LOGS_PATH)
        if logs is None:
            raise ValueError("otel.logs: needs otel.endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT)")
    headers = dict(_headers("otel.headers", table.get("headers", {})))
    headers.update(_env_headers(environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")))
    headers.update(_env_headers(environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "")))
    timeout = environ.get("OTEL_EXPORTER_OTLP_TIMEOUT")
    service = str(environ.get("OTEL_SERVICE_NAME") or table.get("service_name") or "")
    resource = _env_headers(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""), lower=False)
    resource["service.name"] = service or resource.get("service.name") or DEFAULT_SERVICE
    compression = _variable(environ, "COMPRESSION") or None
    if compression not in (None, "gzip", "none"):
        raise ValueError(f"OTEL_EXPORTER_OTLP_COMPRESSION: expected gzip or none,"
                         f" got {compression!r}")
    return OtelSettings(
        traces_endpoint=_url("traces endpoint", traces),
        logs_endpoint=_url("logs endpoint", logs) if logs else None,
        headers=headers,
        content=_flag("otel.content", table.get("content", False)),
        service_name=resource["service.name"],
        timeout=(_positive("OTEL_EXPORTER_OTLP_TIMEOUT", timeout, 1000.0) if timeout
                 else _positive("otel.timeout", table.get("timeout", DEFAULT_TIMEOUT), 1.0)),
        max_queue=int(_positive("otel.max_queue", table.get("max_queue", DEFAULT_QUEUE), 1.0)),
        resource=resource,
        compression=compression if compression == "gzip" else None,
        certificate=_variable(environ, "CERTIFICATE"),
        client_certificate=_variable(environ, "CLIENT_CERTIFICATE"),
        client_key=_variable(environ, "CLIENT_KEY"),
    )


def _variable(environ: Mapping[str, str], name: str) -> str | None:
    """`OTEL_EXPORTER_OTLP_TRACES_<name>`, else `OTEL_EXPORTER_OTLP_<name>`."""
    return (environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}")
            or environ.get(f"OTEL_EXPORTER_OTLP_{name}") or None)


def _table(table: Any) -> dict[str, Any]:
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ValueError(f"otel: expected a table ([otel]), got {table!r}")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise ValueError(f"otel: unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})")
    return table


def _joined(base: Any, path: str) -> str | None:
    if not base:
        return None
    return str(base).rstrip("/") + path


def _url(name: str, value: Any) -> str:
    text = str(value).strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"otel {name}: expected an http:// or https:// URL, got {value!r}")
    return text


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name}: expected true or false, got {value!r}")


def _positive(name: str, value: Any, scale: float) -> float:
    """A positive number; `scale` turns the unit it is given in into seconds (the standard
    variable counts milliseconds)."""
    try:
        number = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        number = -1.0
    if number <= 0:
        raise ValueError(f"{name}: expected a positive number, got {value!r}")
    return number / scale


def _headers(name: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{name}: expected a table of strings, got {value!r}")
    return {str(key).lower(): item for key, item in value.items()}


def _env_headers(value: str, *, lower: bool = True) -> dict[str, str]:
    """`key1=value1,key2=value2`, each part percent-decoded (W3C Baggage's format, as the
    OpenTelemetry specification asks); a part without `=` is skipped."""
    pairs: dict[str, str] = {}
    for part in value.split(","):
        key, sep, item = part.partition("=")
        if sep and key.strip():
            name = unquote(key.strip())
            pairs[name.lower() if lower else name] = unquote(item.strip())
    return pairs


def _public(url: str | None) -> str | None:
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    port = f":{parts.port}" if parts.port is not None else ""
    return parts._replace(netloc=f"{parts.hostname or ''}{port}").geturl()
