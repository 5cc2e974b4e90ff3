"""The listener's connection guard with plain asyncio transports stand-ins: who is let in, who
is cut, and that the log says so once per cause."""

from __future__ import annotations

import asyncio
import logging

import pytest

from picobridge.ops.listener_guard import HEALTH_RESERVE, ConnectionGuard, ListenerLimits
from picobridge.ops.log_throttle import LogThrottle


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.aborted = False
        self.cut = asyncio.Event()

    def abort(self) -> None:
        self.aborted = True
        self.cut.set()

    def close(self) -> None:
        self.abort()

    def is_closing(self) -> bool:
        return self.aborted


class Inner(asyncio.Protocol):
    def __init__(self) -> None:
        self.made = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True


def connect(guard: ConnectionGuard) -> tuple[Transport, Inner]:
    inner = Inner()
    transport = Transport()
    guard.protocol_factory(lambda: inner)().connection_made(transport)
    return transport, inner


async def test_at_the_cap_the_oldest_idle_connection_makes_room() -> None:
    guard = ConnectionGuard(ListenerLimits(max_connections=3, header_timeout=60))
    first, second, third = (connect(guard)[0] for _ in range(3))
    guard.request_started(second, with_body=False)  # busy: not to be evicted
    fourth, inner = connect(guard)
    assert first.aborted and not second.aborted and not third.aborted
    assert inner.made and not fourth.aborted and guard.evicted == 1
    fifth, _ = connect(guard)
    assert third.aborted and not fifth.aborted


async def test_when_every_connection_is_busy_a_few_more_may_ask_for_health_only() -> None:
    guard = ConnectionGuard(ListenerLimits(max_connections=2, header_timeout=60))
    for _ in range(2):
        transport, _ = connect(guard)
        guard.request_started(transport, with_body=False)
    reserve = [connect(guard) for _ in range(HEALTH_RESERVE)]
    assert all(inner.made and not t.aborted for t, inner in reserve)
    for transport, _ in reserve:
        guard.request_started(transport, with_body=False)
    refused, inner = connect(guard)
    assert refused.aborted and not inner.made and guard.refused == 1


async def test_a_connection_waiting_for_its_body_can_be_evicted_but_not_one_being_served(
        ) -> None:
    guard = ConnectionGuard(ListenerLimits(max_connections=2, header_timeout=60))
    slow, _ = connect(guard)
    served, _ = connect(guard)
    guard.body_read(guard.request_started(served, with_body=True))
    guard.request_started(slow, with_body=True)
    newcomer, _ = connect(guard)
    assert slow.aborted and not served.aborted and not newcomer.aborted


async def test_idle_connections_are_cut_after_the_header_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    guard = ConnectionGuard(ListenerLimits(max_connections=10, header_timeout=0.05))
    caplog.set_level(logging.WARNING, "picobridge.http")
    idle = [connect(guard)[0] for _ in range(3)]
    busy, _ = connect(guard)
    conn = guard.request_started(busy, with_body=False)
    async with asyncio.timeout(5):
        await asyncio.gather(*(t.cut.wait() for t in idle))
    assert not busy.aborted and guard.timed_out == 3
    assert [r.getMessage() for r in caplog.records].count(
        "http: closed connection(s) that sent no complete request within 0.05s "
        "(http.header_timeout)") == 1
    guard.request_finished(conn)  # idle again: its own deadline starts now
    async with asyncio.timeout(5):
        await busy.cut.wait()
    guard.stop()


def test_a_cause_is_logged_once_per_interval_then_with_the_count(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    throttle = LogThrottle(logging.getLogger("t"), interval=10, clock=lambda: now[0])
    caplog.set_level(logging.INFO, "t")
    assert throttle(logging.WARNING, "a", "cause a %s", "x")
    assert not throttle(logging.WARNING, "a", "cause a %s", "y")
    assert throttle(logging.WARNING, "b", "cause b")
    now[0] = 10.5
    assert throttle(logging.WARNING, "a", "cause a %s", "z")
    assert [r.getMessage() for r in caplog.records] == [
        "cause a x", "cause b", "cause a z (1 more since the last such line)"]
