"""adapters/common: the task set, the backoff and the per-chat serialiser."""

from __future__ import annotations

import asyncio
import logging

import pytest

from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.common.tasks import TaskSet

log = logging.getLogger("test.tasks")


async def boom(message: str) -> None:
    raise RuntimeError(message)


async def test_a_failed_task_is_logged_with_its_name(caplog: pytest.LogCaptureFixture) -> None:
    tasks = TaskSet(log)
    failed = tasks.spawn(boom("kaput"), name="the-job")
    quiet = tasks.spawn(boom("handled elsewhere"), name="quiet-job", report=False)
    # The set's done callbacks were added first, so they have run once wait() returns.
    await asyncio.wait([failed, quiet])
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == ["background task the-job failed"]
    assert errors[0].exc_info is not None and "kaput" in str(errors[0].exc_info[1])
    assert len(tasks) == 0  # ended tasks are not kept


async def test_close_cancels_and_awaits_everything_also_what_cleanup_starts() -> None:
    tasks = TaskSet(log)
    started = asyncio.Event()
    cleaned = asyncio.Event()

    async def cleanup() -> None:
        await asyncio.sleep(3600)

    async def worker() -> None:
        try:
            started.set()
            await asyncio.sleep(3600)
        finally:
            # A clean-up call started while being cancelled must not outlive close().
            tasks.spawn(cleanup(), name="cleanup")
            cleaned.set()

    task = tasks.spawn(worker(), name="worker")
    await started.wait()
    await tasks.close()
    assert task.cancelled() and cleaned.is_set() and len(tasks) == 0
    await tasks.close()  # twice is harmless


async def test_wait_lets_tasks_finish_but_is_bounded() -> None:
    tasks = TaskSet(log)
    release = asyncio.Event()

    async def until_released() -> None:
        await release.wait()

    stuck = tasks.spawn(until_released())
    await tasks.wait(0.01)
    assert not stuck.done()
    release.set()
    await tasks.wait(10)
    assert stuck.done() and len(tasks) == 0


async def test_backoff_doubles_up_to_its_cap_and_starts_over_after_a_reset(
        monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)  # what Backoff.wait sleeps with
    backoff = Backoff(first=0.5, cap=3.0)
    for _ in range(5):
        await backoff.wait()
    assert slept == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.delay == 0.5 and backoff.next() == 0.5 and backoff.delay == 1.0


async def test_one_chat_in_order_other_chats_alongside() -> None:
    serial = ChatSerial(TaskSet(log))
    first_may_end = asyncio.Event()
    events: list[str] = []

    async def slow() -> str:
        events.append("a1 start")
        await first_may_end.wait()
        events.append("a1 end")
        return "a1"

    async def quick(name: str) -> str:
        events.append(name)
        return name

    a1 = serial.run("chat-a", slow)
    a2 = serial.run("chat-a", lambda: quick("a2"))
    b1 = serial.run("chat-b", lambda: quick("b1"))
    assert await b1 == "b1"  # not held up by chat a
    assert not a2.done()
    first_may_end.set()
    assert await a2 == "a2" and await a1 == "a1"
    assert events == ["a1 start", "b1", "a1 end", "a2"]
    assert serial._tails == {}  # idle chats cost nothing


async def test_after_a_failure_later_work_of_the_chat_is_refused_or_goes_on() -> None:
    class Later(Exception):
        pass

    ran: list[str] = []

    async def record(name: str) -> None:
        ran.append(name)

    strict = ChatSerial(TaskSet(log), after_failure=lambda: Later("earlier failed"))
    failed = strict.run("chat", lambda: boom("first"))
    behind = strict.run("chat", lambda: record("strict"))
    with pytest.raises(RuntimeError):
        await failed
    with pytest.raises(Later):
        await behind

    lenient = ChatSerial(TaskSet(log))
    failed = lenient.run("chat", lambda: boom("first"))
    behind = lenient.run("chat", lambda: record("lenient"))
    await behind
    assert ran == ["lenient"]
    with pytest.raises(RuntimeError):
        await failed
