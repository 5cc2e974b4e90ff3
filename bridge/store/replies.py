"""The outbox: replies kept until the platform accepted them, each settling the messages it
answers in the statement that stores it (the triggers of migration 0002)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from picobridge.contract import ChatRef, OutboundFile, OutgoingReply, ReplyKind
from picobridge.store.batching import Write
from picobridge.store.chats import ensure_chat
from picobridge.store.connection import Database, batch_fields
from picobridge.store.records import StoredMessage, StoredReply, clean

_INSERT_REPLIES = (
    "INSERT INTO outbox(chat_key, session_id, kind, text, reply_to, private_to,"
    f" created_at, error, settles, settle_status, files) SELECT {batch_fields(11)}"
    " FROM json_each(?) m JOIN chats c ON c.chat_key = json_extract(m.value, '$[0]')"
    " ORDER BY m.key RETURNING id, chat_key, kind, text, reply_to, private_to, settles, files")


def _insert_replies(batch: Sequence[tuple[Any, ...]]) -> tuple[str, tuple[str]]:
    return _INSERT_REPLIES, (json.dumps(batch, ensure_ascii=False),)


def _inserted(batch: Sequence[tuple[Any, ...]], rows: list[Any]) -> list[int | None]:
    # Rows are told apart by content; two replies alike in all of it are interchangeable.
    ids: dict[tuple[Any, ...], list[int]] = {}
    for r in rows:
        ids.setdefault(tuple(r[1:]), []).append(int(r[0]))
    result: list[int | None] = []
    for item in batch:
        found = ids.get((item[0], item[2], item[3], item[4], item[5], item[8], item[10]))
        result.append(found.pop(0) if found else None)
    return result


# Replies to known chats in one statement (the trigger from migration 0002 settles each one's
# messages with it); None for a chat without a row. Unsynced: lost in a power cut, the
# messages it settles are answered again after it.
INSERT_REPLIES: Write[tuple[Any, ...], int | None] = Write(
    "replies", _insert_replies, _inserted)


def _sent(ids: Sequence[int]) -> tuple[str, tuple[float, str]]:
    return ("UPDATE outbox SET status = 'sent', sent_at = ?, attempts = attempts + 1"
            " WHERE id IN (SELECT value FROM json_each(?))", (time.time(), json.dumps(ids)))


# The trigger marks the answered messages delivered in the same statement. Lost in a power
# cut, the reply is sent again after it, as if the cut came before this mark.
MARK_SENT: Write[int, None] = Write("sent", _sent, lambda ids, rows: [None] * len(ids))


class ReplyTable(Database):
    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        super().__init__(db, path)
        self._insert_replies = self._batched(INSERT_REPLIES)
        self._mark_sent = self._batched(MARK_SENT)

    async def add_reply(
        self,
        chat: ChatRef,
        reply: OutgoingReply,
        *,
        session_id: str | None = None,
        settles: Sequence[StoredMessage] = (),
        settle_status: str = "answered",
        error: str | None = None,
    ) -> StoredReply:
        """Queue a reply and, in the same transaction, settle the messages it answers.

        Doing both at once is what makes a crash between them harmless: either the reply is
        queued and the messages are answered, or neither happened and the turn runs again.
        Its files must be the bridge's stored copies already (core/outfiles.py).
        Returns it as the outbox hands it on: its outbox id and the ids it answers set.
        """
        text = clean(reply.text)
        error = clean(error) if error is not None else None
        ids = [m.id for m in settles]
        answers = tuple(m.platform_msg_id for m in sorted(settles, key=lambda m: m.id)) \
            or reply.answers
        files = json.dumps([f.to_json() for f in reply.files], ensure_ascii=False) \
            if reply.files else None
        row = (chat.key, session_id, reply.kind.value, text, reply.reply_to, reply.private_to,
               time.time(), error, json.dumps(ids) if ids else None, settle_status, files)
        outbox_id = await self._insert_replies(row)
        if outbox_id is None:
            # The chat has no row yet (a stranger's first message): create it, then insert.
            async with self._tx() as db:
                await ensure_chat(db, chat)
                rows = list(await db.execute_fetchall(
                    "INSERT INTO outbox(chat_key, session_id, kind, text, reply_to, private_to,"
                    " created_at, error, settles, settle_status, files)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id", row))
            outbox_id = int(rows[0][0])
        return StoredReply(chat, dataclasses.replace(reply, text=text, answers=answers,
                                                     outbox_id=outbox_id))

    async def pending_replies(self, chat_key: str | None = None) -> list[StoredReply]:
        rows = await self._all(
            "SELECT o.id, c.platform, c.chat_id, c.thread_id, o.kind, o.text, o.reply_to,"
            " o.private_to, o.attempts,"
            " (SELECT json_group_array(platform_msg_id) FROM (SELECT i.platform_msg_id"
            "  FROM inbound i WHERE i.outbox_id = o.id ORDER BY i.id)), o.files"
            " FROM outbox o JOIN chats c ON c.chat_key = o.chat_key"
            " WHERE o.status = 'pending' AND (? IS NULL OR o.chat_key = ?) ORDER BY o.id",
            (chat_key, chat_key))
        return [
            StoredReply(ChatRef(r[1], r[2], r[3]), OutgoingReply(
                r[5], ReplyKind(r[4]), r[6], tuple(json.loads(r[9])), r[7], outbox_id=r[0],
                files=tuple(OutboundFile.from_json(f) for f in json.loads(r[10] or "[]"))),
                r[8])
            for r in rows
        ]

    async def mark_sent(self, outbox_id: int) -> None:
        await self._mark_sent(outbox_id)

    async def mark_send_failed(self, outbox_id: int, error: str, *, permanent: bool) -> None:
        await self._all(
            "UPDATE outbox SET attempts = attempts + 1, error = ?,"
            " status = CASE WHEN ? THEN 'failed' ELSE status END WHERE id = ?",
            (error[:500], permanent, outbox_id))
