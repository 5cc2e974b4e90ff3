"""What per-user limits ([limits]) count: a sender's messages that went to the agent within a
window, across all their chats. Messages held back for the limit are kept, marked."""

from __future__ import annotations

import time

from picobridge.store.connection import Database

# The error of a message held back for a limit starts with this (the count leaves them out).
OVER_LIMIT = "over the limit"


class QuotaTable(Database):
    async def sent_since(self, platform: str, sender_id: str, since: float) -> tuple[int, float]:
        """How many of the sender's messages since `since` count against a limit, and when
        the oldest of them was received (0 when none)."""
        row = await self._one(
            "SELECT count(*), coalesce(min(received_at), 0) FROM inbound"
            " WHERE platform = ? AND sender_id = ? AND received_at >= ?"
            " AND NOT (status = 'dropped' AND coalesce(error, '') LIKE ?)",
            (platform, sender_id, since, OVER_LIMIT + "%"))
        return int(row[0]), float(row[1])

    async def hold_over_limit(self, message_id: int, why: str) -> None:
        await self._all(
            "UPDATE inbound SET status = 'dropped', error = ?, updated_at = ?"
            " WHERE id = ? AND status = 'received'",
            (f"{OVER_LIMIT}: {why}", time.time(), message_id))
