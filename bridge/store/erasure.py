"""Everything the bridge holds about one user, to export or to forget (`picobridge export` /
`picobridge forget`): their messages, the replies to them, the chats only they wrote in (with
those chats' sessions, worker affinity and replies), their access grant and notices.

A chat is theirs when every message stored in it is theirs; in a shared chat (a group) only
their messages and the replies that answer nothing but theirs go."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiosqlite

from picobridge.store.connection import Database

_THEIRS = "platform = ? AND sender_id = ?"


@dataclass
class Footprint:
    messages: list[int] = field(default_factory=list)
    replies: list[int] = field(default_factory=list)
    chats: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # downloaded media, as stored
    grants: int = 0
    notices: int = 0


async def _column(db: aiosqlite.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    return [r[0] for r in await db.execute_fetchall(sql, params)]


def _in(values: Sequence[Any]) -> tuple[str, str]:
    return "(SELECT value FROM json_each(?))", json.dumps(list(values))


async def footprint(db: aiosqlite.Connection, platform: str, user: str) -> Footprint:
    found = Footprint()
    who = (platform, user)
    found.messages = await _column(db, f"SELECT id FROM inbound WHERE {_THEIRS} ORDER BY id",
                                   who)
    found.chats = await _column(
        db, "SELECT DISTINCT chat_key FROM inbound i WHERE i.platform = ? AND i.sender_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM inbound o WHERE o.chat_key = i.chat_key"
        "  AND NOT (o.platform = i.platform AND o.sender_id = i.sender_id))", who)
    chats, chats_json = _in(found.chats)
    mine, mine_json = _in(found.messages)
    found.replies = await _column(
        db, f"SELECT id FROM outbox WHERE chat_key IN {chats} OR private_to = ?"
        f" OR (id IN (SELECT outbox_id FROM inbound WHERE id IN {mine})"
        "  AND NOT EXISTS (SELECT 1 FROM inbound o WHERE o.outbox_id = outbox.id"
        "   AND NOT (o.platform = ? AND o.sender_id = ?))) ORDER BY id",
        (chats_json, user, mine_json, *who))
    found.sessions = await _column(
        db, f"SELECT session_id FROM sessions WHERE chat_key IN {chats} ORDER BY created_at",
        (chats_json,))
    for raw in await _column(db, f"SELECT attachments FROM inbound WHERE {_THEIRS}", who):
        found.files += [a["path"] for a in json.loads(raw or "[]")
                        if isinstance(a, dict) and isinstance(a.get("path"), str)]
    found.grants = len(await _column(
        db, "SELECT 1 FROM access_grants WHERE platform = ? AND user_id = ?", who))
    found.notices = len(await _column(
        db, "SELECT 1 FROM access_notices WHERE platform = ? AND user_id = ?", who))
    return found


class ErasureTable(Database):
    async def user_footprint(self, platform: str, user: str) -> Footprint:
        async with self._tx() as db:
            return await footprint(db, platform, user)

    async def user_export(self, platform: str, user: str) -> dict[str, Any]:
        """What the bridge holds about the user, as plain JSON values."""
        async with self._tx() as db:
            found = await footprint(db, platform, user)
            db.row_factory = aiosqlite.Row
            try:
                def rows(table: str, key: str, ids: Sequence[Any]) -> Any:
                    where, values = _in(ids)
                    return db.execute_fetchall(
                        f"SELECT * FROM {table} WHERE {key} IN {where} ORDER BY 1", (values,))

                messages = [dict(r) for r in await rows("inbound", "id", found.messages)]
                replies = [dict(r) for r in await rows("outbox", "id", found.replies)]
                chats = [dict(r) for r in await rows("chats", "chat_key", found.chats)]
                sessions = [dict(r) for r in await rows("sessions", "session_id",
                                                        found.sessions)]
                grants = [dict(r) for r in await db.execute_fetchall(
                    "SELECT * FROM access_grants WHERE platform = ? AND user_id = ?",
                    (platform, user))]
            finally:
                db.row_factory = None
        return {"user": f"{platform}:{user}", "messages": messages, "replies": replies,
                "chats": chats, "sessions": sessions, "access": grants}

    async def forget_user(self, platform: str, user: str, *, keep_access: bool) -> Footprint:
        """Delete what the bridge holds about the user, in one transaction; returns what
        went (the caller removes the files it names)."""
        who = (platform, user)
        async with self._tx() as db:
            found = await footprint(db, platform, user)
            replies, replies_json = _in(found.replies)
            chats, chats_json = _in(found.chats)
            sessions, sessions_json = _in(found.sessions)
            # Others' messages once answered by a reply that goes keep their rows.
            await db.execute(f"UPDATE inbound SET outbox_id = NULL WHERE outbox_id IN {replies}"
                             " AND NOT (platform = ? AND sender_id = ?)", (replies_json, *who))
            await db.execute(f"DELETE FROM inbound WHERE {_THEIRS}", who)
            await db.execute(f"DELETE FROM retry_requests WHERE (kind = 'reply' AND item_id IN"
                             f" {replies}) OR (kind = 'message' AND item_id NOT IN"
                             " (SELECT id FROM inbound))", (replies_json,))
            await db.execute(f"DELETE FROM outbox WHERE id IN {replies}", (replies_json,))
            # Its limit notice, and the part records of deleted replies (<platform>.parts.<id>).
            await db.execute("DELETE FROM cursors WHERE name = ? OR name IN (SELECT c.name"
                             " FROM cursors c, json_each(?) j"
                             " WHERE c.name LIKE '%.parts.' || j.value)",
                             (f"limits.told.{platform}:{user}", replies_json))
            await db.execute(f"DELETE FROM session_workers WHERE session_id IN {sessions}",
                             (sessions_json,))
            await db.execute(f"DELETE FROM sessions WHERE session_id IN {sessions}",
                             (sessions_json,))
            await db.execute(f"DELETE FROM chats WHERE chat_key IN {chats}", (chats_json,))
            await db.execute(f"DELETE FROM chat_menus WHERE chat_key IN {chats}", (chats_json,))
            await db.execute("DELETE FROM access_notices WHERE platform = ? AND user_id = ?",
                             who)
            if keep_access:
                found.grants = 0
            else:
                await db.execute("DELETE FROM access_grants WHERE platform = ? AND user_id = ?",
                                 who)
        return found
