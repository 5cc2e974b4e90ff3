"""Long-lived tasks that cannot die silently.

Every loop the daemon depends on (the router's dispatch, pollers, the watchdog) runs under a
`TaskSupervisor`: an exception is logged with the task's name and the task is started again
after a backoff. A task that keeps failing is reported by `failing()`, which makes /healthz
unhealthy and withholds systemd's watchdog keep-alives, so the service manager restarts the
whole daemon instead of leaving it up and useless.

Short-lived background work (`keep`) is held until done, so that it can be waited for; its
failure is logged, never restarted (it is one step of something the store keeps). Work that
must happen in the order it came, per chat, goes through `InOrder`: the one per-chat order of
the core and the platforms alike (adapters/common/serial.py is its platforms' face).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger("picobridge.supervision")

BACKOFF_FIRST = 0.5
BACKOFF_CAP = 30.0
# A task that ran this long without failing starts its backoff over.
STABLE_AFTER = 60.0
# This many failures within the window mark a task as failing.
FAILING_COUNT = 5
FAILING_WINDOW = 300.0

TaskFactory = Callable[[], Awaitable[None]]
T = TypeVar("T")


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


def keep(tasks: set[asyncio.Task[Any]], work: Coroutine[Any, Any, T], name: str,
         then: Callable[[asyncio.Task[T]], None] | None = None, *, report: bool = True
         ) -> asyncio.Task[T]:
    """Run `work` in a task held in `tasks` until it is done (so it can be waited for).

    Such work is one step of something larger (a message on its way to its lane, an answer
    into the store), so it is not started again: whatever it held waits in the store for the
    next start. Its failure is logged at once, with the task's name and the traceback, since
    nobody may ever look at the task's result (asyncio would say so, if at all, only when
    the task is collected). `report=False` is for a task whose caller awaits it and handles
    its failure: it is then only marked retrieved here."""
    task = asyncio.create_task(work, name=name)
    tasks.add(task)

    # One callback, not one for each step: each is a turn of its own in the event loop's
    # queue, and a message's answer goes through here.
    def finished(done: asyncio.Task[T]) -> None:
        tasks.discard(done)
        if then is not None:
            then(done)
        if report:
            _log_failure(done)
        elif not done.cancelled():
            done.exception()

    task.add_done_callback(finished)
    return task


class InOrder:
    """Work kept per key (a chat) in tasks held in `tasks`, each begun only once all of the
    key's work added before it has ended, while other keys' work runs alongside: what must
    happen in the order it came, where one step may wait (an answer held by a store outage, a
    message waiting for its chat's busy mode, a file to download).

    A failed piece is logged here (`report`, for work nobody looks at again) or left to the
    caller awaiting its task (`report=False`). The work behind it goes on, or, with `refuse`,
    raises what `refuse()` returns instead of beginning (for a platform that sends the failed
    piece again and must not see later ones go first) until the key's work has all ended.
    A piece cancelled before its turn never begins, and counts as failed for `refuse`; what
    comes behind it still waits for what came before it. Only keys with work not ended are
    kept: an idle chat costs nothing."""

    def __init__(self, tasks: set[asyncio.Task[Any]], *, report: bool = True,
                 refuse: Callable[[], Exception] | None = None) -> None:
        self._tasks = tasks
        self._report = report
        self._refuse = refuse
        # Each key's latest piece: its task, or, for a piece that had to wait, a future set
        # (to whether it failed) once it and everything before it have ended. A task alone
        # would not do: one cancelled before it ran ends at once, ahead of what it waited for.
        self._tails: dict[Hashable, asyncio.Future[Any]] = {}

    def __len__(self) -> int:
        """How many keys have work not ended."""
        return len(self._tails)

    def waiting(self, key: Hashable) -> bool:
        """Whether work of this key has not ended (work added now would wait for it)."""
        return key in self._tails

    def add(self, key: Hashable, work: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """Run `work` once the key's work added before it has ended; its task gives the result."""
        previous = self._tails.get(key)
        if previous is None or (previous.done() and not (
                self._refuse is not None and _failed(previous))):
            # Nothing to wait for (most often): the work runs without a wrapping coroutine.
            def forget(done: asyncio.Task[T]) -> None:
                if self._tails.get(key) is done:
                    del self._tails[key]

            task = keep(self._tasks, work, name, forget, report=self._report)
            self._tails[key] = task
            return task
        handed = asyncio.get_running_loop().create_future()

        def ended(done: asyncio.Task[T]) -> None:
            work.close()  # a no-op unless it was cancelled before its turn: it never began
            failed = _failed(done)
            if previous.done():
                self._hand_over(key, handed, failed)
            else:
                previous.add_done_callback(lambda _: self._hand_over(key, handed, failed))

        task = keep(self._tasks, self._after(previous, work), name, ended, report=self._report)
        self._tails[key] = handed
        return task

    def _hand_over(self, key: Hashable, handed: asyncio.Future[bool], failed: bool) -> None:
        handed.set_result(failed)
        if self._tails.get(key) is handed:
            del self._tails[key]

    async def _after(self, previous: asyncio.Future[Any], work: Coroutine[Any, Any, T]) -> T:
        await asyncio.wait([previous])  # not `await previous`: cancelling this must not end it
        refuse = self._refuse
        if refuse is not None and _failed(previous):
            raise refuse()
        return await work


def _failed(piece: asyncio.Future[Any]) -> bool:
    """Whether a piece that ended failed: its task raised or was cancelled, or its hand-over
    says so."""
    if isinstance(piece, asyncio.Task):
        return piece.cancelled() or piece.exception() is not None
    return bool(piece.result())


def _log_failure(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    failure = task.exception()
    if failure is not None:
        log.error("background task %s failed", task.get_name(), exc_info=failure)
