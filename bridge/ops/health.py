"""GET /healthz and GET /metrics on the daemon's local listener (`http.listen`).

/healthz answers 200 or 503 for load balancers, Docker's HEALTHCHECK (`picobridge health`)
and humans, with a JSON body explaining why. /metrics is the Prometheus exposition.

Both take a fresh HealthSnapshot per request from a callback, so this module knows nothing of
the store, router or agent and can be tested with plain values.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from picobridge.agent.worker import BACKOFF_CAP
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
class HealthSnapshot:
    """What the bridge looks like right now."""

    agent_state: str  # AgentState value: starting / ready / restarting / stopped
    agent_pid: int | None
    agent_last_pong: float | None  # wall clock (time.time()) of the last pong
    agent_restarts: int
    # Seconds the agent has been without a ready process (0 while ready). Judged against
    # agent_grace_seconds, so a normal restart is healthy and a crash loop is not.
    agent_down_seconds: float
    # Every *enabled* platform, connected or not: a platform missing here is not checked.
    platforms: Mapping[str, bool]
    queue_depth: int
    in_flight: int
    outbox_pending: int
    oldest_undelivered_age_seconds: float | None
    agent_grace_seconds: float = DEFAULT_AGENT_GRACE
    problems: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "problems", tuple(_problems(self)))

    @property
    def healthy(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.healthy else "unhealthy",
            "problems": list(self.problems),
            "agent": {
                "state": self.agent_state,
                "pid": self.agent_pid,
                "last_pong": _iso(self.agent_last_pong),
                "restarts": self.agent_restarts,
            },
            "platforms": {
                name: "connected" if up else "disconnected"
                for name, up in sorted(self.platforms.items())
            },
            "queue_depth": self.queue_depth,
            "in_flight": self.in_flight,
            "outbox_pending": self.outbox_pending,
            "oldest_undelivered_age_seconds": _rounded(self.oldest_undelivered_age_seconds),
        }


def agent_grace_seconds(ready_timeout: float) -> float:
    """Grace for a configured agent.ready_timeout: one capped backoff plus one start."""
    return BACKOFF_CAP + ready_timeout


def _problems(snap: HealthSnapshot) -> list[str]:
    problems = []
    if snap.agent_state != READY:
        if snap.agent_state not in _TRANSIENT:
            problems.append(f"agent is {snap.agent_state}")
        elif snap.agent_down_seconds > snap.agent_grace_seconds:
            problems.append(
                f"agent not ready for {snap.agent_down_seconds:.0f}s "
                f"({snap.agent_state}, {snap.agent_restarts} restarts)"
            )
    problems.extend(f"{name} disconnected" for name, up in sorted(snap.platforms.items()) if not up)
    return problems


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
    metrics.set_agent_up(snap.agent_state == READY)


async def _take(snapshot: SnapshotFn, timeout: float) -> HealthSnapshot | str:
    """The snapshot, or why there is none (a stuck database must not hang the prober)."""
    try:
        return await asyncio.wait_for(snapshot(), timeout)
    except TimeoutError:
        return f"no snapshot within {timeout:g}s"
    except Exception as exc:
        log.exception("health snapshot failed")
        return f"snapshot failed: {exc.__class__.__name__}"


def add_health_routes(
    app: web.Application,
    snapshot: SnapshotFn,
    metrics: Metrics,
    *,
    timeout: float = SNAPSHOT_TIMEOUT,
) -> None:
    async def healthz(request: web.Request) -> web.Response:
        snap = await _take(snapshot, timeout)
        if isinstance(snap, str):
            return web.json_response({"status": "unhealthy", "problems": [snap]}, status=503)
        apply_snapshot(metrics, snap)
        return web.json_response(snap.to_json(), status=200 if snap.healthy else 503)

    async def metrics_page(request: web.Request) -> web.Response:
        snap = await _take(snapshot, timeout)
        if not isinstance(snap, str):
            apply_snapshot(metrics, snap)
        # Counters are still worth scraping when the snapshot failed; gauges keep last values.
        # The content type carries a charset, which aiohttp's content_type= refuses.
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
