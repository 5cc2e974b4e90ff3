"""What a message's path costs the store: the partial indexes of migration 0015 hold only the
rows their lookups ask for (so it writes fewer index pages), and those lookups still use them;
statement journals stay in memory."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from picobridge.contract import ChatRef, InboundMessage, OutgoingReply
from picobridge.store import Store

CHAT = ChatRef("telegram", "-100123")


@pytest.fixture
async def path(tmp_path: Path) -> AsyncIterator[Path]:
    """A database with three answered messages, the first two answers sent."""
    db = tmp_path / "p.db"
    store = await Store.open(db)
    replies = []
    for n in range(3):
        stored = await store.record_inbound(InboundMessage(
            chat=CHAT, sender_id="42", text=f"hi {n}", platform_message_id=f"m{n}"))
        assert stored is not None
        await store.mark_dispatched([stored.id])
        replies.append(await store.add_reply(CHAT, OutgoingReply(f"answer {n}"),
                                             session_id=stored.session_id, settles=[stored]))
    await store.record_inbound(InboundMessage(chat=CHAT, sender_id="42", text="waiting",
                                              platform_message_id="m3"))
    for reply in replies[:2]:
        await store.mark_sent(reply.id)
    await store.close()
    yield db


async def test_statement_journals_are_kept_in_memory(tmp_path: Path) -> None:
    """In 1 KiB pieces, not a 64 KiB buffer per write statement that glibc hands back to
    the OS and the next message faults in again (store/connection.py)."""
    store = await Store.open(tmp_path / "p.db")
    try:
        assert await store._one("PRAGMA temp_store") == (2,)  # MEMORY
    finally:
        await store.close()


def entries(db: sqlite3.Connection, index: str) -> int:
    """How many entries the index holds (ANALYZE's count of them)."""
    db.execute("ANALYZE")
    row = db.execute("SELECT stat FROM sqlite_stat1 WHERE idx = ?", (index,)).fetchone()
    return 0 if row is None else int(row[0].split()[0])


def plan(db: sqlite3.Connection, sql: str, params: tuple[object, ...] = ()) -> str:
    return " | ".join(r[3] for r in db.execute(f"EXPLAIN QUERY PLAN {sql}", params))


def test_replies_sent_leave_the_pending_index_and_waiting_messages_the_outbox_one(
        path: Path) -> None:
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM outbox").fetchone()[0] == 3
        assert entries(db, "outbox_pending") == 1  # only the reply not sent yet
        assert db.execute("SELECT count(*) FROM inbound").fetchone()[0] == 4
        assert entries(db, "inbound_by_outbox") == 3  # not the message still waiting


def test_the_lookups_by_status_and_by_reply_still_use_the_indexes(path: Path) -> None:
    with sqlite3.connect(path) as db:
        assert "INDEX outbox_pending" in plan(
            db, "SELECT id FROM outbox o WHERE o.status = 'pending' AND (? IS NULL OR"
            " o.chat_key = ?) ORDER BY o.id", (None, None))
        assert "INDEX outbox_pending" in plan(
            db, "SELECT COUNT(*) FROM outbox WHERE chat_key = ? AND status = 'pending'",
            (CHAT.key,))
        # The sent trigger's lookup and the foreign key's, by a reply's id.
        assert "INDEX inbound_by_outbox" in plan(
            db, "UPDATE inbound SET status = 'delivered' WHERE outbox_id = ?"
            " AND status = 'answered'", (1,))
        assert "INDEX inbound_by_outbox" in plan(
            db, "SELECT 1 FROM inbound i WHERE i.outbox_id = ?", (1,))


def test_what_the_indexes_find_is_what_the_tables_hold(path: Path) -> None:
    with sqlite3.connect(path) as db:
        pending = db.execute("SELECT id FROM outbox WHERE status = 'pending'").fetchall()
        assert pending == db.execute(
            "SELECT id FROM outbox NOT INDEXED WHERE status = 'pending'").fetchall()
        assert len(pending) == 1
        settled = db.execute("SELECT count(*) FROM inbound WHERE outbox_id = ?",
                             (pending[0][0],)).fetchone()[0]
        assert settled == 1
