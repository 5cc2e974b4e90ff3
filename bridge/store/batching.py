"""Group commit: writes that arrive together are committed by one transaction, each kind of
write by one statement.

Under load many chats commit at once (a burst of updates, a wave of answers, replies sent),
and each message's path writes several times (its arrival, its dispatch, its answer, the
answer sent). One database round trip and one commit each would queue every chat behind the
others' round trips and commits; instead writes made while a flush runs go together in the
next one: one round trip to the database thread, one transaction, one sync when any of them
needs one. The first call when none runs
flushes at once, in the caller's own task, when the flush can hand its write to the database
before it first waits (`ready`): a task of its own would cost two turns of the event loop, one
to start and one to hand the result back, on every message's path; and since the write is
queued before the caller can be cancelled, a caller that gives up still leaves it written.
Otherwise it starts a flush on the next turn of the loop, and calls made meanwhile join it.
Each caller still returns only once its own item is committed.

A failed batch is written again item by item, so that one bad item fails only its own caller,
unless the database as a whole refused it (locked by another process past the busy timeout,
disk full, read-only): every item would meet that again, each after its own busy timeout,
while everything else queued on the connection waited behind them.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True, slots=True, eq=False)
class Write(Generic[Item, Result]):
    """One kind of batched write: `statement` makes a run of its items one statement (SQL and
    parameters), `results` turns that statement's rows into one result per item (run in the
    database thread: plain Python, no I/O). `synced`: its commit must be on disk before its
    caller goes on (a message's arrival); otherwise committed without a sync of its own (see
    store/connection.py)."""

    name: str
    statement: Callable[[Sequence[Item]], tuple[str, Sequence[Any]]]
    results: Callable[[Sequence[Item], list[Any]], Sequence[Result]]
    synced: bool = False


def runs(entries: Sequence[tuple[Write[Any, Any], Any]]
         ) -> list[tuple[Write[Any, Any], list[Any]]]:
    """Consecutive writes of one kind, in the order they came: a statement per run keeps
    every write after the ones queued before it (an answer after its messages' dispatch)."""
    out: list[tuple[Write[Any, Any], list[Any]]] = []
    for write, item in entries:
        if out and out[-1][0] is write:
            out[-1][1].append(item)
        else:
            out.append((write, [item]))
    return out


class Coalescer(Generic[Item, Result]):
    def __init__(self, flush: Callable[[Sequence[Item]], Awaitable[Sequence[Result]]],
                 name: str, ready: Callable[[], bool] = lambda: False) -> None:
        """`flush` writes a batch and returns one result per item, in the items' order;
        `ready` says whether a flush started now hands its write over before it first waits."""
        self._flush = flush
        self._name = name
        self._ready = ready
        self._items: list[Item] = []
        self._waiters: list[asyncio.Future[Result]] = []
        self._task: asyncio.Task[None] | None = None
        self._leader: asyncio.Future[None] | None = None  # a caller's own flush under way
        self._queued_done: asyncio.Future[None] | None = None  # for `drained`, on demand

    async def __call__(self, item: Item) -> Result:
        if self._task is None and self._leader is None and self._ready():
            return await self._lead(item)
        waiter: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._items.append(item)
        self._waiters.append(waiter)
        if self._task is None and self._leader is None:
            self._start()
        return await waiter

    def later(self, item: Item) -> asyncio.Future[Result]:
        """Queue `item` now without waiting for it: the future is its result. It joins the
        flush under way's successor, or starts one (in a task of its own)."""
        waiter: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._items.append(item)
        self._waiters.append(waiter)
        if self._task is None and self._leader is None:
            self._start()
        return waiter

    async def _lead(self, item: Item) -> Result:
        leader = self._leader = asyncio.get_running_loop().create_future()
        try:
            [result] = await self._flush([item])
            return result
        finally:
            self._leader = None
            leader.set_result(None)
            if self._items:  # queued meanwhile
                self._start()

    def _start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"coalesce-{self._name}")

    async def settle(self) -> None:
        """Wait until what was handed over so far is written (or failed)."""
        while (running := self._task or self._leader) is not None:
            await asyncio.wait([running])

    async def drained(self) -> None:
        """Wait until the items queued so far (not yet handed to a flush) are written or
        failed; at once when there are none. What is handed over already is ahead of anything
        queued on the connection after this."""
        if not self._items:
            return
        if self._queued_done is None:
            self._queued_done = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._queued_done)

    async def _run(self) -> None:
        try:
            while self._items:
                items, waiters = self._items, self._waiters
                self._items, self._waiters = [], []
                done, self._queued_done = self._queued_done, None
                try:
                    await self._flush_batch(items, waiters)
                finally:
                    if done is not None:
                        done.set_result(None)
        finally:
            self._task = None

    async def _flush_batch(self, items: list[Item], waiters: list[asyncio.Future[Result]]
                           ) -> None:
        try:
            results = await self._flush(items)
        except Exception as exc:
            if len(items) == 1 or _whole_database(exc):
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(exc)
                return
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
            return
        except asyncio.CancelledError:
            for waiter in (*waiters, *self._waiters):
                waiter.cancel()
            self._items, self._waiters = [], []
            if self._queued_done is not None:  # nothing is queued any more
                self._queued_done.set_result(None)
                self._queued_done = None
            raise
        for waiter, result in zip(waiters, results, strict=True):
            if not waiter.done():  # its caller may have been cancelled meanwhile
                waiter.set_result(result)


def _whole_database(exc: Exception) -> bool:
    """Whether the database refused the write as such, whatever the items (sqlite3 reports
    "database is locked", "database or disk is full", "attempt to write a readonly database"
    and I/O errors as OperationalError)."""
    return isinstance(exc, sqlite3.OperationalError | OSError)
