"""Work for one chat done one piece at a time, in the order it arrived; chats run side by side.

A chat's messages must reach the bridge in the order they were written even when one of them
is slow (a file to download), while other chats must not wait for it. Each piece of work
handed in for a chat waits for the chat's work handed in before it, and for nothing else.

The order itself is the core's (picobridge.supervision.InOrder); this is its platforms' face:
the pieces are held in the adapter part's TaskSet (waited for and stopped with its other
work), and each piece's outcome is its caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, TypeVar

from picobridge.adapters.common.tasks import TaskSet
from picobridge.supervision import InOrder

T = TypeVar("T")


class ChatSerial(InOrder):
    def __init__(self, tasks: TaskSet, *, name: str = "chat",
                 after_failure: Callable[[], Exception] | None = None) -> None:
        """`after_failure`, when given, makes work behind a piece that failed (or was
        cancelled) raise what it returns instead of running: for a platform that will send
        the failed piece again and must not see the later ones go first."""
        super().__init__(tasks.held, report=False, refuse=after_failure)
        self._name = name

    def run(self, key: Hashable, work: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Task[T]:
        """Start `work` once the chat's earlier work has ended; the task gives its result.

        The caller owns the outcome: a failure is raised from the task, not logged here.
        """
        return self.add(key, work(), f"{self._name}-{key}")
