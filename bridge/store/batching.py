"""Group commit: calls of one kind that arrive together are written by one statement.

Under load many chats commit at once (a burst of updates, a wave of answers, replies sent).
One database round trip each would queue every chat behind the others' round trips; instead
the first call starts a flush on the next turn of the event loop, calls made meanwhile join
it, and calls made while a flush runs go together in the next one. Each caller still returns
only once its own item is committed.

A failed batch is written again item by item, so that one bad item fails only its own caller,
unless the database as a whole refused it (locked by another process past the busy timeout,
disk full, read-only): every item would meet that again, each after its own busy timeout,
while everything else queued on the connection waited behind them.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Coalescer(Generic[Item, Result]):
    def __init__(self, flush: Callable[[Sequence[Item]], Awaitable[Sequence[Result]]],
                 name: str) -> None:
        """`flush` writes a batch and returns one result per item, in the items' order."""
        self._flush = flush
        self._name = name
        self._items: list[Item] = []
        self._waiters: list[asyncio.Future[Result]] = []
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, item: Item) -> Result:
        waiter: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._items.append(item)
        self._waiters.append(waiter)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"coalesce-{self._name}")
        return await waiter

    async def settle(self) -> None:
        """Wait until what was handed over so far is written (or failed)."""
        while self._task is not None:
            await asyncio.wait([self._task])

    async def _run(self) -> None:
        try:
            while self._items:
                items, waiters = self._items, self._waiters
                self._items, self._waiters = [], []
                try:
                    results = await self._flush(items)
                except Exception as exc:
                    if len(items) == 1 or _whole_database(exc):
                        for waiter in waiters:
                            if not waiter.done():
                                waiter.set_exception(exc)
                        continue
                    # One bad item must not fail the others: write each on its own.
                    for item, waiter in zip(items, waiters, strict=True):
                        try:
                            [result] = await self._flush([item])
                        except Exception as single:
                            if not waiter.done():
                                waiter.set_exception(single)
                        else:
                            if not waiter.done():
                                waiter.set_result(result)
                    continue
                except asyncio.CancelledError:
                    for waiter in (*waiters, *self._waiters):
                        waiter.cancel()
                    self._items, self._waiters = [], []
                    raise
                for waiter, result in zip(waiters, results, strict=True):
                    if not waiter.done():  # its caller may have been cancelled meanwhile
                        waiter.set_result(result)
        finally:
            self._task = None


def _whole_database(exc: Exception) -> bool:
    """Whether the database refused the write as such, whatever the items (sqlite3 reports
    "database is locked", "database or disk is full", "attempt to write a readonly database"
    and I/O errors as OperationalError)."""
    return isinstance(exc, sqlite3.OperationalError | OSError)
