"""Long-lived tasks never die silently: logged, restarted with backoff, reported when they keep
failing (which /healthz and the watchdog read)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from picobridge import supervision
from picobridge.ops.operations import watchdog_healthy
from picobridge.supervision import TaskSupervisor


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervision, "BACKOFF_FIRST", 0.01)
    monkeypatch.setattr(supervision, "BACKOFF_CAP", 0.02)


async def test_a_failing_task_is_logged_and_started_again(
        caplog: pytest.LogCaptureFixture) -> None:
    runs = 0
    third = asyncio.Event()

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise RuntimeError(f"boom {runs}")
        third.set()
        await asyncio.Event().wait()

    tasks = TaskSupervisor()
    with caplog.at_level(logging.ERROR, logger="picobridge.supervision"):
        tasks.start("poller", flaky)
        await asyncio.wait_for(third.wait(), 5)
    assert runs == 3 and tasks.running("poller")
    failures = [r for r in caplog.records if "task poller failed" in r.getMessage()]
    assert len(failures) == 2 and failures[0].exc_info is not None
    assert tasks.failing() == ()
    await tasks.stop()
    assert not tasks.running("poller")


async def test_a_task_that_keeps_failing_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    attempts = 0
    enough = asyncio.Event()

    async def broken() -> None:
        nonlocal attempts
        attempts += 1
        if attempts > supervision.FAILING_COUNT:
            enough.set()
        raise ValueError("always")

    tasks = TaskSupervisor()
    with caplog.at_level(logging.CRITICAL, logger="picobridge.supervision"):
        tasks.start("dispatch", broken)
        await asyncio.wait_for(enough.wait(), 5)
    assert tasks.failing() == ("dispatch",)
    await tasks.stop()


async def test_a_task_that_returns_is_started_again_too() -> None:
    second = asyncio.Event()
    runs = 0

    async def returns() -> None:
        nonlocal runs
        runs += 1
        if runs == 2:
            second.set()

    tasks = TaskSupervisor()
    tasks.start("loop", returns)
    await asyncio.wait_for(second.wait(), 5)
    await tasks.cancel("loop")
    assert not tasks.running("loop")
    with pytest.raises(ValueError, match="already supervised"):
        tasks.start("other", returns)
        tasks.start("other", returns)
    await tasks.stop()


def test_the_watchdog_is_withheld_while_a_task_keeps_failing() -> None:
    from dataclasses import replace

    from tests.unit.ops_sources import sources_for

    healthy = sources_for()
    assert watchdog_healthy(healthy)
    assert not watchdog_healthy(replace(healthy, failing=lambda: ("dispatch",)))


def test_the_watchdog_follows_the_pool() -> None:
    import time

    from picobridge.agent.port import WorkerState
    from tests.unit.ops_sources import sources_for, worker

    now = time.monotonic()
    down_long = worker("w2", WorkerState.RESTARTING, down_since=now - 1000)
    assert watchdog_healthy(sources_for([worker("w1"), down_long]))  # degraded, not dead
    assert not watchdog_healthy(sources_for([down_long]))  # beyond agent.restart_budget
    assert not watchdog_healthy(sources_for([worker("w1", WorkerState.STOPPED)]))
    assert watchdog_healthy(sources_for([worker("w1", WorkerState.STARTING, down_since=now)]))


async def test_held_work_that_fails_is_logged_with_its_name(
        caplog: pytest.LogCaptureFixture) -> None:
    """A task `keep` holds (a message on its way to its lane, say) is never looked at again
    by anyone: its failure must reach the log when it happens, not vanish with the task."""
    held: set[asyncio.Task[None]] = set()

    async def broken() -> None:
        raise RuntimeError("the store said no")

    async def cancelled() -> None:
        await asyncio.Event().wait()

    with caplog.at_level(logging.ERROR, logger="picobridge.supervision"):
        failing = supervision.keep(held, broken(), "arrive-36")
        waiting = supervision.keep(held, cancelled(), "arrive-37")
        await asyncio.wait([failing])
        waiting.cancel()
        await asyncio.wait([waiting])
    assert not held
    [record] = [r for r in caplog.records if r.name == "picobridge.supervision"]
    assert "arrive-36" in record.getMessage() and record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
