"""Counts and ages, read by metrics, health and `picobridge chat` (waiting for a chat to
settle)."""

from __future__ import annotations

import time

from picobridge.store.connection import Database


class Figures(Database):
    async def open_for_chat(self, chat_key: str) -> int:
        """Messages of a chat still waiting for the agent or for delivery."""
        row = await self._one(
            "SELECT (SELECT COUNT(*) FROM inbound WHERE chat_key = ?"
            "  AND status IN ('received', 'dispatched', 'answered'))"
            " + (SELECT COUNT(*) FROM outbox WHERE chat_key = ? AND status = 'pending')",
            (chat_key, chat_key))
        return int(row[0])

    async def counts(self) -> dict[str, int]:
        rows = await self._all("SELECT status, COUNT(*) FROM inbound GROUP BY status")
        result = {str(r[0]): int(r[1]) for r in rows}
        row = await self._one("SELECT COUNT(*) FROM outbox WHERE status = 'pending'")
        result["outbox_pending"] = int(row[0])
        return result

    async def oldest_open_age(self) -> float | None:
        row = await self._one(
            "SELECT MIN(received_at) FROM inbound WHERE status IN"
            " ('received', 'dispatched', 'answered')")
        return None if row is None or row[0] is None else max(0.0, time.time() - float(row[0]))
