"""GET /healthz and GET /metrics on the daemon's local listener (`http.listen`).

/healthz answers 200 or 503 for load balancers, Docker's HEALTHCHECK (`picobridge health`)
and humans, with a JSON body explaining why: "ok", "degraded" (200: some agent workers are
down, the others serve) or "unhealthy" (503: no worker can serve, a platform is gone, or a
component keeps failing). /metrics is the Prometheus exposition. This module holds the
snapshot and its verdict; the routes are in `endpoints`, loaded only when http.listen is set.

Both take a fresh HealthSnapshot per request from a callback, so this module knows nothing of
the store, router or agent and can be tested with plain values.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from picobridge.agent.worker import BACKOFF_CAP

if TYPE_CHECKING:
    from picobridge.ops.metrics import Metrics

log = logging.getLogger("picobridge.health")

READY = "ready"
_TRANSIENT = frozenset({"starting", "restarting"})
# The longest a sound agent is down in one restart: the longest backoff plus the default
# agent.ready_timeout. Longer than that, it is crash-looping or stuck.
DEFAULT_AGENT_GRACE = BACKOFF_CAP + 30.0
SNAPSHOT_TIMEOUT = 5.0

SnapshotFn = Callable[[], Awaitable["HealthSnapshot"]]


@dataclass(frozen=True)
class WorkerHealth:
    name: str
    state: str  # starting / ready / restarting / stopped
    pid: int | None
    last_pong: float | None  # wall clock (time.time()) of the last answered probe
    restarts: int
    # Seconds this worker has been without a ready process (0 while ready). Judged against
    # the grace, so a normal restart is fine and a crash loop is not.
    down_seconds: float = 0.0
    busy: int = 0
    agent: str = "default"  # the named agent whose pool it is in

    def down_too_long(self, grace: float) -> bool:
        if self.state == READY:
            return False
        return self.state not in _TRANSIENT or self.down_seconds > grace


@dataclass(frozen=True)
class HealthSnapshot:
    """What the bridge looks like right now."""

    workers: tuple[WorkerHealth, ...]
    # Every *enabled* platform, connected or not: a platform missing here is not checked.
    platforms: Mapping[str, bool]
    queue_depth: int
    in_flight: int
    outbox_pending: int
    oldest_undelivered_age_seconds: float | None
    agent_grace_seconds: float = DEFAULT_AGENT_GRACE
    # Long-lived tasks that keep failing (see picobridge.supervision).
    failing: tuple[str, ...] = ()
    # Inbound liveness: seconds since each platform last delivered anything, and the
    # platforms connected but silent for longer than they allow (degraded).
    last_heard: Mapping[str, float] = field(default_factory=dict)
    silent: Mapping[str, float] = field(default_factory=dict)
    problems: tuple[str, ...] = field(init=False, default=())
    warnings: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        problems, warnings = _verdict(self)
        object.__setattr__(self, "problems", tuple(problems))
        object.__setattr__(self, "warnings", tuple(warnings))

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def status(self) -> str:
        return "unhealthy" if self.problems else "degraded" if self.warnings else "ok"

    @property
    def agent_up(self) -> bool:
        return any(w.state == READY for w in self.workers)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "agent": _agent_json(self.workers),
            "platforms": {
                name: "connected" if up else "disconnected"
                for name, up in sorted(self.platforms.items())
            },
            "platforms_last_event_seconds": {
                name: round(age, 1) for name, age in sorted(self.last_heard.items())},
            "queue_depth": self.queue_depth,
            "in_flight": self.in_flight,
            "outbox_pending": self.outbox_pending,
            "oldest_undelivered_age_seconds": _rounded(self.oldest_undelivered_age_seconds),
        }


def _agent_json(workers: tuple[WorkerHealth, ...]) -> dict[str, Any]:
    ready = [w for w in workers if w.state == READY]
    lead = ready[0] if ready else (workers[0] if workers else None)
    return {
        "state": READY if ready else (lead.state if lead else "stopped"),
        "pid": lead.pid if lead else None,
        "last_pong": _iso(lead.last_pong) if lead else None,
        "restarts": sum(w.restarts for w in workers),
        "workers_ready": len(ready),
        "workers": [{"name": w.name, "agent": w.agent, "state": w.state, "pid": w.pid,
                     "last_pong": _iso(w.last_pong), "restarts": w.restarts, "busy": w.busy}
                    for w in workers],
        "agents": {name: {"state": READY if any(w.state == READY for w in mine) else
                          mine[0].state,
                          "workers_ready": sum(1 for w in mine if w.state == READY),
                          "workers": len(mine)}
                   for name in sorted({w.agent for w in workers})
                   for mine in [[w for w in workers if w.agent == name]]},
    }


def agent_grace_seconds(ready_timeout: float) -> float:
    """Grace for a configured agent.ready_timeout: one capped backoff plus one start."""
    return BACKOFF_CAP + ready_timeout


def _verdict(snap: HealthSnapshot) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    warnings: list[str] = []
    grace = snap.agent_grace_seconds
    bad = [w for w in snap.workers if w.down_too_long(grace)]
    agents = {w.agent for w in snap.workers}
    down = sorted(a for a in agents if all(w in bad for w in snap.workers if w.agent == a))
    if snap.workers and len(down) == len(agents):
        problems.extend(_describe(w) for w in bad)  # no agent can answer anyone
    else:
        # Some agent answers its chats: the bridge works, for some of them.
        if len(agents) > 1:
            warnings.extend(f"agent {a} is down: its chats wait" for a in down)
        warnings.extend(_describe(w) for w in bad)
        warnings.extend(f"worker {w.name} is {w.state}" for w in snap.workers
                        if w.state != READY and w not in bad and len(snap.workers) > 1)
    problems.extend(f"{name} disconnected" for name, up in sorted(snap.platforms.items())
                    if not up)
    warnings.extend(f"{name} connected but silent for {seconds:.0f}s"
                    for name, seconds in sorted(snap.silent.items())
                    if snap.platforms.get(name, False))
    problems.extend(f"{name} keeps failing" for name in snap.failing)
    return problems, warnings


def _describe(worker: WorkerHealth) -> str:
    who = "agent" if worker.name == "agent" else f"worker {worker.name}"
    if worker.state not in _TRANSIENT:
        return f"{who} is {worker.state}"
    return (f"{who} not ready for {worker.down_seconds:.0f}s ({worker.state}, "
            f"{worker.restarts} restarts)")


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def apply_snapshot(metrics: Metrics, snap: HealthSnapshot) -> None:
    """Refresh the gauges from a snapshot, so /metrics is current without a polling task."""
    metrics.set_queue(snap.queue_depth, snap.in_flight)
    metrics.set_outbox(snap.outbox_pending, snap.oldest_undelivered_age_seconds)
    metrics.set_agent_up(snap.agent_up)
    for platform, age in snap.last_heard.items():
        metrics.set_last_event_age(platform, age)
    for worker in snap.workers:
        metrics.set_worker(worker.name, up=worker.state == READY, busy=worker.busy,
                           agent=worker.agent)
    for agent in {w.agent for w in snap.workers}:
        metrics.set_agent_ready(agent, any(w.state == READY for w in snap.workers
                                           if w.agent == agent))


async def take_snapshot(snapshot: SnapshotFn,
                        timeout: float = SNAPSHOT_TIMEOUT) -> HealthSnapshot | str:
    """The snapshot, or why there is none (a stuck database must not hang the prober)."""
    try:
        async with asyncio.timeout(timeout):
            return await snapshot()
    except TimeoutError:
        return f"no snapshot within {timeout:g}s"
    except Exception as exc:
        log.exception("health snapshot failed")
        return f"snapshot failed: {exc.__class__.__name__}"
