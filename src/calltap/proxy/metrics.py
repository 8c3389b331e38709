"""The metrics addon: Prometheus counters of one proxy instance, in its own registry so instances
never collide. Every metric that tells the two legs apart labels them `leg` (`downstream`,
`upstream`)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from calltap.proxy.backlog import REASONS
from calltap.proxy.hooks import (
    PAUSE_REASONS,
    Addon,
    CaptureFailed,
    LegEnded,
    LegStarted,
    LegUnrecorded,
    PairCompared,
    PairsEvicted,
    Recording,
    RecordingPaused,
    Refused,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Time to first byte of LLM APIs: tens of milliseconds for a cached refusal, seconds for a long
# prompt, tens of seconds for a reasoning model.
FIRST_BYTE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)


class Metrics(Addon):
    """Counters are bumped once per leg or pair, never per relayed chunk."""

    def __init__(self, pending_pairs: Callable[[], float],
                 compared_paths: tuple[str, ...] = (),
                 compare_backlog: Callable[[], float] = lambda: 0,
                 loop_lag: Callable[[], float] = lambda: 0.0) -> None:
        self.compared_paths = compared_paths
        """The routes divergences are counted by: a compared path, never the raw request path
        (Gemini's and Bedrock's carry model ids), so the label's values are this list's."""
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
            "calltap_divergences",
            "Fatal and negotiable findings by code, route and side (downstream: the answer the"
            " client got; request: the request the provider got)",
            ["code", "route", "side"], registry=self.registry)
        self.leg_defects = Counter(
            "calltap_leg_defects",
            "Fatal findings of legs with no partner to compare, by code and route",
            ["code", "route"], registry=self.registry)
        self.capture_failures = Counter(
            "calltap_capture_failures", "Recording or comparison failures (traffic unaffected)",
            registry=self.registry)
        self.orphans = Counter(
            "calltap_orphaned_legs", "Legs that found no partner within the pairing window",
            ["leg"], registry=self.registry)
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
        self.skipped = Counter(
            "calltap_pairs_skipped", "Pairs not compared because the comparison backlog shed"
            " them, by reason (backlog_full, deadline)", ["reason"], registry=self.registry)
        for reason in REASONS:
            self.skipped.labels(reason)
        self.backlog = Gauge(
            "calltap_compare_backlog_pairs", "Comparisons waiting for a worker",
            registry=self.registry)
        self.backlog.set_function(compare_backlog)
        self.first_byte = Histogram(
            "calltap_first_byte_seconds",
            "Seconds from a leg's request start to its first response byte, by leg",
            ["leg"], buckets=FIRST_BYTE_BUCKETS, registry=self.registry)
        self._recording_metrics(loop_lag)

    def _recording_metrics(self, loop_lag: Callable[[], float]) -> None:
        """Whether recording is paused (the quota) or shed (an overload), the legs relayed
        unrecorded meanwhile, and the event loop's lag that decides the shedding."""
        self.paused_gauge = Gauge(
            "calltap_recording_paused", "1 while the disk quota stops recording",
            registry=self.registry)
        self.shed_gauge = Gauge(
            "calltap_recording_shed",
            "1 while new requests are relayed unrecorded because the loop lags or the disk"
            " thread falls behind", registry=self.registry)
        self.unrecorded = Counter(
            "calltap_unrecorded_legs",
            "Legs relayed without being recorded while recording was paused, by leg and reason"
            " (quota, overload)", ["leg", "reason"], registry=self.registry)
        for reason in PAUSE_REASONS:
            for side in ("downstream", "upstream"):
                self.unrecorded.labels(side, reason)
        self.loop_lag = Gauge(
            "calltap_loop_lag_seconds",
            "How late the event loop ran its timers: the worst of the last second's probes",
            registry=self.registry)
        self.loop_lag.set_function(loop_lag)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def leg_started(self, event: LegStarted) -> None:
        self.in_flight.labels(event.leg.side).inc()

    def leg_ended(self, event: LegEnded) -> None:
        leg = event.leg
        self.in_flight.labels(leg.side).dec()
        self.requests.labels(leg.side, str(leg.status or 0)).inc()
        self.bytes_relayed.labels(leg.side).inc(leg.bytes)
        if leg.first_byte_at is not None:
            # The clock values pair.json records; observed once the leg is over, so the
            # relay path reads no clock for this.
            self.first_byte.labels(leg.side).observe(max(0.0, leg.first_byte_at - leg.started))

    def refused(self, event: Refused) -> None:
        self.requests.labels(event.leg, str(event.status)).inc()

    def pair_compared(self, event: PairCompared) -> None:
        if event.verdict is not None:
            self.pairs.labels(event.verdict).inc()
        if event.skipped is not None:
            self.skipped.labels(event.skipped.reason).inc()
        recording = event.recording
        if recording.orphan:
            leg = "downstream" if recording.downstream is not None else "upstream"
            self.orphans.labels(leg).inc()
        route = self.route(recording)
        for alarm in event.alarms:
            if alarm.event == "divergence":
                self.divergences.labels(str(alarm.finding.code), route,
                                        alarm.side or "downstream").inc()
            else:
                self.leg_defects.labels(str(alarm.finding.code), route).inc()

    def route(self, recording: Recording) -> str:
        """The compared path the recording's first leg asked for ("" when none matches)."""
        leg = recording.downstream or (recording.attempts[-1] if recording.attempts else None)
        path = leg.path if leg is not None else ""
        return next((route for route in self.compared_paths if path.endswith(route)), "")

    def capture_failed(self, _event: CaptureFailed) -> None:
        self.capture_failures.inc()

    def recording_paused(self, event: RecordingPaused) -> None:
        gauge = self.paused_gauge if event.reason == "quota" else self.shed_gauge
        gauge.set(1 if event.paused else 0)

    def leg_unrecorded(self, event: LegUnrecorded) -> None:
        self.unrecorded.labels(event.leg.side, event.reason).inc()

    def pairs_evicted(self, event: PairsEvicted) -> None:
        self.evicted.inc(len(event.keys))
