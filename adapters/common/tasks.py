"""The background tasks an adapter part starts: kept, their failures logged, stopped together.

asyncio keeps only a weak reference to a task, so one nobody holds may vanish mid-flight; a
failure nobody retrieves surfaces (if ever) as a "never retrieved" warning at garbage
collection, far from its cause; and a task still running when its client closes fails with a
confusing error. Every owner of background work therefore needs the same three things, and
this is the one place that does them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class TaskSet:
    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def held(self) -> set[asyncio.Task[Any]]:
        """The tasks themselves, for work started by the per-chat order (serial.py) to be
        held, waited for and stopped with the rest."""
        return self._tasks

    def spawn(self, work: Coroutine[Any, Any, T], *, name: str | None = None,
              report: bool = True) -> asyncio.Task[T]:
        """Run `work` in a task held here until it ends.

        `report=False` is for a task whose outcome its caller awaits and handles itself: its
        exception is then only marked retrieved here, not logged a second time.
        """
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done if report else self._done_quietly)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._log.error("background task %s failed", task.get_name(), exc_info=error)

    def _done_quietly(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()

    async def wait(self, timeout: float) -> None:
        """Give the running tasks up to `timeout` seconds to end on their own."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)

    async def close(self) -> None:
        """Cancel every task and wait until all have ended. Safe to call twice."""
        # A task may spawn another while it is being cancelled (a cleanup call): loop until
        # nothing is left, so close() never returns with work still running.
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
