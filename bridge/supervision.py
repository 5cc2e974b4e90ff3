"""Long-lived tasks that cannot die silently.

Every loop the daemon depends on (the router's dispatch, pollers, the watchdog) runs under a
`TaskSupervisor`: an exception is logged with the task's name and the task is started again
after a backoff. A task that keeps failing is reported by `failing()`, which makes /healthz
unhealthy and withholds systemd's watchdog keep-alives, so the service manager restarts the
whole daemon instead of leaving it up and useless.

Short-lived background work (`keep`) is held until done, so that it can be waited for; its
failure is logged, never restarted (it is one step of something the store keeps).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("picobridge.supervision")

BACKOFF_FIRST = 0.5
BACKOFF_CAP = 30.0
# A task that ran this long without failing starts its backoff over.
STABLE_AFTER = 60.0
# This many failures within the window mark a task as failing.
FAILING_COUNT = 5
FAILING_WINDOW = 300.0

TaskFactory = Callable[[], Awaitable[None]]


@dataclass
class _Supervised:
    name: str
    factory: TaskFactory
    task: asyncio.Task[None] | None = None
    failures: deque[float] = field(default_factory=deque)
    crashed: bool = False  # waiting out its backoff after a failure


class TaskSupervisor:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tasks: dict[str, _Supervised] = {}
        self._stopping = False

    def start(self, name: str, factory: TaskFactory) -> None:
        """Run `factory()` until stop(); restart it whenever it raises or returns."""
        if name in self._tasks:
            raise ValueError(f"a task named {name!r} is already supervised")
        entry = _Supervised(name, factory)
        self._tasks[name] = entry
        entry.task = asyncio.create_task(self._keep(entry), name=name)

    def failing(self) -> tuple[str, ...]:
        now = self._clock()
        names = []
        for entry in self._tasks.values():
            while entry.failures and now - entry.failures[0] > FAILING_WINDOW:
                entry.failures.popleft()
            if len(entry.failures) >= FAILING_COUNT:
                names.append(entry.name)
        return tuple(names)

    def running(self, name: str) -> bool:
        entry = self._tasks.get(name)
        return entry is not None and not entry.crashed and entry.task is not None \
            and not entry.task.done()

    async def cancel(self, *names: str) -> None:
        """Stop these tasks for good (their component is shutting down)."""
        entries = [self._tasks.pop(n) for n in names if n in self._tasks]
        tasks = [e.task for e in entries if e.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def stop(self) -> None:
        self._stopping = True
        await self.cancel(*list(self._tasks))

    async def _keep(self, entry: _Supervised) -> None:
        delay = BACKOFF_FIRST
        while not self._stopping:
            started = self._clock()
            entry.crashed = False
            failure: BaseException | None = None
            try:
                await entry.factory()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = exc
            if self._stopping:
                return
            if self._clock() - started >= STABLE_AFTER:
                delay = BACKOFF_FIRST
            if failure is not None:
                log.error("task %s failed; starting it again in %.1fs", entry.name, delay,
                          exc_info=failure)
            else:
                log.error("task %s ended by itself; starting it again in %.1fs", entry.name,
                          delay)
            entry.crashed = True
            entry.failures.append(self._clock())
            await asyncio.sleep(delay)
            delay = min(BACKOFF_CAP, delay * 2)


def keep(tasks: set[asyncio.Task[None]], work: Coroutine[Any, Any, None],
         name: str, then: Callable[[asyncio.Task[None]], None] | None = None
         ) -> asyncio.Task[None]:
    """Run `work` in a task held in `tasks` until it is done (so it can be waited for).

    Such work is one step of something larger (a message on its way to its lane, an answer
    into the store), so it is not started again: whatever it held waits in the store for the
    next start. Its failure is logged at once, with the task's name and the traceback, since
    nobody may ever look at the task's result (asyncio would say so, if at all, only when
    the task is collected)."""
    task = asyncio.create_task(work, name=name)
    tasks.add(task)

    # One callback, not one for each step: each is a turn of its own in the event loop's
    # queue, and a message's answer goes through here.
    def finished(done: asyncio.Task[None]) -> None:
        tasks.discard(done)
        if then is not None:
            then(done)
        _log_failure(done)

    task.add_done_callback(finished)
    return task


class InOrder:
    """Work kept per key (a chat) in tasks held in `tasks`, each begun only once the key's
    work before it is done: what must happen in the order it came, where one step may wait
    (an answer held by a store outage, a message waiting for its chat's busy mode)."""

    def __init__(self, tasks: set[asyncio.Task[None]]) -> None:
        self._tasks = tasks
        self._last: dict[str, asyncio.Task[None]] = {}  # each key's latest work

    def waiting(self, key: str) -> bool:
        """Whether work of this key is not done yet (work added now would wait for it)."""
        return key in self._last

    def add(self, key: str, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        def forget(done: asyncio.Task[None]) -> None:
            if self._last.get(key) is done:
                del self._last[key]

        previous = self._last.get(key)
        if previous is None or previous.done():
            task = keep(self._tasks, work, name, forget)  # nothing to wait for (most often)
        else:
            task = keep(self._tasks, _after(previous, work), name, forget)
        self._last[key] = task
        return task


async def _after(previous: asyncio.Task[None], work: Coroutine[Any, Any, None]) -> None:
    await asyncio.wait([previous])  # its failure is logged by keep; this one goes on
    await work


def _log_failure(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    failure = task.exception()
    if failure is not None:
        log.error("background task %s failed", task.get_name(), exc_info=failure)
