"""Work for one chat done one piece at a time, in the order it arrived; chats run side by side.

A chat's messages must reach the bridge in the order they were written even when one of them
is slow (a file to download), while other chats must not wait for it. Each piece of work
handed in for a chat waits for the one handed in before it, and only for that one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import TypeVar

from picobridge.adapters.common.tasks import TaskSet

T = TypeVar("T")


class ChatSerial:
    def __init__(self, tasks: TaskSet, *, name: str = "chat",
                 after_failure: Callable[[], Exception] | None = None) -> None:
        """`after_failure`, when given, makes work behind a piece that failed (or was
        cancelled) raise what it returns instead of running: for a platform that will send
        the failed piece again and must not see the later ones go first."""
        self._tasks = tasks
        self._name = name
        self._after_failure = after_failure
        self._tails: dict[Hashable, asyncio.Task[object]] = {}

    def run(self, key: Hashable, work: Callable[[], Awaitable[T]]) -> asyncio.Task[T]:
        """Start `work` once the chat's earlier work has ended; the task gives its result.

        The caller owns the outcome: a failure is raised from the task, not logged here.
        """
        previous = self._tails.get(key)

        async def in_turn() -> T:
            if previous is not None:
                await asyncio.wait([previous])
                if self._after_failure is not None and (
                        previous.cancelled() or previous.exception() is not None):
                    raise self._after_failure()
            return await work()

        task = self._tasks.spawn(in_turn(), name=f"{self._name}-{key}", report=False)
        self._tails[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))
        return task

    def _forget(self, key: Hashable, task: asyncio.Task[object]) -> None:
        # Only the chat's last piece is a tail; an idle chat costs no memory.
        if self._tails.get(key) is task:
            del self._tails[key]
