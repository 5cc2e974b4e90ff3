"""Prometheus metrics for /metrics.

The registry is owned by the Metrics object rather than prometheus_client's global one, so
several bridges (tests, `picobridge chat` next to a daemon) never share or collide on series.

Counters follow cumulative totals the core components keep (their `stats()` snapshots), taken
at scrape time: this module reads them and never changes them. The turn-latency histogram is
the router's own, exported as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from picobridge.contract import split_platform
from picobridge.core.stats import HistogramSnapshot

PREFIX = "picobridge_"
WORKER_LABELS = ["worker", "agent"]
# A platform's series by platform and bot (`telegram@work`: platform telegram, bot work).
PLATFORM_LABELS = ["platform", "bot"]
# contract.Outcome values.
OUTCOMES = ("done", "failed", "requeued")

PlatformCounter = Literal[
    "messages_in",
    "messages_out",
    "delivery_failures",
    "platform_429",
    "duplicates",
    "denied",
]
_PLATFORM_COUNTERS: dict[PlatformCounter, str] = {
    "messages_in": "Chat messages received from a platform",
    "messages_out": "Replies delivered to a platform",
    "delivery_failures": "Replies a platform refused for good",
    "platform_429": "Rate-limit (HTTP 429 / retry_after) answers from a platform",
    "duplicates": "Platform messages received again and ignored",
    "denied": "Messages from users who are not allowed",
}


class _TurnLatency(Collector):
    """The router's turn-duration histogram as of the last sync."""

    def __init__(self) -> None:
        self.latest: HistogramSnapshot | None = None

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(
            f"{PREFIX}turn_latency_seconds",
            "Time from dispatching a turn to the agent's answer")
        snap = self.latest
        buckets: list[tuple[str, float]] = []
        running = 0
        bounds = [*snap.buckets, float("inf")] if snap else [float("inf")]
        counts = snap.counts if snap else (0,)
        for bound, count in zip(bounds, counts, strict=True):
            running += count
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        family.add_metric([], buckets, snap.total if snap else 0.0)
        yield family


class Metrics:
    def __init__(self, platforms: Iterable[str]) -> None:
        """`platforms`: the bots that run, by the names the bridge knows them by."""
        self.registry = CollectorRegistry(auto_describe=True)
        self._platform = {
            kind: Counter(f"{PREFIX}{kind}_total", text, PLATFORM_LABELS,
                           registry=self.registry)
            for kind, text in _PLATFORM_COUNTERS.items()
        }
        self._turns = Counter(f"{PREFIX}turns_total", "Agent turns finished, by outcome",
                              ["outcome"], registry=self.registry)
        self._restarts = Counter(f"{PREFIX}agent_restarts_total",
                                 "Agent process restarts, all workers", registry=self.registry)
        # Workers carry the named agent whose pool they are in (`agent`).
        self._worker_restarts = Counter(f"{PREFIX}worker_restarts_total",
                                        "Agent process restarts per worker", WORKER_LABELS,
                                        registry=self.registry)
        self._worker_turns = Counter(f"{PREFIX}worker_turns_total",
                                     "Agent turns answered per worker", WORKER_LABELS,
                                     registry=self.registry)
        self._latency = _TurnLatency()
        self.registry.register(self._latency)
        self._queue_depth = self._gauge("queue_depth", "Messages waiting for or in a turn")
        self._in_flight = self._gauge("in_flight", "Agent turns running")
        self._outbox_pending = self._gauge("outbox_pending", "Replies not yet delivered")
        self._oldest = self._gauge(
            "oldest_undelivered_age_seconds",
            "Age of the oldest message without a delivered reply (0 when there is none)",
        )
        self._agent_up = self._gauge("agent_up", "1 while at least one agent worker is ready")
        self._agent_ready = Gauge(f"{PREFIX}agent_ready",
                                  "1 while the named agent has a ready worker", ["agent"],
                                  registry=self.registry)
        self._worker_up = Gauge(f"{PREFIX}worker_up", "1 while the worker's agent is ready",
                                WORKER_LABELS, registry=self.registry)
        self._worker_busy = Gauge(f"{PREFIX}worker_busy", "Turns running on the worker",
                                  WORKER_LABELS, registry=self.registry)
        self._dead = Gauge(f"{PREFIX}dead_letters", "Messages (kind=message) and replies "
                           "(kind=reply) that failed for good: `picobridge failed list`",
                           ["kind"], registry=self.registry)
        self._last_event = Gauge(f"{PREFIX}platform_last_event_age_seconds",
                                 "Seconds since the platform last delivered anything (an "
                                 "event, a completed poll, a ping's answer)", PLATFORM_LABELS,
                                 registry=self.registry)
        self._synced: dict[str, int] = {}
        # Export zeroes for known label values: a series that appears only after the first
        # event breaks rate() and absent()-style alerts.
        for platform in platforms:
            for counter in self._platform.values():
                counter.labels(*split_platform(platform))
        for outcome in OUTCOMES:
            self._turns.labels(outcome)

    def _gauge(self, name: str, text: str) -> Gauge:
        return Gauge(f"{PREFIX}{name}", text, registry=self.registry)

    # -- cumulative totals kept elsewhere ----------------------------------------------------

    def sync_platform_totals(self, kind: PlatformCounter, totals: Mapping[str, int]) -> None:
        """Bring `kind` up to per-platform running totals, e.g. IntakeStats.received."""
        counter = self._platform[kind]
        for platform, total in totals.items():
            counter.labels(*split_platform(platform)).inc(self._delta(f"{kind}:{platform}", total))

    def sync_turn_totals(self, totals: Mapping[str, int]) -> None:
        """Bring turns_total up to running totals by outcome (RouterStats.outcomes)."""
        for outcome, total in totals.items():
            self._turns.labels(outcome).inc(self._delta(f"turns:{outcome}", total))

    def sync_turn_latency(self, histogram: HistogramSnapshot) -> None:
        self._latency.latest = histogram

    def sync_worker(self, worker: str, restarts: int, turns: int,
                    agent: str = "default") -> None:
        self._worker_restarts.labels(worker, agent).inc(
            self._delta(f"restarts:{worker}", restarts))
        self._worker_turns.labels(worker, agent).inc(self._delta(f"wturns:{worker}", turns))
        total = sum(v for k, v in self._synced.items() if k.startswith("restarts:"))
        self._restarts.inc(self._delta("agent_restarts", total))

    def _delta(self, key: str, total: int) -> int:
        last = self._synced.get(key, 0)
        self._synced[key] = total
        # A smaller total means the source was recreated and counts from zero again.
        return total - last if total >= last else total

    # -- gauges ----------------------------------------------------------------------------

    def set_queue(self, depth: int, in_flight: int) -> None:
        self._queue_depth.set(depth)
        self._in_flight.set(in_flight)

    def set_last_event_age(self, platform: str, seconds: float) -> None:
        self._last_event.labels(*split_platform(platform)).set(seconds)

    def set_dead_letters(self, messages: int, replies: int) -> None:
        self._dead.labels("message").set(messages)
        self._dead.labels("reply").set(replies)

    def set_outbox(self, pending: int, oldest_undelivered_age: float | None) -> None:
        self._outbox_pending.set(pending)
        self._oldest.set(oldest_undelivered_age or 0.0)

    def set_agent_up(self, up: bool) -> None:
        self._agent_up.set(1 if up else 0)

    def set_worker(self, worker: str, *, up: bool, busy: int, agent: str = "default") -> None:
        self._worker_up.labels(worker, agent).set(1 if up else 0)
        self._worker_busy.labels(worker, agent).set(busy)

    def set_agent_ready(self, agent: str, ready: bool) -> None:
        self._agent_ready.labels(agent).set(1 if ready else 0)

    # -- exposition ------------------------------------------------------------------------

    def render(self) -> bytes:
        """The Prometheus text exposition of every series (serve as CONTENT_TYPE_LATEST)."""
        return generate_latest(self.registry)
