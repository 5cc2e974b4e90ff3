"""What the local listener (`http.listen`) serves of the bridge: the status page (/), /healthz
and /metrics.

Only a daemon with http.listen loads this module, and with it aiohttp's server and
prometheus_client: a bridge without a listener has no use for either and does not pay their
memory.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from picobridge.ops.health import (
    SNAPSHOT_TIMEOUT,
    HealthSnapshot,
    SnapshotFn,
    apply_snapshot,
    take_snapshot,
)
from picobridge.ops.metrics import Metrics
from picobridge.ops.operations import Sources, snapshot
from picobridge.ops.status_page import add_status_page


def add_routes(app: web.Application, sources: Sources, platforms: Iterable[str]) -> None:
    """Register the status page (/), /healthz and /metrics; must run before the HTTP server
    starts."""
    metrics = Metrics(platforms)

    async def take() -> HealthSnapshot:
        return await snapshot(sources, metrics)

    add_health_routes(app, take, metrics)
    add_status_page(app, take, sources.outbox)


def add_health_routes(
    app: web.Application,
    snapshot: SnapshotFn,
    metrics: Metrics,
    *,
    timeout: float = SNAPSHOT_TIMEOUT,
) -> None:
    async def healthz(request: web.Request) -> web.Response:
        snap = await take_snapshot(snapshot, timeout)
        if isinstance(snap, str):
            return web.json_response({"status": "unhealthy", "problems": [snap]}, status=503)
        apply_snapshot(metrics, snap)
        return web.json_response(snap.to_json(), status=200 if snap.healthy else 503)

    async def metrics_page(request: web.Request) -> web.Response:
        snap = await take_snapshot(snapshot, timeout)
        if not isinstance(snap, str):
            apply_snapshot(metrics, snap)
        # Counters are still worth scraping when the snapshot failed; gauges keep last values.
        # The content type carries a charset, which aiohttp's content_type= refuses.
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
