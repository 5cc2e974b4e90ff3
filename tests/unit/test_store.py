from __future__ import annotations

import asyncio
import itertools
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from picobridge.contract import ChatRef, InboundMessage, OutgoingReply, ReplyKind
from picobridge.store import Store, connection
from picobridge.store.schema import SchemaError, latest_version

CHAT = ChatRef("telegram", "-100123", "7")


def msg(n: int, chat: ChatRef = CHAT, text: str = "hi") -> InboundMessage:
    return InboundMessage(chat=chat, sender_id="42", text=f"{text} {n}",
                          platform_message_id=f"m{n}", reply_to=str(n))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await Store.open(tmp_path / "db" / "picobridge.db")
    yield s
    await s.close()


async def test_migrations_are_recorded_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    s = await Store.open(path)
    assert await s.schema_version() == latest_version()
    await s.close()
    s = await Store.open(path)  # nothing to apply the second time
    assert await s.schema_version() == latest_version()
    await s.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_refuses_a_database_from_a_newer_picobridge(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    await (await Store.open(path)).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO schema_migrations VALUES (999, 'future', 0)")
    with pytest.raises(SchemaError, match="newer than this picobridge"):
        await Store.open(path)


async def test_inbound_is_deduplicated_on_platform_id(store: Store) -> None:
    first = await store.record_inbound(msg(1))
    assert first is not None and first.status == "received"
    assert await store.record_inbound(msg(1)) is None
    # The same id on another platform is another message.
    other = InboundMessage(chat=ChatRef("slack", "C1"), sender_id="U1", text="x",
                           platform_message_id="m1")
    assert await store.record_inbound(other) is not None


async def test_sessions_are_stable_readable_and_rotate(store: Store) -> None:
    s1 = await store.current_session(CHAT)
    assert s1 == await store.current_session(CHAT)
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", s1)
    assert s1.startswith("telegram.-100123.7.")
    s2 = await store.new_session(CHAT)
    s3 = await store.new_session(CHAT)  # twice in one second still gives distinct ids
    assert len({s1, s2, s3}) == 3
    assert await store.current_session(CHAT) == s3
    # An old session still leads to its chat (late answers, scheduled jobs).
    assert await store.chat_for_session(s1) == CHAT
    history = await store.session_history(CHAT)
    assert [h[0] for h in history] == [s1, s2, s3]
    assert history[0][2] is not None and history[2][2] is None


async def test_message_lifecycle_until_delivered(store: Store) -> None:
    m = await store.record_inbound(msg(1))
    assert m is not None
    await store.mark_dispatched([m.id])
    [open_msg] = await store.open_messages()
    assert (open_msg.status, open_msg.attempts) == ("dispatched", 1)
    stored = await store.add_reply(CHAT, OutgoingReply("answer", reply_to="1"), settles=[m])
    assert await store.open_messages() == []
    [pending] = await store.pending_replies()
    assert pending == stored  # what the outbox is handed is what a restart would read
    assert (pending.text, pending.reply.answers, pending.reply.reply_to) == ("answer", ("m1",), "1")
    assert await store.open_for_chat(CHAT.key) == 2  # answered message + pending reply
    await store.mark_sent(stored.id)
    assert await store.pending_replies() == []
    assert await store.open_for_chat(CHAT.key) == 0
    assert (await store.counts())["delivered"] == 1


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


async def test_requeue_with_refund_uncounts_the_attempt(store: Store) -> None:
    m = await store.record_inbound(msg(1))
    assert m is not None
    await store.mark_dispatched([m.id])
    await store.requeue([m.id], refund=True)
    [again] = await store.open_messages()
    assert (again.status, again.attempts) == ("received", 0)


async def test_permanent_send_failure_marks_messages_failed(store: Store) -> None:
    m = await store.record_inbound(msg(1))
    assert m is not None
    out = (await store.add_reply(CHAT, OutgoingReply("a"), settles=[m])).id
    await store.mark_send_failed(out, "transient", permanent=False)
    assert len(await store.pending_replies()) == 1
    await store.mark_send_failed(out, "chat not found", permanent=True)
    assert await store.pending_replies() == []
    assert (await store.counts()).get("failed") == 1


async def test_edit_only_while_queued(store: Store) -> None:
    m = await store.record_inbound(msg(1))
    assert m is not None
    edited = await store.update_text("telegram", "m1", "edited")
    assert edited is not None and edited.text == "edited"
    await store.mark_dispatched([m.id])
    assert await store.update_text("telegram", "m1", "too late") is None


async def test_access_grants_and_notices(store: Store) -> None:
    assert await store.access_decision("telegram", "5") is None
    assert await store.first_denial("telegram", "5") is True
    assert await store.first_denial("telegram", "5") is False
    await store.set_access("telegram", "5", True)
    assert await store.access_decision("telegram", "5") is True
    await store.set_access("telegram", "5", False)
    assert await store.access_decision("telegram", "5") is False
    # Denied again: they hear why again.
    assert await store.first_denial("telegram", "5") is True


async def test_cursor_round_trip(store: Store) -> None:
    assert await store.get_cursor("telegram.offset") is None
    await store.set_cursor("telegram.offset", "10")
    await store.set_cursor("telegram.offset", "11")
    assert await store.get_cursor("telegram.offset") == "11"


async def test_command_is_recorded_with_its_reply_once(store: Store) -> None:
    command = InboundMessage(chat=CHAT, sender_id="42", text="/help", platform_message_id="c1")
    stored = await store.record_command(command, "help text")
    assert await store.record_command(command, "help text") is None
    [reply] = await store.pending_replies()
    assert reply == stored
    assert reply.kind is ReplyKind.NOTICE and reply.reply.answers == ("c1",)
    assert await store.open_messages() == []


async def test_messages_arriving_together_are_stored_in_order_and_once(store: Store) -> None:
    other = ChatRef("slack", "D1")
    first = await store.record_inbound(msg(0))
    assert first is not None
    # One burst: known chat, a chat never seen, and a redelivered copy within the burst.
    burst = [msg(1), msg(2), msg(1), msg(3, chat=other), msg(4)]
    stored = await asyncio.gather(*(store.record_inbound(m) for m in burst))
    assert [s is not None for s in stored] == [True, True, False, True, True]
    ours = [s for s in stored if s is not None and s.chat == CHAT]
    assert [s.platform_msg_id for s in ours] == ["m1", "m2", "m4"]
    assert [s.id for s in ours] == sorted(s.id for s in ours)
    assert all(s.session_id == first.session_id for s in ours)
    open_ids = [m.platform_msg_id for m in await store.open_messages()]
    # The new chat's message took the slow path; within a chat the order is kept.
    assert sorted(open_ids) == ["m0", "m1", "m2", "m3", "m4"]
    assert [i for i in open_ids if i != "m3"] == ["m0", "m1", "m2", "m4"]
    assert await store.record_inbound(msg(2)) is None


async def test_replies_marked_sent_together_each_deliver_their_messages(store: Store) -> None:
    messages = [await store.record_inbound(msg(n)) for n in range(3)]
    replies = [await store.add_reply(CHAT, OutgoingReply(f"a{m.id}"), settles=[m])
               for m in messages if m is not None]
    await asyncio.gather(*(store.mark_sent(r.id) for r in replies))
    assert await store.pending_replies() == []
    assert (await store.counts())["delivered"] == 3


async def test_lone_surrogates_and_nul_are_stored_as_replacement_characters(
    store: Store,
) -> None:
    bad = InboundMessage(chat=CHAT, sender_id="42", sender_name="Ann\udfff",
                         text="half \ud83d a smiley\x00 and the rest \x01",
                         platform_message_id="bad")
    assert await store.record_inbound(msg(0)) is not None  # the chat is known: batched path
    # Written in one batch with good messages: the bad one must not take them down with it.
    stored = await asyncio.gather(store.record_inbound(msg(1)), store.record_inbound(bad),
                                  store.record_inbound(msg(2)))
    assert all(s is not None for s in stored)
    assert [m.text for m in await store.open_messages()] == [
        "hi 0", "hi 1", "half \ufffd a smiley\ufffd and the rest \x01", "hi 2"]
    reply = await store.add_reply(CHAT, OutgoingReply("oops \udc00 \x00 end"),
                                  error="x\ud800")
    assert reply.text == "oops \ufffd \ufffd end"
    [pending] = await store.pending_replies()
    assert pending == reply


async def test_a_database_that_takes_no_write_is_refused_at_open(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                ) -> None:
    # As a read-only file does for an unprivileged service user: SQLite opens it, and only
    # the first write fails. The store must say so at once, with check's words.
    import aiosqlite

    from picobridge.store import StoreError

    connect = aiosqlite.connect

    def read_only(*args: object, **kwargs: object) -> aiosqlite.Connection:
        db = connect(*args, **kwargs)  # type: ignore[arg-type]
        original = db._connect

        async def connected() -> aiosqlite.Connection:
            opened = await original()
            await opened.execute("PRAGMA query_only = ON")
            return opened

        db._connect = connected  # type: ignore[method-assign]
        return db

    await (await Store.open(tmp_path / "ro.db")).close()
    monkeypatch.setattr(aiosqlite, "connect", read_only)
    with pytest.raises(StoreError, match=r"ro\.db is not writable"):
        await Store.open(tmp_path / "ro.db", migrate_schema=False)


@pytest.mark.parametrize(("seconds", "millis"), [(None, 5000), (0.25, 250)])
async def test_the_busy_timeout_is_store_busy_timeout(tmp_path: Path, seconds: float | None,
                                                      millis: int) -> None:
    # How long a write waits for another process's lock before the outage handling starts.
    s = await (Store.open(tmp_path / "p.db") if seconds is None
               else Store.open(tmp_path / "p.db", busy_timeout=seconds))
    try:
        async with s._db.execute("PRAGMA busy_timeout") as cursor:
            assert await cursor.fetchone() == (millis,)
    finally:
        await s.close()
