"""Every message a user sent, from its arrival until it is answered (or dropped or failed)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from picobridge.contract import (
    DEFAULT_AGENT,
    Attachment,
    ChatRef,
    InboundMessage,
    OutgoingReply,
    ReplyKind,
)
from picobridge.store.batching import Write
from picobridge.store.chats import ensure_chat
from picobridge.store.connection import Database, batch_fields
from picobridge.store.records import StoredMessage, StoredReply, clean, clean_inbound

_INSERT_KNOWN = (
    "INSERT INTO inbound(platform, platform_msg_id, sender_id, sender_name, text,"
    " attachments, reply_to, received_at, updated_at, chat_key, session_id)"
    f" SELECT {batch_fields(9)}, c.chat_key, c.session_id FROM json_each(?) m"
    " JOIN chats c ON c.chat_key = json_extract(m.value, '$[9]')"
    " AND c.agent = json_extract(m.value, '$[10]')"
    " AND c.kind IS json_extract(m.value, '$[11]')"
    " WHERE true ORDER BY m.key"  # in arrival order: a chat's ids follow its messages
    " ON CONFLICT(platform, platform_msg_id) DO NOTHING"
    " RETURNING id, platform, platform_msg_id, session_id")


# One message (the most common batch): the same, its values bound as they are, which costs
# SQLite about half the work of reading them out of JSON.
_INSERT_ONE_KNOWN = (
    "INSERT INTO inbound(platform, platform_msg_id, sender_id, sender_name, text,"
    " attachments, reply_to, received_at, updated_at, chat_key, session_id)"
    " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, c.chat_key, c.session_id FROM chats c"
    " WHERE c.chat_key = ? AND c.agent = ? AND c.kind IS ?"
    " ON CONFLICT(platform, platform_msg_id) DO NOTHING"
    " RETURNING id, platform, platform_msg_id, session_id")


def _insert_known(batch: Sequence[tuple[Any, ...]]) -> tuple[str, Sequence[Any]]:
    if len(batch) == 1:
        return _INSERT_ONE_KNOWN, batch[0]
    return _INSERT_KNOWN, (json.dumps(batch, ensure_ascii=False),)


def _inserted(batch: Sequence[tuple[Any, ...]], rows: list[Any]
              ) -> list[tuple[int, str] | None]:
    stored = {(r[1], r[2]): (int(r[0]), str(r[3])) for r in rows}
    # pop: of two copies of one message in a batch only the first was inserted.
    return [stored.pop((item[0], item[1]), None) for item in batch]


# Messages of known chats talking to the message's agent, in one statement; None for a new
# chat, a chat switching agent or of a kind not recorded yet (a chat from before migration
# 0014), or a message already stored (also when the same message is twice in the batch).
# Synced: the platform is told it has arrived once this returns.
INSERT_KNOWN: Write[tuple[Any, ...], tuple[int, str] | None] = Write(
    "inbound", _insert_known, _inserted, synced=True)


_DISPATCHED = ("UPDATE inbound SET status = 'dispatched', attempts = attempts + 1,"
               " updated_at = ? WHERE status = 'received'")
_DISPATCHED_ONE = f"{_DISPATCHED} AND id = ?"
_DISPATCHED_MANY = f"{_DISPATCHED} AND id IN (SELECT value FROM json_each(?))"


def _dispatched(waves: Sequence[list[int]]) -> tuple[str, tuple[float, int | str]]:
    ids = [i for wave in waves for i in wave]
    if len(ids) == 1:
        return _DISPATCHED_ONE, (time.time(), ids[0])
    return _DISPATCHED_MANY, (time.time(), json.dumps(ids))


# Lost in a power cut, the messages are dispatched again after it, one attempt less counted:
# as if the cut had come a moment earlier.
MARK_DISPATCHED: Write[list[int], None] = Write(
    "dispatched", _dispatched, lambda waves, rows: [None] * len(waves))


# Each message's attempt refunded by the largest refund asked for it in the run (0 or 1).
_REQUEUED = (
    "UPDATE inbound SET status = 'received', updated_at = ?2, attempts = MAX(0, attempts -"
    " (SELECT MAX(json_extract(r.value, '$[1]')) FROM json_each(?1) r"
    "  WHERE json_extract(r.value, '$[0]') = inbound.id))"
    " WHERE status = 'dispatched'"
    " AND id IN (SELECT json_extract(value, '$[0]') FROM json_each(?1))")


def _requeued(batch: Sequence[tuple[list[int], bool]]) -> tuple[str, tuple[str, float]]:
    pairs = [(i, int(refund)) for ids, refund in batch for i in ids]
    return _REQUEUED, (json.dumps(pairs), time.time())


# In the queue of the dispatch marks, in the order it came: a message put back and dispatched
# again before its requeue is written must end up dispatched, its new attempt counted (a
# statement of its own would wait for the next flush, which takes that new mark along and runs
# it first). Synced as it always was.
MARK_REQUEUED: Write[tuple[list[int], bool], None] = Write(
    "requeued", _requeued, lambda batch, rows: [None] * len(batch), synced=True)


async def _seen(db: aiosqlite.Connection, platform: str, platform_msg_id: str) -> bool:
    rows = await db.execute_fetchall(
        "SELECT 1 FROM inbound WHERE platform = ? AND platform_msg_id = ?",
        (platform, platform_msg_id))
    return bool(list(rows))


class InboundTable(Database):
    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        super().__init__(db, path)
        self._insert_known = self._batched(INSERT_KNOWN)
        # One flush in flight at a time, the waves meanwhile joined: while another process
        # holds the write lock, each statement on the connection waits out the busy timeout,
        # and a record per wave would queue the chats' answers and new messages behind one
        # such wait each.
        self._mark_dispatched = self._batched(MARK_DISPATCHED)
        self._dispatched_soon = self._queued(MARK_DISPATCHED)
        self._requeue = self._batched(MARK_REQUEUED, after_writes=True)

    async def record_inbound(self, msg: InboundMessage,
                             agent: str = DEFAULT_AGENT) -> StoredMessage | None:
        """Commit a new message to the chat's current session with `agent` (which becomes the
        chat's current agent); None when it is a duplicate."""
        now = time.time()
        msg = clean_inbound(msg)
        # ASCII: a lone surrogate in a file's name or text stays a JSON escape, not a str
        # that no UTF-8 encoder takes.
        attachments = json.dumps([a.to_json() for a in msg.attachments]) \
            if msg.attachments else "[]"
        values = (msg.chat.platform, msg.platform_message_id, msg.sender_id, msg.sender_name,
                  msg.text, attachments, msg.reply_to, now, now)
        # A known chat (the common case) is written together with other messages arriving
        # at the same moment; a new chat or a duplicate takes the slow path.
        inserted = await self._insert_known((*values, msg.chat.key, agent, msg.chat_kind))
        if inserted is None:
            async with self._tx() as db:
                if await _seen(db, msg.chat.platform, msg.platform_message_id):
                    return None
                session_id = await ensure_chat(db, msg.chat, agent)
                await db.execute("UPDATE chats SET kind = ? WHERE chat_key = ?",
                                 (msg.chat_kind, msg.chat.key))
                rows = list(await db.execute_fetchall(
                    "INSERT INTO inbound(platform, platform_msg_id, sender_id, sender_name, text,"
                    " attachments, reply_to, received_at, updated_at, chat_key, session_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id, session_id",
                    (*values, msg.chat.key, session_id)))
            inserted = rows[0][0], rows[0][1]
        row_id, session_id = inserted
        return StoredMessage(row_id, msg.platform_message_id, msg.chat, session_id, msg.sender_id,
                             msg.text, msg.attachments, msg.reply_to, "received", 0, now,
                             msg.sent_at, agent)

    async def seen(self, platform: str, platform_msg_id: str) -> bool:
        await self._drained()
        async with self._lock:
            return await _seen(self._db, platform, platform_msg_id)

    async def record_command(self, msg: InboundMessage, reply: str,
                             kind: ReplyKind = ReplyKind.NOTICE) -> StoredReply | None:
        """Record a handled bridge command and its reply together (a NOTICE, or a QUESTION
        offering choices); None when seen before."""
        now = time.time()
        msg, reply = clean_inbound(msg), clean(reply)
        async with self._tx() as db:
            session_id = await ensure_chat(db, msg.chat)
            cur = await db.execute(
                "INSERT INTO inbound(platform, platform_msg_id, chat_key, session_id, sender_id,"
                " sender_name, text, reply_to, status, received_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'answered', ?, ?)"
                " ON CONFLICT(platform, platform_msg_id) DO NOTHING",
                (msg.chat.platform, msg.platform_message_id, msg.chat.key, session_id,
                 msg.sender_id, msg.sender_name, msg.text, msg.reply_to, now, now),
            )
            if cur.rowcount == 0:
                return None
            inbound_id = cur.lastrowid
            out = await db.execute(
                "INSERT INTO outbox(chat_key, session_id, kind, text, reply_to, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (msg.chat.key, session_id, kind.value, reply, msg.reply_to, now))
            await db.execute("UPDATE inbound SET outbox_id = ? WHERE id = ?",
                             (out.lastrowid, inbound_id))
        assert out.lastrowid is not None
        return StoredReply(msg.chat, OutgoingReply(
            reply, kind, msg.reply_to, (msg.platform_message_id,),
            outbox_id=out.lastrowid))

    async def mark_dispatched(self, ids: Sequence[int]) -> None:
        await self._mark_dispatched(list(ids))

    def mark_dispatched_soon(self, ids: Sequence[int]) -> asyncio.Future[None]:
        """`mark_dispatched` queued now for whoever does not wait for it (the turn goes to the
        agent meanwhile); the future says when it is written."""
        return self._dispatched_soon(list(ids))

    async def requeue(self, ids: Sequence[int], *, refund: bool = False) -> None:
        """Put dispatched messages back in the queue; `refund` un-counts the attempt."""
        await self._requeue((list(ids), refund))

    async def update_text(self, platform: str, platform_msg_id: str,
                          text: str) -> StoredMessage | None:
        """Edit a message that has not reached the agent yet; None if it is too late."""
        text = clean(text)
        async with self._tx() as db:
            cur = await db.execute(
                "UPDATE inbound SET text = ?, updated_at = ? WHERE platform = ?"
                " AND platform_msg_id = ? AND status = 'received'",
                (text, time.time(), platform, platform_msg_id))
            if cur.rowcount == 0:
                return None
        rows = await self._open_rows("AND i.platform = ? AND i.platform_msg_id = ?",
                                     (platform, platform_msg_id))
        return rows[0] if rows else None

    async def drop_queued(self, chat: ChatRef, ids: Iterable[int]) -> int:
        async with self._tx() as db:
            cur = await db.executemany(
                "UPDATE inbound SET status = 'dropped', updated_at = ? WHERE id = ?"
                " AND chat_key = ? AND status = 'received'",
                [(time.time(), i, chat.key) for i in ids])
            return cur.rowcount

    async def open_messages(self) -> list[StoredMessage]:
        """Messages not yet answered, oldest first: what a restart must dispatch again."""
        return await self._open_rows("", ())

    async def _open_rows(self, where: str, params: Sequence[Any]) -> list[StoredMessage]:
        rows = await self._all(
            "SELECT i.id, i.platform_msg_id, c.platform, c.chat_id, c.thread_id, i.session_id,"
            " i.sender_id, i.text, i.attachments, i.reply_to, i.status, i.attempts, i.received_at,"
            " COALESCE(s.agent, ?)"
            " FROM inbound i JOIN chats c ON c.chat_key = i.chat_key"
            " LEFT JOIN sessions s ON s.session_id = i.session_id"
            f" WHERE i.status IN ('received', 'dispatched') {where} ORDER BY i.id",
            (DEFAULT_AGENT, *params))
        return [
            StoredMessage(r[0], r[1], ChatRef(r[2], r[3], r[4]), r[5], r[6], r[7],
                          tuple(Attachment.from_json(a) for a in json.loads(r[8])), r[9], r[10],
                          r[11], r[12], None, r[13])
            for r in rows
        ]
