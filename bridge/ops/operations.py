"""What the service manager and the operator see of a running bridge: systemd readiness,
status and watchdog, the health snapshot behind /healthz, and the metrics behind /metrics."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from picobridge.agent.port import AgentState
from picobridge.ops.health import HealthSnapshot, add_health_routes, agent_grace_seconds
from picobridge.ops.metrics import Metrics
from picobridge.ops.sdnotify import Notifier, run_watchdog

if TYPE_CHECKING:
    from picobridge.cli.wiring import Bridge

log = logging.getLogger("picobridge.ops")

# A platform may reconnect by itself for this long before the daemon counts as wedged.
PLATFORM_STALE_AFTER = 300.0
STATUS_EVERY = 5.0


def platforms_up(bridge: Bridge) -> dict[str, bool]:
    return {p: bridge.intake.connections.get(p, False) for p in bridge.adapters}


def agent_down_seconds(bridge: Bridge, now: float | None = None) -> float:
    since = bridge.agent.unready_since
    return 0.0 if since is None else (time.monotonic() if now is None else now) - since


async def snapshot(bridge: Bridge, metrics: Metrics) -> HealthSnapshot:
    sync_metrics(bridge, metrics)
    counts = await bridge.store.counts()
    agent = bridge.agent
    return HealthSnapshot(
        agent_state=agent.state.value,
        agent_pid=agent.pid,
        agent_last_pong=agent.last_pong,
        agent_restarts=agent.restarts,
        agent_down_seconds=agent_down_seconds(bridge),
        platforms=platforms_up(bridge),
        queue_depth=bridge.router.queue_depth,
        in_flight=bridge.router.in_flight,
        outbox_pending=counts.get("outbox_pending", 0),
        oldest_undelivered_age_seconds=await bridge.store.oldest_open_age(),
        agent_grace_seconds=agent_grace_seconds(bridge.settings.agent.ready_timeout),
    )


def sync_metrics(bridge: Bridge, metrics: Metrics) -> None:
    """Carry the components' running totals over to the Prometheus counters."""
    intake, outbox, router = bridge.intake, bridge.outbox, bridge.router
    metrics.sync_platform_totals("messages_in", intake.received)
    metrics.sync_platform_totals("duplicates", intake.duplicates)
    metrics.sync_platform_totals("denied", intake.denied)
    metrics.sync_platform_totals("messages_out", outbox.sent)
    metrics.sync_platform_totals("delivery_failures", outbox.failed)
    metrics.sync_platform_totals("platform_429", outbox.rate_limited)
    metrics.sync_agent_restarts(bridge.agent.restarts)
    metrics.sync_turn_totals(router.turn_outcomes)
    seconds, router.turn_seconds[:] = list(router.turn_seconds), []
    for value in seconds:
        metrics.observe_turn_latency(value)


def watchdog_healthy(bridge: Bridge, now: Callable[[], float] = time.monotonic) -> bool:
    """Keep-alives continue while the agent is ready or restarting within its budget and every
    platform connection is up or reconnecting within a few minutes."""
    t = now()
    agent = bridge.agent
    if agent.state is AgentState.STOPPED:
        return False
    if agent.unready_since is not None and \
            t - agent.unready_since > bridge.settings.agent.restart_budget:
        return False
    return all(t - since <= PLATFORM_STALE_AFTER
               for since in bridge.intake.disconnected_since.values())


def status_line(bridge: Bridge) -> str:
    agent = bridge.agent
    parts = [f"agent {agent.state.value}", f"queue {bridge.router.queue_depth}",
             f"in flight {bridge.router.in_flight}"]
    parts += [f"{p} {'up' if up else 'down'}" for p, up in sorted(platforms_up(bridge).items())]
    return ", ".join(parts)


class Operations:
    """Runs beside the bridge: tells systemd how it is, serves health and metrics."""

    def __init__(self, bridge: Bridge, notifier: Notifier, metrics: Metrics) -> None:
        self._bridge = bridge
        self._notifier = notifier
        self._metrics = metrics
        self._tasks: list[asyncio.Task[None]] = []

    def add_routes(self) -> None:
        """Register /healthz and /metrics; must run before the HTTP server starts."""
        if self._bridge.http is not None:
            add_health_routes(self._bridge.http.app,
                              lambda: snapshot(self._bridge, self._metrics), self._metrics)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._announce_ready(), name="ops-ready"),
            asyncio.create_task(self._status_loop(), name="ops-status"),
            asyncio.create_task(run_watchdog(self._notifier,
                                             lambda: watchdog_healthy(self._bridge)),
                                name="ops-watchdog"),
        ]

    async def stop(self) -> None:
        self._notifier.stopping("shutting down")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _announce_ready(self) -> None:
        bridge = self._bridge
        await bridge.agent.first_ready.wait()
        while not all(platforms_up(bridge).values()):
            bridge.intake.connections_changed.clear()
            await bridge.intake.connections_changed.wait()
        log.info("ready: %s", status_line(bridge))
        self._notifier.ready(status_line(bridge))

    async def _status_loop(self) -> None:
        last = ""
        while True:
            line = status_line(self._bridge)
            if line != last:
                self._notifier.status(line)
                last = line
            await asyncio.sleep(STATUS_EVERY)
