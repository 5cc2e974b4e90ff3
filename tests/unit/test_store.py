from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path

import pytest

from picobridge.contract import ChatRef, InboundMessage, OutgoingReply, ReplyKind
from picobridge.store import Store
from picobridge.store.schema import SchemaError, latest_version
from tests.unit.store_support import CHAT, msg, store

__all__ = ["store"]  # the fixture, used by name


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
