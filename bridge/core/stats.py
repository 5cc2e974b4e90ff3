"""Read-only figures the core components offer operations (health, metrics, status).

Components keep running totals; operations take snapshots and never change them, so several
readers (a scrape, /healthz, `picobridge health`) cannot disturb each other or the core.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field

# Agent turns run from about a second to agent.turn_timeout (600 s by default).
TURN_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


@dataclass(frozen=True, slots=True)
class ChatStatus:
    """What the router says of one chat (/status)."""

    session: str | None
    queued: int
    turn_running_for: float | None
    lanes_ahead: int
    worker: str | None = None  # the worker running the chat's turn


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    buckets: tuple[float, ...]
    counts: tuple[int, ...]  # per bucket (not cumulative), plus one for +Inf
    total: float
    count: int


class Histogram:
    """A fixed-bucket histogram that only ever grows (Prometheus semantics)."""

    def __init__(self, buckets: tuple[float, ...] = TURN_BUCKETS) -> None:
        self._buckets = buckets
        self._counts = [0] * (len(buckets) + 1)
        self._sum = 0.0
        self._count = 0

    def observe(self, value: float) -> None:
        value = max(0.0, value)
        self._counts[bisect.bisect_left(self._buckets, value)] += 1
        self._sum += value
        self._count += 1

    def snapshot(self) -> HistogramSnapshot:
        return HistogramSnapshot(self._buckets, tuple(self._counts), self._sum, self._count)


@dataclass(frozen=True, slots=True)
class RouterStats:
    queue_depth: int  # messages waiting for or in a turn
    in_flight: int  # turns running
    busy: Mapping[str, int]  # turns running per worker
    outcomes: Mapping[str, int]  # turns ended, by outcome, since start
    turn_seconds: HistogramSnapshot


@dataclass(frozen=True, slots=True)
class IntakeStats:
    received: Mapping[str, int] = field(default_factory=dict)  # per platform
    duplicates: Mapping[str, int] = field(default_factory=dict)
    denied: Mapping[str, int] = field(default_factory=dict)
    connections: Mapping[str, bool] = field(default_factory=dict)
    # Since when each platform has been disconnected (monotonic); absent while connected.
    disconnected_since: Mapping[str, float] = field(default_factory=dict)
    # Seconds since each platform last delivered anything, and those connected but silent.
    last_heard: Mapping[str, float] = field(default_factory=dict)
    silent: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One reply's fate, for the status page: when, which chat, and whether it arrived
    (never its text)."""

    at: float  # wall clock (time.time())
    chat: str  # chat key
    delivered: bool  # False: the platform refused it for good


@dataclass(frozen=True, slots=True)
class OutboxStats:
    sent: Mapping[str, int] = field(default_factory=dict)  # per platform
    failed: Mapping[str, int] = field(default_factory=dict)
    rate_limited: Mapping[str, int] = field(default_factory=dict)
    recent: tuple[Delivery, ...] = ()  # the latest deliveries and failures, newest last


def bump(totals: dict[str, int], key: str, by: int = 1) -> None:
    totals[key] = totals.get(key, 0) + by
