"""Chats and their sessions: every chat has one current session per agent, talks to one agent
at a time, and keeps its old sessions so late answers to them still find the chat.

A session belongs to one agent: two agents never share one, `/new` ends only the current
agent's, and switching a chat to another agent and back resumes the session it had there.
`chats.session_id` is the current session of the chat's current agent (`chats.agent`), which
is what the hot path reads.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import aiosqlite

from picobridge.contract import DEFAULT_AGENT, ChatRef
from picobridge.store.connection import Database
from picobridge.store.reading import CHATS, chat_rows
from picobridge.store.records import ChatInfo


async def ensure_chat(db: aiosqlite.Connection, chat: ChatRef, agent: str | None = None) -> str:
    """The chat's current session with `agent` (None: whichever agent it talks to now),
    creating the chat, or its first session with that agent, when new, and making that agent
    the chat's current one; inside the caller's transaction."""
    rows = list(await db.execute_fetchall("SELECT session_id, agent FROM chats WHERE chat_key = ?",
                                          (chat.key,)))
    now = time.time()
    if rows:
        if agent is None or rows[0][1] == agent:
            return str(rows[0][0])
        return await _switch(db, chat, agent, now)
    await db.execute(
        "INSERT INTO chats(chat_key, platform, chat_id, thread_id, session_id, created_at,"
        " updated_at, agent) VALUES (?, ?, ?, ?, '', ?, ?, ?)",
        (chat.key, chat.platform, chat.chat_id, chat.thread_id, now, now,
         agent or DEFAULT_AGENT),
    )
    return await _start_session(db, chat, agent or DEFAULT_AGENT, now)


async def _switch(db: aiosqlite.Connection, chat: ChatRef, agent: str, now: float) -> str:
    """Make `agent` the chat's current one, resuming the session it had with it."""
    rows = list(await db.execute_fetchall(
        "SELECT session_id FROM sessions WHERE chat_key = ? AND agent = ? AND ended_at IS NULL"
        " ORDER BY created_at DESC, rowid DESC LIMIT 1", (chat.key, agent)))
    if not rows:
        return await _start_session(db, chat, agent, now)
    session_id = str(rows[0][0])
    await db.execute("UPDATE chats SET session_id = ?, agent = ?, updated_at = ?"
                     " WHERE chat_key = ?", (session_id, agent, now, chat.key))
    return session_id


async def _start_session(db: aiosqlite.Connection, chat: ChatRef, agent: str,
                         now: float) -> str:
    # Readable by an operator: the chat it belongs to, its agent (unless the default one, as
    # before there were several) and when it began.
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%S")
    stem = chat.session_stem() if agent == DEFAULT_AGENT else f"{chat.session_stem()}.{agent}"
    base = f"{stem}.{stamp}"
    session_id, n = base, 1
    while list(await db.execute_fetchall("SELECT 1 FROM sessions WHERE session_id = ?",
                                         (session_id,))):
        n += 1
        session_id = f"{base}-{n}"
    await db.execute("UPDATE sessions SET ended_at = ? WHERE chat_key = ? AND agent = ?"
                     " AND ended_at IS NULL", (now, chat.key, agent))
    await db.execute("INSERT INTO sessions(session_id, chat_key, created_at, agent)"
                     " VALUES (?, ?, ?, ?)", (session_id, chat.key, now, agent))
    await db.execute("UPDATE chats SET session_id = ?, agent = ?, updated_at = ?"
                     " WHERE chat_key = ?", (session_id, agent, now, chat.key))
    return session_id


class ChatTables(Database):
    async def current_session(self, chat: ChatRef, agent: str | None = None) -> str:
        """The chat's current session with `agent` (None: the agent it talks to now); asking
        for another agent makes that one the chat's current agent."""
        row = await self._one("SELECT session_id, agent FROM chats WHERE chat_key = ?",
                              (chat.key,))
        if row and (agent is None or row[1] == agent):
            return str(row[0])
        async with self._tx() as db:
            return await ensure_chat(db, chat, agent)

    async def new_session(self, chat: ChatRef, agent: str | None = None) -> str:
        """A fresh session with `agent` (None: the agent the chat talks to now); the chat's
        sessions with other agents are kept."""
        async with self._tx() as db:
            await ensure_chat(db, chat, agent)
            rows = list(await db.execute_fetchall(
                "SELECT agent FROM chats WHERE chat_key = ?", (chat.key,)))
            return await _start_session(db, chat, str(rows[0][0]), time.time())

    async def chat_agent(self, chat: ChatRef) -> str | None:
        """The agent the chat talks to now (None for a chat never seen)."""
        row = await self._one("SELECT agent FROM chats WHERE chat_key = ?", (chat.key,))
        return str(row[0]) if row else None

    async def chat_kind(self, chat: ChatRef) -> str | None:
        """The kind of chat ("private", "group") its last message said (None: not known)."""
        row = await self._one("SELECT kind FROM chats WHERE chat_key = ?", (chat.key,))
        return str(row[0]) if row and row[0] is not None else None

    async def session_agent(self, session_id: str) -> str | None:
        row = await self._one("SELECT agent FROM sessions WHERE session_id = ?", (session_id,))
        return str(row[0]) if row else None

    async def chosen_agents(self) -> dict[str, str]:
        """Chat key -> the agent a person chose there with /agent."""
        rows = await self._all("SELECT chat_key, chosen_agent FROM chats"
                               " WHERE chosen_agent IS NOT NULL")
        return {str(r[0]): str(r[1]) for r in rows}

    async def choose_agent(self, chat: ChatRef, agent: str, *, remember: bool = True) -> str:
        """Switch the chat to `agent`, resuming its session there, and record the choice
        (`remember` False: the routes decide again); returns that session."""
        async with self._tx() as db:
            session = await ensure_chat(db, chat, agent)
            await db.execute("UPDATE chats SET chosen_agent = ? WHERE chat_key = ?",
                             (agent if remember else None, chat.key))
            return session

    async def agent_session(self, chat: ChatRef, agent: str) -> str | None:
        """The chat's current session with `agent`, if it has one (nothing is created)."""
        row = await self._one(
            "SELECT session_id FROM sessions WHERE chat_key = ? AND agent = ? AND ended_at IS NULL"
            " ORDER BY created_at DESC, rowid DESC LIMIT 1", (chat.key, agent))
        return str(row[0]) if row else None

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
        return chat_rows(await self._all(CHATS, (platform, platform)))

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

    async def session_agents(self, chat: ChatRef) -> dict[str, str]:
        """Session id -> its agent, of every session the chat has had."""
        rows = await self._all("SELECT session_id, agent FROM sessions WHERE chat_key = ?",
                               (chat.key,))
        return {str(r[0]): str(r[1]) for r in rows}
