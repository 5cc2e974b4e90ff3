"""Waiting between attempts to reach a platform: doubling after each failure, up to a cap.

A platform that is down must not be hammered, and one that comes back must not wait long: the
wait starts short, doubles while failures go on, and starts short again after a success.
"""

from __future__ import annotations

import asyncio


class Backoff:
    def __init__(self, first: float = 1.0, cap: float = 60.0) -> None:
        self._first = first
        self._cap = cap
        self._delay = first

    @property
    def delay(self) -> float:
        """The wait the next failure costs."""
        return self._delay

    def next(self) -> float:
        """The wait after this failure; the one after the next failure is twice as long."""
        delay = self._delay
        self._delay = min(self._cap, self._delay * 2)
        return delay

    async def wait(self) -> None:
        await asyncio.sleep(self.next())

    def reset(self) -> None:
        """The platform answered: the next trouble starts with a short wait again."""
        self._delay = self._first
