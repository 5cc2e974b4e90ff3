"""The command menus platforms show single chats (chat-scoped commands), as last set there."""

from __future__ import annotations

import time

from picobridge.store.connection import Database


class MenuTable(Database):
    async def chat_menus(self) -> dict[str, str]:
        """Chat key -> the fingerprint of the menu set for that chat alone."""
        return {str(r[0]): str(r[1]) for r in await self._all(
            "SELECT chat_key, menu FROM chat_menus")}

    async def set_chat_menu(self, chat_key: str, menu: str | None) -> None:
        """Record what the chat's menu now is; None: the bot's own (no row)."""
        if menu is None:
            await self._all("DELETE FROM chat_menus WHERE chat_key = ?", (chat_key,))
            return
        await self._all(
            "INSERT INTO chat_menus(chat_key, menu, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT(chat_key) DO UPDATE SET menu = excluded.menu,"
            " updated_at = excluded.updated_at", (chat_key, menu, time.time()))
