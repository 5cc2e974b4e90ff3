"""What the service manager and the operator see of a running bridge: systemd readiness,
status and watchdog, and the health snapshot behind /healthz and /metrics (served by
`endpoints`).

Operations read the core through `Sources`, a handful of read-only views the wiring hands
over; they change nothing in it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from picobridge.agent.port import WorkerInfo, WorkerState
from picobridge.core.stats import IntakeStats, OutboxStats, RouterStats
from picobridge.ops.health import HealthSnapshot, WorkerHealth
from picobridge.ops.sdnotify import Notifier, run_watchdog

if TYPE_CHECKING:
    from picobridge.ops.metrics import Metrics

log = logging.getLogger("picobridge.ops")

# A platform may reconnect by itself for this long before the daemon counts as wedged.
PLATFORM_STALE_AFTER = 300.0
STATUS_EVERY = 5.0


class StoreFigures(Protocol):
    async def counts(self) -> dict[str, int]: ...

    async def oldest_open_age(self) -> float | None: ...

    async def dead_letter_counts(self) -> dict[str, int]: ...


@dataclass(frozen=True)
class Sources:
    """Read-only views of the running bridge."""

    platforms: Sequence[str]  # the enabled ones
    workers: Callable[[], list[WorkerInfo]]
    router: Callable[[], RouterStats]
    intake: Callable[[], IntakeStats]
    outbox: Callable[[], OutboxStats]
    store: StoreFigures
    failing: Callable[[], tuple[str, ...]]  # long-lived tasks that keep failing
    first_ready: Callable[[], Awaitable[None]]  # returns once any worker has been ready
    connections_changed: asyncio.Event
    restart_budget: float
    agent_grace: float


def platforms_up(sources: Sources) -> dict[str, bool]:
    connections = sources.intake().connections
    return {p: connections.get(p, False) for p in sources.platforms}


def _worker_health(info: WorkerInfo, busy: int, now: float) -> WorkerHealth:
    down = 0.0 if info.down_since is None else max(0.0, now - info.down_since)
    return WorkerHealth(info.name, info.state.value, info.pid, info.last_pong, info.restarts,
                        down, busy, info.agent)


async def snapshot(sources: Sources, metrics: Metrics) -> HealthSnapshot:
    router = sources.router()
    sync_metrics(sources, metrics, router)
    counts = await sources.store.counts()
    dead = await sources.store.dead_letter_counts()
    metrics.set_dead_letters(dead["message"], dead["reply"])
    now = time.monotonic()
    workers = tuple(_worker_health(w, router.busy.get(w.name, 0), now)
                    for w in sources.workers())
    return HealthSnapshot(
        workers=workers,
        platforms=platforms_up(sources),
        queue_depth=router.queue_depth,
        in_flight=router.in_flight,
        outbox_pending=counts.get("outbox_pending", 0),
        oldest_undelivered_age_seconds=await sources.store.oldest_open_age(),
        agent_grace_seconds=sources.agent_grace,
        failing=sources.failing(),
        last_heard=sources.intake().last_heard,
        silent=sources.intake().silent,
    )


def sync_metrics(sources: Sources, metrics: Metrics, router: RouterStats) -> None:
    """Carry the components' running totals over to the Prometheus series."""
    intake, outbox = sources.intake(), sources.outbox()
    metrics.sync_platform_totals("messages_in", intake.received)
    metrics.sync_platform_totals("duplicates", intake.duplicates)
    metrics.sync_platform_totals("denied", intake.denied)
    metrics.sync_platform_totals("messages_out", outbox.sent)
    metrics.sync_platform_totals("delivery_failures", outbox.failed)
    metrics.sync_platform_totals("platform_429", outbox.rate_limited)
    metrics.sync_turn_totals(router.outcomes)
    metrics.sync_turn_latency(router.turn_seconds)
    for worker in sources.workers():
        metrics.sync_worker(worker.name, worker.restarts, worker.turns, worker.agent)


def watchdog_healthy(sources: Sources, now: Callable[[], float] = time.monotonic) -> bool:
    """Keep-alives continue while some worker is ready or restarting within its budget, no
    component keeps failing, and every platform connection is up or reconnecting within a
    few minutes."""
    t = now()
    workers = sources.workers()
    if not any(_within_budget(w, t, sources.restart_budget) for w in workers):
        return False
    if sources.failing():
        return False
    return all(t - since <= PLATFORM_STALE_AFTER
               for since in sources.intake().disconnected_since.values())


def _within_budget(worker: WorkerInfo, now: float, budget: float) -> bool:
    if worker.state is WorkerState.STOPPED:
        return False
    return worker.down_since is None or now - worker.down_since <= budget


def status_line(sources: Sources) -> str:
    workers = sources.workers()
    ready = sum(1 for w in workers if w.state is WorkerState.READY)
    if len(workers) == 1:
        agent = f"agent {workers[0].state.value}"
    else:
        agent = f"agent {'ready' if ready else 'down'} ({ready}/{len(workers)} workers)"
    router = sources.router()
    parts = [agent, f"queue {router.queue_depth}", f"in flight {router.in_flight}"]
    parts += [f"{p} {'up' if up else 'down'}" for p, up in sorted(platforms_up(sources).items())]
    return ", ".join(parts)


class Operations:
    """Runs beside the bridge: tells systemd how it is (health and metrics are served by
    `endpoints` when there is a listener)."""

    def __init__(self, sources: Sources, notifier: Notifier) -> None:
        self._sources = sources
        self._notifier = notifier
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._announce_ready(), name="ops-ready"),
            asyncio.create_task(self._status_loop(), name="ops-status"),
            asyncio.create_task(run_watchdog(self._notifier,
                                             lambda: watchdog_healthy(self._sources)),
                                name="ops-watchdog"),
        ]

    async def stop(self) -> None:
        self._notifier.stopping("shutting down")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _announce_ready(self) -> None:
        sources = self._sources
        await sources.first_ready()
        while not all(platforms_up(sources).values()):
            sources.connections_changed.clear()
            await sources.connections_changed.wait()
        log.info("ready: %s", status_line(sources))
        self._notifier.ready(status_line(sources))

    async def _status_loop(self) -> None:
        last = ""
        while True:
            line = status_line(self._sources)
            if line != last:
                self._notifier.status(line)
                last = line
            await asyncio.sleep(STATUS_EVERY)
