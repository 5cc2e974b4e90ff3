"""What people chose in chat: per session (model, thinking level) and per chat (busy mode);
and a chat's earlier conversations as /sessions lists them."""

from __future__ import annotations

import time
from dataclasses import dataclass

from picobridge.contract import ChatRef
from picobridge.store.connection import Database


@dataclass(frozen=True, slots=True)
class SessionChoice:
    model: str | None = None
    thinking: str | None = None


@dataclass(frozen=True, slots=True)
class PastSession:
    session_id: str
    created_at: float
    first_words: str  # of its first message to the agent ("" when it has none)
    messages: int  # messages to the agent (bridge commands not counted)


# A message for the agent, not a bridge command: a command's reply is stored with it and
# settles nothing (an answer of the agent settles the messages it answers).
_TO_AGENT = "(o.id IS NULL OR o.settles IS NOT NULL)"


class SettingsTables(Database):
    async def session_choice(self, session_id: str) -> SessionChoice:
        row = await self._one("SELECT model, thinking FROM session_settings WHERE session_id = ?",
                              (session_id,))
        return SessionChoice(row[0], row[1]) if row else SessionChoice()

    async def choose_for_session(self, session_id: str, *, model: str | None = None,
                                 thinking: str | None = None) -> None:
        """Store a choice; a None leaves that part as it was."""
        await self._all(
            "INSERT INTO session_settings(session_id, model, thinking, updated_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET"
            " model = COALESCE(excluded.model, model),"
            " thinking = COALESCE(excluded.thinking, thinking),"
            " updated_at = excluded.updated_at",
            (session_id, model, thinking, time.time()))

    async def busy_mode(self, chat: ChatRef) -> str | None:
        row = await self._one("SELECT busy_mode FROM chat_settings WHERE chat_key = ?",
                              (chat.key,))
        return str(row[0]) if row and row[0] else None

    async def set_busy_mode(self, chat: ChatRef, mode: str) -> None:
        await self._all(
            "INSERT INTO chat_settings(chat_key, busy_mode, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT(chat_key) DO UPDATE SET busy_mode = excluded.busy_mode,"
            " updated_at = excluded.updated_at", (chat.key, mode, time.time()))

    async def past_sessions(self, chat: ChatRef, agent: str, limit: int) -> list[PastSession]:
        """The chat's last `limit` conversations with `agent`, newest first (the current one
        included)."""
        rows = await self._all(
            "SELECT s.session_id, s.created_at,"
            " (SELECT i.text FROM inbound i LEFT JOIN outbox o ON o.id = i.outbox_id"
            f"   WHERE i.session_id = s.session_id AND {_TO_AGENT} ORDER BY i.id LIMIT 1),"
            " (SELECT COUNT(*) FROM inbound i LEFT JOIN outbox o ON o.id = i.outbox_id"
            f"   WHERE i.session_id = s.session_id AND {_TO_AGENT} AND i.status != 'dropped')"
            " FROM sessions s WHERE s.chat_key = ? AND s.agent = ?"
            " ORDER BY s.created_at DESC, s.rowid DESC LIMIT ?", (chat.key, agent, limit))
        return [PastSession(str(r[0]), float(r[1]), str(r[2] or ""), int(r[3])) for r in rows]

    async def resume_session(self, chat: ChatRef, session_id: str) -> bool:
        """Make one of the chat's sessions its current one (with its agent) again; False when
        it is not one of this chat's."""
        now = time.time()
        async with self._tx() as db:
            rows = list(await db.execute_fetchall(
                "SELECT agent FROM sessions WHERE session_id = ? AND chat_key = ?",
                (session_id, chat.key)))
            if not rows:
                return False
            agent = str(rows[0][0])
            await db.execute("UPDATE sessions SET ended_at = ? WHERE chat_key = ? AND agent = ?"
                             " AND ended_at IS NULL AND session_id != ?",
                             (now, chat.key, agent, session_id))
            await db.execute("UPDATE sessions SET ended_at = NULL WHERE session_id = ?",
                             (session_id,))
            await db.execute("UPDATE chats SET session_id = ?, agent = ?, updated_at = ?"
                             " WHERE chat_key = ?", (session_id, agent, now, chat.key))
        return True
