"""What still waits for the agent, seen per chat and per sender: the chats to tell during an
outage, and a denied sender's messages to hold back."""

from __future__ import annotations

import time
from dataclasses import dataclass

from picobridge.contract import ChatRef
from picobridge.store.connection import Database


@dataclass(frozen=True, slots=True)
class WaitingChat:
    chat: ChatRef
    reply_to: str | None  # what a reply to its oldest waiting message refers to


class QueuedTable(Database):
    async def waiting_chats(self) -> list[WaitingChat]:
        """Chats with a message not yet answered, oldest first."""
        rows = await self._all(
            "SELECT c.platform, c.chat_id, c.thread_id, i.reply_to"
            " FROM inbound i JOIN chats c ON c.chat_key = i.chat_key"
            " WHERE i.id IN (SELECT min(id) FROM inbound"
            "   WHERE status IN ('received', 'dispatched') GROUP BY chat_key)"
            " ORDER BY i.id")
        return [WaitingChat(ChatRef(r[0], r[1], r[2]), r[3]) for r in rows]

    async def hold_back(self, platform: str, sender_id: str, reason: str) -> list[int]:
        """Mark a sender's messages that have not reached the agent as dropped, with why;
        returns their ids (the rows stay, for `picobridge failed` and the record)."""
        async with self._tx() as db:
            rows = list(await db.execute_fetchall(
                "SELECT id FROM inbound WHERE platform = ? AND sender_id = ?"
                " AND status = 'received'", (platform, sender_id)))
            ids = [int(r[0]) for r in rows]
            await db.executemany(
                "UPDATE inbound SET status = 'dropped', error = ?, updated_at = ?"
                " WHERE id = ? AND status = 'received'",
                [(reason, time.time(), i) for i in ids])
        return ids
