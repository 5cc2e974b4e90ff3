"""Chats and their sessions: every chat has one current session, and keeps its old ones so
late answers to them still find the chat."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import aiosqlite

from picobridge.contract import ChatRef
from picobridge.store.connection import Database
from picobridge.store.records import ChatInfo


async def ensure_chat(db: aiosqlite.Connection, chat: ChatRef) -> str:
    """The chat's current session, creating the chat and its first session when new; inside
    the caller's transaction."""
    rows = list(await db.execute_fetchall("SELECT session_id FROM chats WHERE chat_key = ?",
                                          (chat.key,)))
    if rows:
        return str(rows[0][0])
    now = time.time()
    await db.execute(
        "INSERT INTO chats(chat_key, platform, chat_id, thread_id, session_id, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, '', ?, ?)",
        (chat.key, chat.platform, chat.chat_id, chat.thread_id, now, now),
    )
    return await _start_session(db, chat, now)


async def _start_session(db: aiosqlite.Connection, chat: ChatRef, now: float) -> str:
    # Readable by an operator: the chat it belongs to and when it began.
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%S")
    base = f"{chat.session_stem()}.{stamp}"
    session_id, n = base, 1
    while list(await db.execute_fetchall("SELECT 1 FROM sessions WHERE session_id = ?",
                                         (session_id,))):
        n += 1
        session_id = f"{base}-{n}"
    await db.execute("UPDATE sessions SET ended_at = ? WHERE chat_key = ? AND ended_at IS NULL",
                     (now, chat.key))
    await db.execute("INSERT INTO sessions(session_id, chat_key, created_at) VALUES (?, ?, ?)",
                     (session_id, chat.key, now))
    await db.execute("UPDATE chats SET session_id = ?, updated_at = ? WHERE chat_key = ?",
                     (session_id, now, chat.key))
    return session_id


class ChatTables(Database):
    async def current_session(self, chat: ChatRef) -> str:
        row = await self._one("SELECT session_id FROM chats WHERE chat_key = ?", (chat.key,))
        if row:
            return str(row[0])
        async with self._tx() as db:
            return await ensure_chat(db, chat)

    async def new_session(self, chat: ChatRef) -> str:
        async with self._tx() as db:
            await ensure_chat(db, chat)
            return await _start_session(db, chat, time.time())

    async def chat_for_session(self, session_id: str) -> ChatRef | None:
        row = await self._one(
            "SELECT c.platform, c.chat_id, c.thread_id FROM sessions s"
            " JOIN chats c ON c.chat_key = s.chat_key WHERE s.session_id = ?",
            (session_id,),
        )
        return ChatRef(row[0], row[1], row[2]) if row else None

    async def has_chat(self, chat: ChatRef) -> bool:
        return await self._one("SELECT 1 FROM chats WHERE chat_key = ?", (chat.key,)) is not None

    async def chats(self, platform: str | None = None) -> list[ChatInfo]:
        rows = await self._all(
            "SELECT c.platform, c.chat_id, c.thread_id, c.session_id, c.created_at, c.updated_at,"
            " (SELECT COUNT(*) FROM inbound i WHERE i.chat_key = c.chat_key"
            "  AND i.status IN ('received', 'dispatched'))"
            " FROM chats c WHERE (? IS NULL OR c.platform = ?) ORDER BY c.updated_at DESC",
            (platform, platform),
        )
        return [ChatInfo(ChatRef(r[0], r[1], r[2]), r[3], r[4], r[5], r[6]) for r in rows]

    async def find_chat(self, key_or_session: str) -> ChatRef | None:
        row = await self._one("SELECT platform, chat_id, thread_id FROM chats WHERE chat_key = ?",
                              (key_or_session,))
        if row:
            return ChatRef(row[0], row[1], row[2])
        return await self.chat_for_session(key_or_session)

    async def session_history(self, chat: ChatRef) -> list[tuple[str, float, float | None]]:
        rows = await self._all(
            "SELECT session_id, created_at, ended_at FROM sessions WHERE chat_key = ?"
            " ORDER BY created_at, rowid", (chat.key,))
        return [(r[0], r[1], r[2]) for r in rows]
