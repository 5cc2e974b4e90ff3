"""The one connection every table group writes through.

One aiosqlite connection does all the writing (SQLite allows one writer anyway); a lock keeps
one coroutine's multi-statement transaction from interleaving with another's. WAL with
synchronous=FULL: every synced commit is on disk before it returns, so what a platform was
told we received (a polling offset, an event ack) survives a power cut too, not only a killed
daemon. (With NORMAL the last commits before an OS crash could roll back.)

The writes on a message's path (its arrival, its dispatch, its answer, the answer sent) are
group-committed (store/batching.py): whatever is queued while a flush runs goes to the database
thread in one call and commits as one transaction, each kind of write one statement. Only a
message's arrival must be synced before anything goes on (a platform is told we have it right
after): arrivals have a queue of their own, and a flush of them commits synced. A flush of the
later writes (dispatch marks, answers, answers sent, of every chat together; a requeue among
them, which is synced, makes the whole flush synced) commits without a sync of its own
(`synchronous=NORMAL` for that transaction), still before their callers go on, so a killed
daemon loses none of them; the WAL is one file written in order, so the next synced commit
carries them to disk with its own, and when none follows within LAZY_SYNC seconds a checkpoint
syncs them. (Under load a message arrives every moment: then no checkpoint is needed, and none
is made, each of which cost two syncs of its own on the connection every message's commit waits
behind.) A power cut in that window loses no message: it rolls the message back to where its
last synced commit left it, from where it goes on again (dispatched once more, its answer sent
once more: a possible duplicate, as a cut during the platform's own answer always could make).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Self, TypeVar

import aiosqlite

from picobridge.store.batching import Coalescer, Write, runs
from picobridge.store.reading import StoreError, busy_timeout_pragma, prepare, refused_write
from picobridge.store.schema import (
    SchemaError,
    applied_version,
    applied_versions,
    migrate,
    require_current,
)

Item = TypeVar("Item")
Result = TypeVar("Result")

# How long an unsynced commit may wait for a synced one to carry it to disk: about as long as
# a platform takes to accept an answer, the window in which a cut already meant a duplicate.
LAZY_SYNC = 0.05

# SQLite's page cache, in KiB (its default is 2,000): it fills up to this as pages are read, so
# it is most of what a daemon grows by over its first chats (bench/memory.py, 1,000 chats: 512
# KiB cost 0.45 KB a chat more than this, with the same CPU per message in
# bench/bridge_overhead.py at 1,000 chats). The pages a message's path reads again (the
# B-trees' roots and their newest leaves) fit in it; any other page is a read from the OS's
# page cache away.
PAGE_CACHE_KIB = 128


async def _must_be_writable(db: aiosqlite.Connection, path: Path) -> None:
    """Refuse a database that can never take a write (read-only file or folder) at start, with
    the same words as `picobridge check`, instead of failing on the first message."""
    try:
        await db.execute("BEGIN IMMEDIATE")
        await db.execute("ROLLBACK")
    except aiosqlite.OperationalError as exc:
        refused = refused_write(path, exc)
        if refused is not None:
            raise refused from None
        # Locked by another process, say: transient, the writes that need it will wait.


def batch_fields(count: int) -> str:
    """The first `count` fields of a batched row (a JSON array `m.value`) as SQL values."""
    return ", ".join(f"json_extract(m.value, '$[{i}]')" for i in range(count))


class Database:
    """The connection, its lock and the group-commit queues; the table groups build on it."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        self._lock = asyncio.Lock()
        # With the lock free, a flush queues its transaction before it first waits. Arrivals
        # (synced) and the writes after them (unsynced) are two queues: an arrival, which its
        # platform waits for, never waits for a flush of later writes to come back first
        # (on the connection it still queues behind one, as any statement does).
        ready = lambda: not self._lock.locked()  # noqa: E731
        self._arrivals: Coalescer[tuple[Write[Any, Any], Any], Any] = Coalescer(
            self._write_batch, "arrivals", ready=ready)
        self._writes: Coalescer[tuple[Write[Any, Any], Any], Any] = Coalescer(
            self._write_batch, "writes", ready=ready)
        self._sync_task: asyncio.Task[None] | None = None
        self._lazy_count = 0  # unsynced commits queued so far
        self._carried = 0  # how many of the first of them a synced commit has put on disk
        self._unsynced: deque[tuple[int, float]] = deque()  # (number, when) of the others

    @classmethod
    async def open(cls, path: Path, *, migrate_schema: bool = True,
                   busy_timeout: float = 5.0) -> Self:
        prepare(path)
        try:
            db = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, aiosqlite.Error) as exc:
            raise StoreError(f"cannot open database {path}: {exc}") from None
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=FULL")
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            # Statement journals (a write statement's undo inside a transaction: the group
            # commits) in memory, in 1 KiB pieces, instead of a 64 KiB buffer taken and freed
            # by every statement: glibc hands such free space at a heap's top back to the OS,
            # and the next message faults it in again (about 120 page faults a message, each a
            # page the kernel zeroes). Only undo within a transaction: the WAL keeps what is
            # committed, as before. (SQLite's scratch space for a sort without an index goes
            # to memory too; the daemon's queries sort few rows.)
            await db.execute("PRAGMA temp_store=MEMORY")
            await db.execute(busy_timeout_pragma(busy_timeout))
            await _must_be_writable(db, path)
            if migrate_schema:
                await migrate(db)
            else:
                require_current(await applied_versions(db))
        except (SchemaError, StoreError):
            await db.close()
            raise
        except aiosqlite.Error as exc:
            await db.close()
            raise StoreError(f"cannot use database {path}: {exc}") from None
        except BaseException:
            await db.close()
            raise
        return cls(db, path)

    async def close(self) -> None:
        # Writes callers gave up waiting for (a cancelled delivery marking its reply sent)
        # still land: otherwise the next start would send that reply again.
        await self._arrivals.settle()
        await self._writes.settle()
        if self._sync_task is not None:
            self._sync_task.cancel()
        # Closing the last connection checkpoints the WAL, synced: the lazy commits with it.
        await self._db.close()

    async def schema_version(self) -> int:
        return await applied_version(self._db)

    def _batched(self, write: Write[Item, Result], *, after_writes: bool = False
                 ) -> Callable[[Item], Awaitable[Result]]:
        """A write of this kind, group-committed with whatever writes of its queue (synced or
        not) come with it (`close` waits for them). A synced write goes with the arrivals,
        unless it must keep its place among the later writes (`after_writes`): then its flush
        of them is synced."""
        writes = self._queue_of(write, after_writes)

        async def call(item: Item) -> Result:
            result: Result = await writes((write, item))
            return result

        return call

    def _queued(self, write: Write[Item, Result]) -> Callable[[Item], asyncio.Future[Result]]:
        """A write of this kind queued at once, its caller not waiting: the future says when
        it is written (or why not)."""
        writes = self._queue_of(write)

        def queue(item: Item) -> asyncio.Future[Result]:
            written: asyncio.Future[Result] = writes.later((write, item))
            return written

        return queue

    def _queue_of(self, write: Write[Any, Any], after_writes: bool = False
                  ) -> Coalescer[tuple[Write[Any, Any], Any], Any]:
        return self._arrivals if write.synced and not after_writes else self._writes

    async def _drained(self) -> None:
        """Until the batched writes queued so far are handed to the database thread."""
        await self._arrivals.drained()
        await self._writes.drained()

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[aiosqlite.Connection]:
        await self._drained()  # after the writes queued before it, as issued
        async with self._lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                await self._db.commit()
            except BaseException:
                # A failed COMMIT too: left open, the transaction would take in every
                # statement after it (see _write_batch).
                await self._db.rollback()
                raise

    # A single statement is its own transaction. On the shared connection, one issued while
    # another coroutine holds BEGIN would silently join (and share the fate of) that
    # transaction, so it waits for the lock then; otherwise it goes straight to the database
    # thread's queue, behind whatever is already there, and many commits can be queued at
    # once instead of each waiting for the previous one's round trip. (aiosqlite queues the
    # call before its first await, so a BEGIN issued later is queued after it.)
    # execute_fetchall is one round trip to the database thread; a cursor would cost three.

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        # Wait out an open transaction, but never hold the lock during this statement's own
        # round trip: statements that did would queue behind each other one round trip at a
        # time, and under load that convoy never ends. Between the wait and the call below
        # there is no await, so a BEGIN woken meanwhile is queued after this statement.
        # Batched writes queued before it for the next flush go first: what a caller wrote
        # before it reads is read back.
        await self._drained()
        await self._open_transaction_ended()
        return list(await self._db.execute_fetchall(sql, params))

    async def _open_transaction_ended(self) -> None:
        """Wait out a transaction another coroutine holds open, without taking the lock for
        what the caller does next (it returns without a turn of the loop when none is open)."""
        while self._lock.locked():
            async with self._lock:
                pass

    async def _write_batch(self, entries: Sequence[tuple[Write[Any, Any], Any]]) -> list[Any]:
        """Commit a flush's writes as one transaction in one call to the database thread:
        synced when any of them must be, else without a sync of its own (the module's note)."""
        batch: list[_Run] = [(write, *write.statement(items), items)
                             for write, items in runs(entries)]
        synced = any(write.synced for write, *_ in batch)
        # As in `_all`: wait out an open transaction, then no await until the call is queued.
        await self._open_transaction_ended()
        # Numbered as queued: a synced commit queued after it carries it (one thread, in order).
        mark = self._lazy_count
        if not synced:
            self._lazy_count += 1
            self._unsynced.append((self._lazy_count, asyncio.get_running_loop().time()))
        done: tuple[list[Any], bool] = await self._db._execute(  # type: ignore[no-untyped-call]
            _commit_runs, self._db._conn, batch, synced)
        results, wrote = done
        if not synced:
            if self._sync_task is None:
                self._sync_task = asyncio.create_task(self._sync_soon(), name="store-lazy-sync")
        elif wrote:  # nothing written (duplicates only) commits nothing, and syncs nothing
            self._carried_to(mark)
        return results

    def unsynced_commits(self) -> int:
        """Unsynced commits not yet known to be on disk (carried by no synced commit since)."""
        return sum(1 for number, _ in self._unsynced if number > self._carried)

    def _carried_to(self, mark: int) -> None:
        """A synced commit queued at `mark` is on disk, and the unsynced ones before it."""
        self._carried = max(self._carried, mark)

    async def _sync_soon(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                while self._unsynced and self._unsynced[0][0] <= self._carried:
                    self._unsynced.popleft()
                if not self._unsynced:
                    return
                due = self._unsynced[0][1] + LAZY_SYNC - loop.time()
                if due > 0:
                    await asyncio.sleep(due)
                    continue
                mark = self._lazy_count
                # A passive checkpoint syncs the WAL first (the connection is
                # synchronous=FULL); it never waits for readers. Refused (a full disk, the
                # connection closed, which checkpointed): the next synced commit carries the
                # lazy ones all the same.
                with suppress(aiosqlite.Error, ValueError):
                    await self._all("PRAGMA wal_checkpoint(PASSIVE)")
                self._carried_to(mark)
        finally:
            self._sync_task = None

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = await self._all(sql, params)
        return rows[0] if rows else None


# One run of a flush: its kind of write, the statement and parameters, and its items.
_Run = tuple[Write[Any, Any], str, Sequence[Any], list[Any]]


def _commit_runs(conn: sqlite3.Connection, batch: Sequence[_Run], synced: bool
                 ) -> tuple[list[Any], bool]:
    """In the database thread: a flush's runs committed as one transaction (synced or not),
    their results, and whether anything was written."""
    changes = conn.total_changes
    if not synced:
        conn.execute("PRAGMA synchronous=NORMAL")
    try:
        if len(batch) == 1:  # one statement is its own transaction
            return _results(conn, batch[0]), conn.total_changes != changes
        conn.execute("BEGIN IMMEDIATE")
        try:
            results = [result for run in batch for result in _results(conn, run)]
            conn.execute("COMMIT")
        except BaseException:
            # SQLite ends it itself on some errors (a full disk at COMMIT), not all: left
            # open, every statement after it would join it, never committed.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results, conn.total_changes != changes
    finally:
        if not synced:
            conn.execute("PRAGMA synchronous=FULL")


def _results(conn: sqlite3.Connection, run: _Run) -> list[Any]:
    write, sql, params, items = run
    return list(write.results(items, conn.execute(sql, params).fetchall()))
