"""The store's commits: which writes skip their sync and which carry it, writes queued
together in one transaction, and what a refused commit leaves behind."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3

import pytest

from picobridge.contract import OutgoingReply
from picobridge.store import Store, connection
from tests.unit.store_support import CHAT, msg, store

__all__ = ["store"]  # the fixture, used by name


async def test_unsynced_marks_are_committed_at_once_and_leave_the_connection_synced(
        store: Store) -> None:
    """A dispatch or sent mark skips its own sync, not its commit: another process (or this
    one after a kill) reads it at once, and the next commits are synced again (FULL)."""
    m = await store.record_inbound(msg(1))
    assert m is not None
    await store.mark_dispatched([m.id])
    with sqlite3.connect(store.path) as other:
        assert other.execute("SELECT status, attempts FROM inbound WHERE id = ?",
                             (m.id,)).fetchone() == ("dispatched", 1)
    stored = await store.add_reply(CHAT, OutgoingReply("answer"), settles=[m])
    await store.mark_sent(stored.id)
    with sqlite3.connect(store.path) as other:
        assert other.execute("SELECT status FROM outbox WHERE id = ?",
                             (stored.id,)).fetchone() == ("sent",)
    assert await store._one("PRAGMA synchronous") == (2,)  # FULL


async def traced(store: Store) -> list[str]:
    """The statements the store's connection runs from now on."""
    seen: list[str] = []
    conn = store._db._conn
    await store._db._execute(lambda: conn.set_trace_callback(seen.append))  # type: ignore[no-untyped-call]
    return seen


async def test_a_messages_synced_commit_carries_the_unsynced_ones_before_it(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "LAZY_SYNC", 3600.0)  # no checkpoint in between
    m = await store.record_inbound(msg(1))
    assert m is not None
    await store.mark_dispatched([m.id])
    await store.add_reply(CHAT, OutgoingReply("answer"), settles=[m])
    assert store.unsynced_commits() == 2
    await store.record_inbound(msg(2))  # synced: the WAL is one file, synced in order
    assert store.unsynced_commits() == 0


async def test_unsynced_commits_with_no_synced_one_after_are_checkpointed(
        store: Store) -> None:
    seen = await traced(store)
    m = await store.record_inbound(msg(1))
    assert m is not None
    await store.mark_dispatched([m.id])
    assert store.unsynced_commits() == 1
    sync = store._sync_task
    assert sync is not None
    await sync
    assert store.unsynced_commits() == 0
    assert [s for s in seen if "wal_checkpoint" in s] == ["PRAGMA wal_checkpoint(PASSIVE)"]


async def test_writes_queued_together_commit_as_one_transaction_arrivals_apart(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dispatch, an answer and an answer sent, queued while a flush runs: one unsynced
    transaction in the next flush. A message's arrival meanwhile waits for none of them: its
    own synced commit goes to the database at once, and carries what was committed before."""
    monkeypatch.setattr(connection, "LAZY_SYNC", 3600.0)  # no checkpoint in between
    first, answered = await store.record_inbound(msg(1)), await store.record_inbound(msg(2))
    assert first is not None and answered is not None
    earlier = await store.add_reply(CHAT, OutgoingReply("earlier"), settles=[answered])
    seen = await traced(store)
    leading = asyncio.ensure_future(store.mark_dispatched([answered.id]))
    await asyncio.sleep(0)  # its flush is under way: the writes below wait for the next one
    together = asyncio.gather(
        store.mark_dispatched([first.id]),
        store.add_reply(CHAT, OutgoingReply("answer"), settles=[first]),
        store.mark_sent(earlier.id))
    arrival = asyncio.ensure_future(store.record_inbound(msg(3)))
    await leading
    _, reply, _ = await together
    assert await arrival is not None
    # (SQLite's trace names a statement again as its triggers and RETURNING rows run.)
    statements = [s.split(" ", 2)[:2] for s, _ in itertools.groupby(seen)]
    begun = statements.index(["BEGIN", "IMMEDIATE"])
    assert statements[begun - 1:] == [
        ["PRAGMA", "synchronous=NORMAL"], ["BEGIN", "IMMEDIATE"], ["UPDATE", "inbound"],
        ["INSERT", "INTO"], ["UPDATE", "outbox"], ["COMMIT"], ["PRAGMA", "synchronous=FULL"]]
    arrived = next(i for i, s in enumerate(seen) if s.startswith("INSERT INTO inbound"))
    assert statements.index(["INSERT", "INTO"]) < begun  # the arrival went first,
    assert seen[arrived - 1] == "PRAGMA synchronous=FULL"  # synced
    assert store.unsynced_commits() == 1  # the leading mark was carried by it, not the rest
    await store.record_inbound(msg(4))
    assert store.unsynced_commits() == 0
    with sqlite3.connect(store.path) as other:
        assert dict(other.execute("SELECT platform_msg_id, status FROM inbound")) == {
            "m1": "answered", "m2": "delivered", "m3": "received", "m4": "received"}
        assert other.execute("SELECT status FROM outbox WHERE id = ?",
                             (reply.id,)).fetchone() == ("pending",)


async def refuse_one_commit(store: Store) -> list[str]:
    """The store's next COMMIT is refused (an authorizer), the transaction left open, as some
    failures leave it; the list says when that happened."""
    conn = store._db._conn
    refused: list[str] = []

    def authorizer(action: int, arg: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_TRANSACTION and arg == "COMMIT" and not refused:
            refused.append(arg)
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    await store._db._execute(lambda: conn.set_authorizer(authorizer))  # type: ignore[no-untyped-call]
    return refused


async def test_a_refused_commit_of_a_batch_leaves_no_transaction_open(store: Store) -> None:
    """Writes batched together whose COMMIT fails are written again one by one; had the
    transaction stayed open, they and every statement after them (a message's arrival, its
    platform then told) would run inside it, never committed."""
    first, second = await store.record_inbound(msg(1)), await store.record_inbound(msg(2))
    assert first is not None and second is not None
    refused = await refuse_one_commit(store)
    # The first flush is under way; the two writes after it go together, in one transaction.
    await asyncio.gather(store.mark_sent(12345), store.mark_dispatched([first.id]),
                         store.mark_sent(12346))
    assert refused == ["COMMIT"]
    assert await store.record_inbound(msg(3)) is not None
    with sqlite3.connect(store.path) as other:
        assert dict(other.execute("SELECT platform_msg_id, status FROM inbound")) == {
            "m1": "dispatched", "m2": "received", "m3": "received"}


async def test_a_refused_commit_of_a_transaction_leaves_none_open(store: Store) -> None:
    """The same for a transaction of several statements (a new chat's first message)."""
    refused = await refuse_one_commit(store)
    with pytest.raises(sqlite3.DatabaseError):
        await store.record_inbound(msg(1))
    assert refused == ["COMMIT"]
    assert await store.record_inbound(msg(2)) is not None
    with sqlite3.connect(store.path) as other:
        assert dict(other.execute("SELECT platform_msg_id, status FROM inbound")) == {
            "m2": "received"}


async def test_a_dispatch_issued_after_a_requeue_is_written_after_it(store: Store) -> None:
    """The router puts a turn's messages back and writes the requeue; the dispatcher may take
    them again at once. That new dispatch mark must land after the requeue (the message ends
    dispatched, its new attempt counted), even when the requeue had to wait for writes
    queued before it."""
    put_back, other = await store.record_inbound(msg(1)), await store.record_inbound(msg(2))
    assert put_back is not None and other is not None
    await store.mark_dispatched([put_back.id])
    # Started in this order: the first flush is under way when the others are issued, the
    # second write waits for the next flush, and the requeue is issued before the new mark.
    await asyncio.gather(
        store.mark_dispatched([other.id]),
        store.mark_sent(12345),
        store.requeue([put_back.id], refund=True),
        store.mark_dispatched([put_back.id]))
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT status, attempts FROM inbound WHERE id = ?",
                          (put_back.id,)).fetchone() == ("dispatched", 1)


async def test_requeues_batched_together_refund_each_as_asked(store: Store) -> None:
    stored = [await store.record_inbound(msg(n)) for n in range(1, 4)]
    ids = [m.id for m in stored if m is not None]
    await store.mark_dispatched(ids)
    await store.mark_dispatched(ids[:2])  # not received any more: no second attempt
    blocker = asyncio.ensure_future(store.mark_sent(12345))  # the next requeues queue up
    await asyncio.gather(store.requeue(ids[:1], refund=True), store.requeue(ids[1:], refund=False),
                         blocker)
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT status, attempts FROM inbound ORDER BY id").fetchall() == [
            ("received", 0), ("received", 1), ("received", 1)]
