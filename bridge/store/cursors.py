"""Where adapters keep their positions and progress, such as a polling offset."""

from __future__ import annotations

import time

from picobridge.store.connection import Database


class CursorTable(Database):
    async def get_cursor(self, name: str) -> str | None:
        row = await self._one("SELECT value FROM cursors WHERE name = ?", (name,))
        return str(row[0]) if row else None

    async def set_cursor(self, name: str, value: str) -> None:
        """Set a cursor; an empty value removes it (finished work leaves no row behind)."""
        if not value:
            await self._all("DELETE FROM cursors WHERE name = ?", (name,))
            return
        await self._all(
            "INSERT INTO cursors(name, value, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT(name) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at", (name, value, time.time()))
