"""Prometheus metrics for /metrics.

The registry is owned by the Metrics object rather than prometheus_client's global one, so
several bridges (tests, `picobridge chat` next to a daemon) never share or collide on series.

Counters can be fed two ways: an event method at the moment something happens, or a `sync_*`
call with a cumulative total that some component already keeps (Intake.received, the agent's
restarts), typically at scrape time. Use one way per counter, never both, or it counts twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PREFIX = "picobridge_"
PLATFORMS = ("telegram", "slack")
# adapters.base.Outcome values, spelled out so this module stays free of adapter imports.
OUTCOMES = ("done", "failed", "requeued")
# Agent turns run from about a second to agent.turn_timeout (600 s by default).
TURN_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

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


class Metrics:
    def __init__(self, platforms: Iterable[str] = PLATFORMS) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._platform = {
            kind: Counter(f"{PREFIX}{kind}_total", text, ["platform"], registry=self.registry)
            for kind, text in _PLATFORM_COUNTERS.items()
        }
        self._turns = Counter(
            f"{PREFIX}turns_total",
            "Agent turns finished, by outcome",
            ["outcome"],
            registry=self.registry,
        )
        self._restarts = Counter(
            f"{PREFIX}agent_restarts_total", "Agent process restarts", registry=self.registry
        )
        self._latency = Histogram(
            f"{PREFIX}turn_latency_seconds",
            "Time from dispatching a turn to the agent's answer",
            buckets=TURN_BUCKETS,
            registry=self.registry,
        )
        self._queue_depth = self._gauge("queue_depth", "Messages waiting for or in a turn")
        self._in_flight = self._gauge("in_flight", "Agent turns running")
        self._outbox_pending = self._gauge("outbox_pending", "Replies not yet delivered")
        self._oldest = self._gauge(
            "oldest_undelivered_age_seconds",
            "Age of the oldest message without a delivered reply (0 when there is none)",
        )
        self._agent_up = self._gauge("agent_up", "1 while the agent is ready, else 0")
        self._synced: dict[str, int] = {}
        # Export zeroes for known label values: a series that appears only after the first
        # event breaks rate() and absent()-style alerts.
        for platform in platforms:
            for counter in self._platform.values():
                counter.labels(platform)
        for outcome in OUTCOMES:
            self._turns.labels(outcome)

    def _gauge(self, name: str, text: str) -> Gauge:
        return Gauge(f"{PREFIX}{name}", text, registry=self.registry)

    # -- events ----------------------------------------------------------------------------

    def message_in(self, platform: str) -> None:
        self._platform["messages_in"].labels(platform).inc()

    def message_out(self, platform: str) -> None:
        self._platform["messages_out"].labels(platform).inc()

    def delivery_failed(self, platform: str) -> None:
        self._platform["delivery_failures"].labels(platform).inc()

    def rate_limited(self, platform: str) -> None:
        self._platform["platform_429"].labels(platform).inc()

    def duplicate(self, platform: str) -> None:
        self._platform["duplicates"].labels(platform).inc()

    def denied(self, platform: str) -> None:
        self._platform["denied"].labels(platform).inc()

    def turn_finished(self, outcome: str, seconds: float | None = None) -> None:
        self._turns.labels(outcome).inc()
        if seconds is not None:
            self.observe_turn_latency(seconds)

    def observe_turn_latency(self, seconds: float) -> None:
        self._latency.observe(max(0.0, seconds))

    def agent_restarted(self) -> None:
        self._restarts.inc()

    # -- cumulative totals kept elsewhere ----------------------------------------------------

    def sync_platform_totals(self, kind: PlatformCounter, totals: Mapping[str, int]) -> None:
        """Bring `kind` up to per-platform running totals, e.g. Intake.received."""
        counter = self._platform[kind]
        for platform, total in totals.items():
            counter.labels(platform).inc(self._delta(f"{kind}:{platform}", total))

    def sync_turn_totals(self, totals: Mapping[str, int]) -> None:
        """Bring turns_total up to running totals by outcome (Router.turn_outcomes)."""
        for outcome, total in totals.items():
            self._turns.labels(outcome).inc(self._delta(f"turns:{outcome}", total))

    def sync_agent_restarts(self, total: int) -> None:
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

    def set_outbox(self, pending: int, oldest_undelivered_age: float | None) -> None:
        self._outbox_pending.set(pending)
        self._oldest.set(oldest_undelivered_age or 0.0)

    def set_agent_up(self, up: bool) -> None:
        self._agent_up.set(1 if up else 0)

    # -- exposition ------------------------------------------------------------------------

    def render(self) -> bytes:
        """The Prometheus text exposition of every series (serve as CONTENT_TYPE_LATEST)."""
        return generate_latest(self.registry)
