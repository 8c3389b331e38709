"""Prometheus metrics of one proxy instance, in its own registry so instances never collide."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """Counters are bumped once per leg or pair, never per relayed chunk."""

    def __init__(self, pending_pairs: Callable[[], float]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "calltap_requests", "Relayed requests by leg and response status",
            ["leg", "status"], registry=self.registry)
        self.bytes_relayed = Counter(
            "calltap_relayed_bytes", "Response body bytes relayed, by leg",
            ["leg"], registry=self.registry)
        self.pairs = Counter(
            "calltap_pairs", "Compared pairs (or single legs checked) by verdict",
            ["verdict"], registry=self.registry)
        self.divergences = Counter(
            "calltap_divergences", "Fatal and negotiable findings by code",
            ["code"], registry=self.registry)
        self.leg_defects = Counter(
            "calltap_leg_defects", "Fatal findings of legs with no partner to compare, by code",
            ["code"], registry=self.registry)
        self.capture_failures = Counter(
            "calltap_capture_failures", "Recording or comparison failures (traffic unaffected)",
            registry=self.registry)
        self.orphans = Counter(
            "calltap_orphaned_legs", "Legs that found no partner within the pairing window",
            ["side"], registry=self.registry)
        self.evicted = Counter(
            "calltap_evicted_pairs", "Front legs dropped unpaired to keep max_pending_pairs",
            registry=self.registry)
        self.in_flight = Gauge(
            "calltap_streams_in_flight", "Responses being relayed right now, by leg",
            ["leg"], registry=self.registry)
        self.pending = Gauge(
            "calltap_pending_pairs", "Front legs waiting for their upstream leg",
            registry=self.registry)
        self.pending.set_function(pending_pairs)
        self.recording_paused = Gauge(
            "calltap_recording_paused", "1 while the disk quota stops recording",
            registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)
