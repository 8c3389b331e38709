"""calltap serve's settings: one frozen `Config`, loaded from defaults, a TOML file, env and flags.

Precedence, lowest first: built-in defaults, the TOML file (`--config`, else `config/calltap.toml`
in the working directory when it exists), `CALLTAP_<FIELD>` environment variables, command-line
flags. Every problem is a `ConfigError` with one line that names the setting, raised before any
listener opens.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from yarl import URL

from calltap.dialects import COMPARED_PATHS
from calltap.otel.settings import OtelSettings, read_otel
from calltap.redact import BodyMasker
from calltap.storage import BucketURL, is_bucket

Address = tuple[str, int]

DEFAULT_FRONT: Address = ("127.0.0.1", 8700)
DEFAULT_BACK: Address = ("127.0.0.1", 8701)
DEFAULT_ADMIN: Address = ("127.0.0.1", 8702)
DEFAULT_CONFIG_FILE = Path("config/calltap.toml")
ENV_PREFIX = "CALLTAP_"
OFF = "off"


class ConfigError(ValueError):
    """A setting calltap cannot run with; the message is the one line shown to the user."""


@dataclass(frozen=True, slots=True)
class Config:
    """Everything `calltap serve` needs. A listener set to None is off."""

    front: Address | None = None
    """Where clients connect instead of the gateway (needs `gateway`)."""
    gateway: str | None = None
    """The gateway's base URL; the front relays to it."""
    back: Address | None = None
    """Where the gateway connects instead of the provider (needs `provider`)."""
    provider: str | None = None
    """The provider's base URL; the back relays to it."""
    admin: Address | None = None
    """Health and metrics listener."""
    allow_remote: bool = False
    """Listen on addresses other than loopback. Off by default: the listeners have no
    authentication and the recordings hold prompts and answers, so exposing them is a choice
    made explicitly (`--allow-remote`)."""
    recordings: Path = Path("recordings")
    """The local tree captures are written to: the recordings themselves, or with a bucket the
    spool they wait in until uploaded."""
    bucket: str | None = None
    """`s3://BUCKET[/PREFIX]` when `recordings` named one (set through `recordings`, never on
    its own): finalized pairs are uploaded there from the spool."""
    spool: Path = Path("recordings-spool")
    """With a bucket, where captures wait (the on-disk layout, modes and quota of a local
    tree) until every object of the pair is stored."""
    keep: str = "all"
    """`all`, or `diverged`: equal pairs are kept only at `keep_equal_sample`'s rate (diverged,
    inconclusive, orphaned and defective ones always)."""
    keep_equal_sample: float = 0.01
    """With keep = diverged, the share of equal pairs kept, chosen by a hash of the request id."""
    replica: str = ""
    """This writer's name in the index of pairs (its segments' names, each row's `replica`);
    empty for the HOSTNAME variable (a pod's name in Kubernetes), else the host name."""
    index_interval: float = 60.0
    """Seconds between two index segments this replica writes (rows wait in the spool)."""
    compared_paths: tuple[str, ...] = COMPARED_PATHS
    """Request-path suffixes whose legs are paired and compared (by default every dialect's
    endpoints); everything else is only relayed."""
    record_other: bool = False
    """Also record requests to paths that are not compared."""
    pairing_window: float = 30.0
    """Seconds a front leg waits for its upstream leg before it is an orphan."""
    grace_period: float = 10.0
    """Seconds in-flight streams get to finish on shutdown before they are cut."""
    connect_timeout: float = 10.0
    read_timeout: float = 300.0
    """Seconds without a byte from upstream before the leg ends as `timeout`."""
    max_capture_bytes: int = 64 * 1024 * 1024
    """Per leg and body; past it the leg is still relayed but no longer recorded."""
    max_request_body: int = 32 * 1024 * 1024
    """Request bodies past this size are refused with 413 and never reach the upstream whole
    (0 means no limit)."""
    max_header_bytes: int = 64 * 1024
    """The request line and headers together; past it the request is refused with 431."""
    max_header_line: int = 16 * 1024
    """One request header (its name and value together) or the request line; past it the
    request is refused with 431."""
    max_pending_pairs: int = 10_000
    max_fingerprint_body: int = 8 * 1024 * 1024
    """Request bodies up to this size are read whole (fingerprinted, then forwarded); larger
    ones are streamed through and pair only by header or traceparent."""
    disk_quota_bytes: int = 10 * 1024 * 1024 * 1024
    """Recordings tree size past which calltap relays without recording (0 means no quota)."""
    max_loop_lag: float = 0.05
    """Seconds the event loop may run late on its timers, at six of eight probes, before
    calltap relays new requests unrecorded (`recording.paused`, reason `overload`) until the lag
    has stayed under half of it for 2 s: recording never queues the traffic it watches. 0 leaves
    the lag out (the disk thread's backlog still sheds recording past a quarter of its bound)."""
    upstream_connections: int = 512
    """Connection pool size per upstream."""
    compare_workers: int = 2
    """Worker processes running the comparator, so a huge pair never stalls the relay loop."""
    compare_niceness: int = 10
    """How much lower than the relay's the workers' CPU priority is (`nice`, 0 to 19): under a
    burst the relay keeps the cores and the comparisons catch up afterwards."""
    compare_when_idle: bool = True
    """Run the workers under Linux's SCHED_IDLE policy instead (`compare_niceness` is then
    unused): they get only the CPU time nothing else wants, so on a saturated machine the
    comparisons wait for the load to pass and the relay keeps its throughput."""
    compare_deadline: float = 60.0
    """Seconds after its capture closed by which a comparison must have started; a pair still
    waiting for a worker then is not compared (`pair.skipped`, reason `deadline`), so under a
    load past what the workers can compare the backlog stays bounded and fresh."""
    max_compare_backlog: int = 1000
    """Comparisons that may wait for a worker; a capture closing while this many wait is not
    compared (`pair.skipped`, reason `backlog_full`). Either way its files and pair.json are
    kept, for `calltap scan` to compare later."""
    redact_headers: tuple[str, ...] = ()
    """Header names redacted in pair.json on top of the built-in secret headers."""
    mask_body_patterns: tuple[str, ...] = ()
    """Regular expressions masked in recorded request bodies."""
    log_level: str = "info"
    otel: OtelSettings | None = None
    """Where each pair's span goes over OTLP/HTTP: set from `[otel]` in the TOML file and the
    standard `OTEL_*` variables, never on its own; None (the default) exports nothing."""

    def validate(self) -> Config:
        """Return self when the settings are usable together, else raise ConfigError."""
        if self.front is not None and self.gateway is None:
            raise ConfigError("front listener needs a gateway URL (--gateway)")
        if self.back is not None and self.provider is None:
            raise ConfigError("back listener needs a provider URL (--provider)")
        if self.front is None and self.back is None:
            raise ConfigError("nothing to relay: set --gateway URL and/or --provider URL")
        for name in ("gateway", "provider"):
            value = getattr(self, name)
            if value is not None:
                parse_url(name, value)
        for name in ("pairing_window", "grace_period", "connect_timeout", "read_timeout",
                     "compare_deadline", "index_interval"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("max_capture_bytes", "max_fingerprint_body", "disk_quota_bytes",
                     "max_request_body", "max_loop_lag"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("max_pending_pairs", "upstream_connections", "compare_workers",
                     "max_compare_backlog"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_header_line < MIN_HEADER_LINE:
            raise ConfigError(f"max_header_line must be at least {MIN_HEADER_LINE},"
                              f" got {self.max_header_line}")
        if self.max_header_bytes < self.max_header_line:
            raise ConfigError(f"max_header_bytes ({self.max_header_bytes}) must be at least"
                              f" max_header_line ({self.max_header_line})")
        if not self.allow_remote:
            for name in ADDRESS_FIELDS:
                address = getattr(self, name)
                if address is not None and not is_loopback(address[0]):
                    raise ConfigError(
                        f"{name}: {address[0]} is not a loopback address and calltap has no"
                        f" authentication; pass --allow-remote (or allow_remote = true) to"
                        f" listen there anyway")
        if not 0 <= self.compare_niceness <= MAX_NICENESS:
            raise ConfigError(f"compare_niceness must be 0 to {MAX_NICENESS},"
                              f" got {self.compare_niceness}")
        try:
            BodyMasker(self.mask_body_patterns)
        except (re.error, ValueError) as exc:
            raise ConfigError(f"mask_body_patterns: {exc}") from None
        if self.keep not in KEEP_CHOICES:
            raise ConfigError(f"keep must be one of {', '.join(KEEP_CHOICES)}, got {self.keep!r}")
        if not 0.0 <= self.keep_equal_sample <= 1.0:
            raise ConfigError(f"keep_equal_sample must be 0 to 1, got {self.keep_equal_sample}")
        if self.log_level not in LOG_LEVELS:
            raise ConfigError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
        return self


LOG_LEVELS = ("debug", "info", "warning", "error")
KEEP_CHOICES = ("all", "diverged")
MAX_NICENESS = 19
MIN_HEADER_LINE = 1024
FIELDS = {f.name: f for f in fields(Config) if f.name not in ("bucket", "otel")}
"""The settings a file, the environment or a flag may name (`bucket` comes from `recordings`)."""
ADDRESS_FIELDS = ("front", "back", "admin")
DEFAULT_LISTENERS = {"front": DEFAULT_FRONT, "back": DEFAULT_BACK, "admin": DEFAULT_ADMIN}


def parse_address(name: str, value: str) -> Address | None:
    """`HOST:PORT` (`[::1]:8700` for IPv6) or `off`."""
    text = value.strip()
    if text.lower() == OFF:
        return None
    match = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d{1,5})|([^\s:\[\]]+):(\d{1,5})", text)
    if match is None:
        raise ConfigError(f"{name}: expected HOST:PORT or 'off', got {value!r}")
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    if port > 65535:
        raise ConfigError(f"{name}: port {port} out of range")
    return host, port


def is_loopback(host: str) -> bool:
    """True for `localhost` and for IPv4/IPv6 loopback addresses; any other name or address,
    the wildcard `0.0.0.0` / `::` included, reaches beyond this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_url(name: str, value: str) -> str:
    """An absolute http(s) base URL, returned without a trailing slash."""
    text = value.strip()
    if re.search(r"[\s\x00-\x1f\x7f]", text):
        raise ConfigError(f"{name}: unparseable URL {value!r}: it contains whitespace")
    try:
        url = URL(text)
        url.port  # noqa: B018 - a bad port only raises when read
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{name}: unparseable URL {value!r}: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(f"{name}: expected an http:// or https:// URL with a host, got {value!r}")
    if url.query_string or url.fragment:
        raise ConfigError(f"{name}: a base URL takes no query or fragment, got {value!r}")
    return str(url).rstrip("/")


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}: expected true or false, got {value!r}")


def _parse_list(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ConfigError(f"{name}: expected a list of strings, got {value!r}")


def _parse_number(name: str, value: Any, kind: type) -> int | float:
    if isinstance(value, bool):
        raise ConfigError(f"{name}: expected a number, got {value!r}")
    if isinstance(value, int | float) and (kind is float or isinstance(value, int)):
        return kind(value)
    try:
        return kind(str(value).strip().replace("_", ""))
    except ValueError:
        raise ConfigError(f"{name}: expected {'an integer' if kind is int else 'a number'}, "
                          f"got {value!r}") from None


def coerce(name: str, value: Any) -> Any:
    """Turn a TOML value or an env/flag string into the field's type."""
    if name in ADDRESS_FIELDS:
        if not isinstance(value, str):
            raise ConfigError(f"{name}: expected \"HOST:PORT\" or \"off\", got {value!r}")
        return parse_address(name, value)
    if name in ("gateway", "provider"):
        if not isinstance(value, str):
            raise ConfigError(f"{name}: expected a URL string, got {value!r}")
        return None if value.strip().lower() in ("", OFF) else parse_url(name, value)
    if name in ("recordings", "spool"):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{name}: expected a directory path, got {value!r}")
        if name == "recordings" and is_bucket(value):
            try:
                return str(BucketURL.parse(value.strip()))
            except ValueError as exc:
                raise ConfigError(f"recordings: {exc}") from None
        return Path(value)
    if name == "keep":
        return str(value).strip().lower()
    if name in ("record_other", "allow_remote", "compare_when_idle"):
        return _parse_bool(name, value)
    if name in ("compared_paths", "redact_headers", "mask_body_patterns"):
        return _parse_list(name, value)
    if name == "log_level":
        return str(value).strip().lower()
    if name == "replica":
        return str(value).strip()
    default = FIELDS[name].default
    return _parse_number(name, value, type(default))


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    unknown = sorted(set(data) - set(FIELDS) - {"otel"})
    if unknown:
        raise ConfigError(f"config file {path}: unknown key {unknown[0]!r}")
    return data


def read_env(environ: Mapping[str, str]) -> dict[str, str]:
    return {
        name: environ[ENV_PREFIX + name.upper()]
        for name in FIELDS
        if ENV_PREFIX + name.upper() in environ
    }


def load_config(
    config_file: Path | None = None,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Merge defaults, file, environment and flag overrides (raw strings), then validate.

    The front runs only when a gateway is configured and the back only with a provider, so
    `--provider URL` alone runs the back and admin listeners (single-leg mode); their
    addresses from the defaults, the file or the environment wait unused otherwise. Asking for
    a listener with a flag but not for its upstream is an error.
    """
    environ = os.environ if environ is None else environ
    if config_file is None and DEFAULT_CONFIG_FILE.is_file():
        config_file = DEFAULT_CONFIG_FILE
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    values: dict[str, Any] = dict(DEFAULT_LISTENERS)
    from_file = read_toml(config_file) if config_file else {}
    try:
        values["otel"] = read_otel(from_file.pop("otel", None), environ)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for layer in (from_file, read_env(environ), flags):
        for name, raw in layer.items():
            values[name] = coerce(name, raw)
    for name, needs in (("front", "gateway"), ("back", "provider")):
        if values.get(needs) is None and name not in flags:
            values[name] = None
    if isinstance(values.get("recordings"), str):
        values["bucket"] = values["recordings"]
        values["recordings"] = values.get("spool", FIELDS["spool"].default)
    return replace(Config(), **values).validate()


def public_url(url: str | None) -> str | None:
    """A base URL without the password it may carry, for logs and /healthz."""
    if url is None:
        return None
    parsed = URL(url)
    return str(parsed.with_password("[redacted]")) if parsed.password else url


def describe(config: Config) -> dict[str, Any]:
    """The settings as JSON-ready values, for the startup log line."""
    out: dict[str, Any] = {}
    for name in ("bucket", *FIELDS):
        value = getattr(config, name)
        if name in ("gateway", "provider"):
            value = public_url(value)
        elif isinstance(value, tuple) and name in ADDRESS_FIELDS:
            value = f"{value[0]}:{value[1]}"
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    out["mask_body_patterns"] = len(config.mask_body_patterns)
    out["otel"] = config.otel.describe() if config.otel is not None else None
    return out

