"""The one connection every table group writes through.

One aiosqlite connection does all the writing (SQLite allows one writer anyway); a lock keeps
one coroutine's multi-statement transaction from interleaving with another's. WAL with
synchronous=FULL: every commit is on disk before it returns, so what a platform was told we
received (a polling offset, an event ack) survives a power cut too, not only a killed daemon.
(With NORMAL the last commits before an OS crash could roll back.) Group commit keeps the cost
to one sync per batch.

Only a message's arrival must be synced before anything goes on (a platform is told we have
it right after). The commits after it on a message's path are written unsynced (`_lazy`), still
before their caller goes on, so a killed daemon loses none of them; the WAL is one file written
in order, so the next synced commit carries them to disk with its own, and when none follows
within LAZY_SYNC seconds a checkpoint syncs them. (Under load a message arrives every moment:
then no checkpoint is needed, and none is made, each of which cost two syncs of its own on the
connection every message's commit waits behind.) A power cut in that window loses no message: it
rolls the message back to where its last synced commit left it, from where it goes on again
(dispatched once more, its answer sent once more: a possible duplicate, as a cut during the
platform's own answer always could make).
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Self, TypeVar

import aiosqlite

from picobridge.private import open_private, private_dir
from picobridge.store.batching import Coalescer
from picobridge.store.schema import (
    SchemaError,
    applied_version,
    latest_version,
    migrate,
    missing_migrations,
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


class StoreError(Exception):
    """The database could not be opened or used."""


def _prepare(path: Path) -> None:
    """Once, at start: a clear word instead of SQLite's for a path that cannot be a database."""
    if path.is_dir():
        raise StoreError(f"cannot open database {path}: it is a directory")
    try:
        private_dir(path.parent)
    except OSError as exc:
        raise StoreError(f"cannot create {path.parent}: {exc.strerror or exc}") from None
    try:
        # Created here, not by SQLite (0644): its -wal and -shm files take this file's mode.
        os.close(open_private(path, os.O_RDWR))
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror or exc}") from None


async def _must_be_writable(db: aiosqlite.Connection, path: Path) -> None:
    """Refuse a database that can never take a write (read-only file or folder) at start, with
    the same words as `picobridge check`, instead of failing on the first message."""
    try:
        await db.execute("BEGIN IMMEDIATE")
        await db.execute("ROLLBACK")
    except aiosqlite.OperationalError as exc:
        if "readonly" in str(exc) or "read-only" in str(exc):
            raise StoreError(f"{path} is not writable") from None
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
        self._coalescers: list[Coalescer[Any, Any]] = []
        self._sync_task: asyncio.Task[None] | None = None
        self._lazy_count = 0  # unsynced commits queued so far
        self._carried = 0  # how many of the first of them a synced commit has put on disk
        self._unsynced: deque[tuple[int, float]] = deque()  # (number, when) of the others

    @classmethod
    async def open(cls, path: Path, *, migrate_schema: bool = True,
                   busy_timeout: float = 5.0) -> Self:
        _prepare(path)
        try:
            db = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, aiosqlite.Error) as exc:
            raise StoreError(f"cannot open database {path}: {exc}") from None
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=FULL")
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            await db.execute(f"PRAGMA busy_timeout={max(1, round(busy_timeout * 1000))}")
            await _must_be_writable(db, path)
            if migrate_schema:
                await migrate(db)
            else:
                version = await applied_version(db)
                latest = latest_version()
                if version != latest or await missing_migrations(db):
                    raise SchemaError(
                        f"database schema is at version {version}, this picobridge needs "
                        f"{latest}; run `picobridge migrate`"
                    )
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
        for pending in self._coalescers:
            await pending.settle()
        if self._sync_task is not None:
            self._sync_task.cancel()
        # Closing the last connection checkpoints the WAL, synced: the lazy commits with it.
        await self._db.close()

    async def schema_version(self) -> int:
        return await applied_version(self._db)

    def _coalesce(self, flush: Callable[[Sequence[Item]], Awaitable[Sequence[Result]]],
                  name: str) -> Coalescer[Item, Result]:
        """A group-commit queue that `close` waits for."""
        # With the lock free, `_all` and `_lazy` queue their statement before they first wait.
        coalescer = Coalescer(flush, name, ready=lambda: not self._lock.locked())
        self._coalescers.append(coalescer)
        return coalescer

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                await self._db.rollback()
                raise
            await self._db.commit()

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
        while self._lock.locked():
            async with self._lock:
                pass
        return list(await self._db.execute_fetchall(sql, params))

    async def _lazy(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """`_all` for a write after a message's arrival: committed without its own sync (see
        the module's note)."""
        while self._lock.locked():
            async with self._lock:
                pass
        conn = self._db._conn  # the three statements must reach the database thread as one

        def unsynced() -> list[Any]:
            conn.execute("PRAGMA synchronous=NORMAL")
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.execute("PRAGMA synchronous=FULL")

        # Numbered as queued: a synced commit queued after it carries it (one thread, in order).
        self._lazy_count += 1
        self._unsynced.append((self._lazy_count, asyncio.get_running_loop().time()))
        rows = await self._db._execute(unsynced)  # type: ignore[no-untyped-call]
        if self._sync_task is None:
            self._sync_task = asyncio.create_task(self._sync_soon(), name="store-lazy-sync")
        return list(rows)

    def unsynced_commits(self) -> int:
        """Unsynced commits not yet known to be on disk (carried by no synced commit since)."""
        return sum(1 for number, _ in self._unsynced if number > self._carried)

    def _synced_mark(self) -> int:
        """Taken before queueing a write that commits synced, for `_carried_to` after it."""
        return self._lazy_count

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
