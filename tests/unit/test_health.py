"""bridge/health.py: /healthz verdicts and body, /metrics exposition, over a real aiohttp server."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from picobridge.adapters.registry import PLATFORMS
from picobridge.ops.endpoints import add_health_routes
from picobridge.ops.health import (
    DEFAULT_AGENT_GRACE,
    HealthSnapshot,
    WorkerHealth,
    agent_grace_seconds,
)
from picobridge.ops.metrics import Metrics

pytestmark = pytest.mark.timeout(30)

WORKER = WorkerHealth(name="w1", state="ready", pid=4321, last_pong=1_700_000_000.0,
                      restarts=2, down_seconds=0.0, busy=1)
GOOD = HealthSnapshot(
    workers=(WORKER,),
    platforms={"telegram": True, "slack": True},
    queue_depth=3,
    in_flight=1,
    outbox_pending=2,
    oldest_undelivered_age_seconds=12.345,
)


def variant(**changes: Any) -> HealthSnapshot:
    """GOOD with its one worker changed by the worker's fields, the rest by the snapshot's."""
    worker_fields = {f.name for f in dataclasses.fields(WorkerHealth)}
    mine = {k: v for k, v in changes.items() if k in worker_fields}
    rest = {k: v for k, v in changes.items() if k not in worker_fields}
    return dataclasses.replace(GOOD, workers=(dataclasses.replace(WORKER, **mine),), **rest)


SnapshotFn = Callable[[], Awaitable[HealthSnapshot]]


class Client(Protocol):
    def __call__(
        self, snapshot: SnapshotFn, metrics: Metrics | None = None
    ) -> Awaitable[TestClient[Any, Any]]: ...


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    """Serve the routes on 127.0.0.1 with an OS-chosen port, as the daemon would."""
    started: list[TestClient[Any, Any]] = []

    async def make(snapshot: SnapshotFn, metrics: Metrics | None = None) -> TestClient[Any, Any]:
        app = web.Application()
        add_health_routes(app, snapshot, metrics or Metrics(PLATFORMS), timeout=0.5)
        test_client = TestClient(TestServer(app, host="127.0.0.1", port=0))
        await test_client.start_server()
        started.append(test_client)
        return test_client

    yield make
    for test_client in started:
        await test_client.close()


def fixed(snap: HealthSnapshot) -> SnapshotFn:
    async def snapshot() -> HealthSnapshot:
        return snap

    return snapshot


# -- the verdict ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "healthy"),
    [
        ({}, True),
        ({"state": "restarting", "down_seconds": 4.0}, True),
        ({"state": "starting", "down_seconds": DEFAULT_AGENT_GRACE}, True),
        ({"state": "restarting", "down_seconds": DEFAULT_AGENT_GRACE + 1}, False),
        ({"state": "starting", "down_seconds": 100.0, "agent_grace_seconds": 200.0}, True),
        ({"state": "stopped"}, False),
        ({"platforms": {"telegram": True, "slack": False}}, False),
        ({"platforms": {}}, True),  # nothing enabled to be disconnected (e.g. console chat)
        ({"failing": ("outbox",)}, False),
        # Connected but silent: degraded (200), not down.
        ({"platforms": {"slack": True}, "silent": {"slack": 130.0}}, True),
    ],
)
def test_verdict(changes: dict[str, Any], healthy: bool) -> None:
    assert variant(**changes).healthy is healthy


def test_problems_say_why() -> None:
    snap = variant(state="restarting", down_seconds=500.0,
                   platforms={"telegram": False, "slack": True})
    assert snap.problems == (
        "worker w1 not ready for 500s (restarting, 2 restarts)",
        "telegram disconnected",
    )


def test_a_pool_is_degraded_while_some_workers_are_down_and_unhealthy_when_all_are() -> None:
    down = dataclasses.replace(WORKER, name="w2", state="restarting", pid=None,
                               down_seconds=DEFAULT_AGENT_GRACE + 5)
    starting = dataclasses.replace(WORKER, name="w3", state="starting", pid=None,
                                   down_seconds=1.0)
    degraded = dataclasses.replace(GOOD, workers=(WORKER, down, starting))
    assert degraded.healthy and degraded.status == "degraded"
    assert degraded.warnings == (
        f"worker w2 not ready for {DEFAULT_AGENT_GRACE + 5:.0f}s (restarting, 2 restarts)",
        "worker w3 is starting",
    )
    stopped = dataclasses.replace(WORKER, state="stopped", pid=None)
    dead = dataclasses.replace(GOOD, workers=(stopped, down))
    assert not dead.healthy and dead.status == "unhealthy"
    assert dead.to_json()["agent"]["workers_ready"] == 0


def test_grace_follows_ready_timeout() -> None:
    assert agent_grace_seconds(30.0) == DEFAULT_AGENT_GRACE
    assert agent_grace_seconds(120.0) == DEFAULT_AGENT_GRACE + 90.0


# -- /healthz ------------------------------------------------------------------------------


async def test_healthz_ok_body(client: Client) -> None:
    http = await client(fixed(GOOD))
    response = await http.get("/healthz")
    assert response.status == 200
    assert response.content_type == "application/json"
    assert await response.json() == {
        "status": "ok",
        "problems": [],
        "warnings": [],
        "agent": {
            "state": "ready",
            "pid": 4321,
            "last_pong": "2023-11-14T22:13:20+00:00",
            "restarts": 2,
            "workers_ready": 1,
            "workers": [{"name": "w1", "agent": "default", "state": "ready", "pid": 4321,
                         "last_pong": "2023-11-14T22:13:20+00:00", "restarts": 2, "busy": 1}],
            "agents": {"default": {"state": "ready", "workers_ready": 1, "workers": 1}},
        },
        "platforms": {"slack": "connected", "telegram": "connected"},
        "platforms_last_event_seconds": {},
        "queue_depth": 3,
        "in_flight": 1,
        "outbox_pending": 2,
        "oldest_undelivered_age_seconds": 12.3,
    }


async def test_healthz_503_when_a_platform_is_down(client: Client) -> None:
    http = await client(fixed(variant(platforms={"telegram": False})))
    response = await http.get("/healthz")
    assert response.status == 503
    body = await response.json()
    assert body["status"] == "unhealthy"
    assert body["platforms"] == {"telegram": "disconnected"}
    assert body["problems"] == ["telegram disconnected"]


async def test_healthz_nulls_before_the_first_pong(client: Client) -> None:
    snap = variant(state="starting", pid=None, last_pong=None, down_seconds=1.0, busy=0,
                   oldest_undelivered_age_seconds=None)
    body = await (await (await client(fixed(snap))).get("/healthz")).json()
    assert body["agent"] == {"state": "starting", "pid": None, "last_pong": None, "restarts": 2,
                             "workers_ready": 0,
                             "workers": [{"name": "w1", "agent": "default", "state": "starting",
                                          "pid": None, "last_pong": None, "restarts": 2,
                                          "busy": 0}],
                             "agents": {"default": {"state": "starting", "workers_ready": 0,
                                                    "workers": 1}}}
    assert body["oldest_undelivered_age_seconds"] is None
    assert body["status"] == "ok"


async def test_healthz_503_when_the_snapshot_fails(client: Client) -> None:
    async def broken() -> HealthSnapshot:
        raise RuntimeError("database is locked")

    response = await (await client(broken)).get("/healthz")
    assert response.status == 503
    assert await response.json() == {
        "status": "unhealthy",
        "problems": ["snapshot failed: RuntimeError"],
    }


async def test_healthz_503_when_the_snapshot_hangs(client: Client) -> None:
    async def stuck() -> HealthSnapshot:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    response = await (await client(stuck)).get("/healthz")
    assert response.status == 503
    assert (await response.json())["problems"] == ["no snapshot within 0.5s"]


async def test_each_request_takes_a_fresh_snapshot(client: Client) -> None:
    snaps = iter([GOOD, variant(state="stopped")])

    async def changing() -> HealthSnapshot:
        return next(snaps)

    http = await client(changing)
    assert (await http.get("/healthz")).status == 200
    assert (await http.get("/healthz")).status == 503


# -- /metrics ------------------------------------------------------------------------------


async def test_metrics_exposition_with_fresh_gauges(client: Client) -> None:
    metrics = Metrics(PLATFORMS)
    metrics.sync_platform_totals("messages_in", {"telegram": 1})
    http = await client(fixed(GOOD), metrics)
    response = await http.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"] == CONTENT_TYPE_LATEST
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(await response.text())
        for s in family.samples
    }
    assert values[("picobridge_messages_in_total",
                   (("bot", "default"), ("platform", "telegram")))] == 1
    assert values[("picobridge_queue_depth", ())] == 3
    assert values[("picobridge_in_flight", ())] == 1
    assert values[("picobridge_outbox_pending", ())] == 2
    assert values[("picobridge_oldest_undelivered_age_seconds", ())] == pytest.approx(12.345)
    assert values[("picobridge_agent_up", ())] == 1
    assert values[("picobridge_worker_up", (("agent", "default"), ("worker", "w1")))] == 1
    assert values[("picobridge_worker_busy", (("agent", "default"), ("worker", "w1")))] == 1
    assert values[("picobridge_agent_ready", (("agent", "default"),))] == 1


async def test_metrics_still_served_when_the_snapshot_fails(client: Client) -> None:
    async def broken() -> HealthSnapshot:
        raise RuntimeError("boom")

    response = await (await client(broken)).get("/metrics")
    assert response.status == 200
    assert "picobridge_turns_total" in await response.text()
