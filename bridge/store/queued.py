"""What still waits for the agent, seen per chat and per sender: the chats to tell during an
outage, a denied sender's messages to hold back, and messages moved to another agent."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from picobridge.contract import DEFAULT_AGENT, ChatRef, OutgoingReply
from picobridge.store.chats import ensure_chat
from picobridge.store.connection import Database
from picobridge.store.records import StoredReply, clean


@dataclass(frozen=True, slots=True)
class WaitingChat:
    chat: ChatRef
    reply_to: str | None  # what a reply to its oldest waiting message refers to
    agent: str = DEFAULT_AGENT  # whose answer it waits for


# Why a denied sender's queued message was not sent (its row's error).
DENIED = "not sent: the sender's access was revoked"


class QueuedTable(Database):
    async def waiting_chats(self) -> list[WaitingChat]:
        """Chats with a message not yet answered, oldest first."""
        rows = await self._all(
            "SELECT c.platform, c.chat_id, c.thread_id, i.reply_to, COALESCE(s.agent, ?)"
            " FROM inbound i JOIN chats c ON c.chat_key = i.chat_key"
            " LEFT JOIN sessions s ON s.session_id = i.session_id"
            " WHERE i.id IN (SELECT min(id) FROM inbound"
            "   WHERE status IN ('received', 'dispatched') GROUP BY chat_key)"
            " ORDER BY i.id", (DEFAULT_AGENT,))
        return [WaitingChat(ChatRef(r[0], r[1], r[2]), r[3], r[4]) for r in rows]

    async def hold_back(self, platform: str, sender_id: str, reason: str) -> int:
        """Mark a sender's messages that have not reached the agent as dropped, with why;
        returns how many (the rows stay, for `picobridge failed` and the record)."""
        async with self._tx() as db:
            cur = await db.execute(
                "UPDATE inbound SET status = 'dropped', error = ?, updated_at = ?"
                " WHERE platform = ? AND sender_id = ? AND status = 'received'",
                (reason, time.time(), platform, sender_id))
            return cur.rowcount

    async def mark_held_back(self, ids: Sequence[int], reason: str) -> None:
        if ids:
            async with self._tx() as db:
                await db.executemany(
                    "UPDATE inbound SET status = 'dropped', error = ?, updated_at = ?"
                    " WHERE id = ? AND status = 'received'",
                    [(reason, time.time(), i) for i in ids])

    async def move_queued(self, chat: ChatRef, ids: Sequence[int], agent: str,
                          notice: OutgoingReply) -> tuple[str, StoredReply]:
        """Move messages still waiting to the chat's current session with `agent` (which
        becomes its agent) and queue `notice` to the chat, both or neither; returns the
        session and the notice as the outbox takes it."""
        text, now = clean(notice.text), time.time()
        async with self._tx() as db:
            session = await ensure_chat(db, chat, agent)
            await db.execute(
                "UPDATE inbound SET session_id = ?, updated_at = ? WHERE chat_key = ?"
                " AND status IN ('received', 'dispatched')"
                " AND id IN (SELECT value FROM json_each(?))",
                (session, now, chat.key, json.dumps(list(ids))))
            rows = list(await db.execute_fetchall(
                "INSERT INTO outbox(chat_key, session_id, kind, text, reply_to, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (chat.key, session, notice.kind.value, text, notice.reply_to, now)))
        return session, StoredReply(chat, dataclasses.replace(notice, text=text,
                                                              outbox_id=int(rows[0][0])))
