"""The durable state: chats and their sessions, every inbound message until its reply is
delivered, the outbox, platform cursors and access grants.

One aiosqlite connection does all the writing (SQLite allows one writer anyway); a lock keeps
one coroutine's multi-statement transaction from interleaving with another's. WAL with
synchronous=NORMAL: a commit survives the daemon being killed at any moment, which is the
promise made to users; only an OS crash may lose the last few commits.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite

from picobridge.contract import Attachment, ChatRef, InboundMessage, ReplyKind, scrub_surrogates
from picobridge.store.batching import Coalescer
from picobridge.store.schema import SchemaError, applied_version, available_migrations, migrate


def _clean(text: str) -> str:
    """Text as it can be stored: U+FFFD for what SQLite cannot take whole.

    A broken JSON escape (from a platform or the agent) can leave a lone surrogate in a str,
    which SQLite's UTF-8 binding refuses: one such message would fail every message written
    with it. A NUL would cut the text short where group writes pass it through SQLite's JSON
    functions. Neither is anything a chat could show.
    """
    text = scrub_surrogates(text)
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _clean_inbound(msg: InboundMessage) -> InboundMessage:
    text, name = _clean(msg.text), _clean(msg.sender_name)
    if text is msg.text and name is msg.sender_name:
        return msg
    return replace(msg, text=text, sender_name=name)


def _fields(count: int) -> str:
    """The first `count` fields of a batched row (a JSON array `m.value`) as SQL values."""
    return ", ".join(f"json_extract(m.value, '$[{i}]')" for i in range(count))


# Statuses of an inbound message that still wait for the agent.
OPEN_STATUSES = ("received", "dispatched")


class StoreError(Exception):
    """The database could not be opened or used."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    platform_msg_id: str
    chat: ChatRef
    session_id: str
    sender_id: str
    text: str
    attachments: tuple[Attachment, ...]
    reply_to: str | None
    status: str
    attempts: int
    received_at: float
    sent_at: float | None = None  # see InboundMessage.sent_at; not kept in the database


@dataclass(frozen=True, slots=True)
class StoredReply:
    id: int
    chat: ChatRef
    kind: ReplyKind
    text: str
    reply_to: str | None
    private_to: str | None
    answers: tuple[str, ...]
    attempts: int


@dataclass(frozen=True, slots=True)
class ChatInfo:
    chat: ChatRef
    session_id: str
    created_at: float
    updated_at: float
    open_messages: int


class Store:
    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        self._lock = asyncio.Lock()
        self._access_marker = path.with_name(path.name + ".access-changed")
        self._access_marker_name = str(self._access_marker)  # stat()ed for every message
        self._insert_known = Coalescer(self._insert_known_batch, "inbound")
        self._mark_sent = Coalescer(self._mark_sent_batch, "sent")
        self._insert_replies = Coalescer(self._insert_replies_batch, "replies")

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    async def open(cls, path: Path, *, migrate_schema: bool = True) -> Store:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, aiosqlite.Error) as exc:
            raise StoreError(f"cannot open database {path}: {exc}") from None
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=NORMAL")
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute("PRAGMA busy_timeout=5000")
            if migrate_schema:
                await migrate(db)
            else:
                version = await applied_version(db)
                latest = len(available_migrations())
                if version != latest:
                    raise SchemaError(
                        f"database schema is at version {version}, this picobridge needs "
                        f"{latest}; run `picobridge migrate`"
                    )
        except SchemaError:
            await db.close()
            raise
        except aiosqlite.Error as exc:
            await db.close()
            raise StoreError(f"cannot use database {path}: {exc}") from None
        return cls(db, path)

    async def close(self) -> None:
        # Writes callers gave up waiting for (a cancelled delivery marking its reply sent)
        # still land: otherwise the next start would send that reply again.
        for pending in (self._insert_known, self._insert_replies, self._mark_sent):
            await pending.settle()
        await self._db.close()

    async def schema_version(self) -> int:
        return await applied_version(self._db)

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                await self._db.rollback()
                raise
            await self._db.commit()

    # A single statement is its own transaction. On the shared connection, one issued while
    # another coroutine holds BEGIN would silently join (and share the fate of) that
    # transaction, so it waits for the lock then; otherwise it goes straight to the database
    # thread's queue, behind whatever is already there, and many commits can be queued at
    # once instead of each waiting for the previous one's round trip. (aiosqlite queues the
    # call before its first await, so a BEGIN issued later is queued after it.)
    # execute_fetchall is one round trip to the database thread; a cursor would cost three.

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if not self._lock.locked():
            return list(await self._db.execute_fetchall(sql, params))
        async with self._lock:
            return list(await self._db.execute_fetchall(sql, params))

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = await self._all(sql, params)
        return rows[0] if rows else None

    # -- chats and sessions ----------------------------------------------------------------

    async def current_session(self, chat: ChatRef) -> str:
        row = await self._one("SELECT session_id FROM chats WHERE chat_key = ?", (chat.key,))
        if row:
            return str(row[0])
        async with self._tx() as db:
            return await self._ensure_chat(db, chat)

    async def _ensure_chat(self, db: aiosqlite.Connection, chat: ChatRef) -> str:
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
        return await self._start_session(db, chat, now)

    async def _start_session(self, db: aiosqlite.Connection, chat: ChatRef, now: float) -> str:
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

    async def new_session(self, chat: ChatRef) -> str:
        async with self._tx() as db:
            await self._ensure_chat(db, chat)
            return await self._start_session(db, chat, time.time())

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

    # -- inbound ---------------------------------------------------------------------------

    async def record_inbound(self, msg: InboundMessage) -> StoredMessage | None:
        """Commit a new message to the chat's current session; None when it is a duplicate."""
        now = time.time()
        msg = _clean_inbound(msg)
        # ASCII: a lone surrogate in a file's name or text stays a JSON escape, not a str
        # that no UTF-8 encoder takes.
        attachments = json.dumps([a.to_json() for a in msg.attachments])
        values = (msg.chat.platform, msg.platform_message_id, msg.sender_id, msg.sender_name,
                  msg.text, attachments, msg.reply_to, now, now)
        # A known chat (the common case) is written together with other messages arriving
        # at the same moment; a new chat or a duplicate takes the slow path.
        inserted = await self._insert_known((*values, msg.chat.key))
        if inserted is None:
            async with self._tx() as db:
                if await self._seen(db, msg.chat.platform, msg.platform_message_id):
                    return None
                session_id = await self._ensure_chat(db, msg.chat)
                rows = list(await db.execute_fetchall(
                    "INSERT INTO inbound(platform, platform_msg_id, sender_id, sender_name, text,"
                    " attachments, reply_to, received_at, updated_at, chat_key, session_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id, session_id",
                    (*values, msg.chat.key, session_id)))
            inserted = rows[0][0], rows[0][1]
        row_id, session_id = inserted
        return StoredMessage(row_id, msg.platform_message_id, msg.chat, session_id, msg.sender_id,
                             msg.text, msg.attachments, msg.reply_to, "received", 0, now,
                             msg.sent_at)

    async def _insert_known_batch(
        self, batch: Sequence[tuple[Any, ...]],
    ) -> list[tuple[int, str] | None]:
        """Insert messages of known chats in one statement; None for a new chat or a message
        already stored (also when the same message is twice in the batch)."""
        rows = await self._all(
            "INSERT INTO inbound(platform, platform_msg_id, sender_id, sender_name, text,"
            " attachments, reply_to, received_at, updated_at, chat_key, session_id)"
            f" SELECT {_fields(9)}, c.chat_key, c.session_id FROM json_each(?) m"
            " JOIN chats c ON c.chat_key = json_extract(m.value, '$[9]')"
            " WHERE true ORDER BY m.key"  # in arrival order: a chat's ids follow its messages
            " ON CONFLICT(platform, platform_msg_id) DO NOTHING"
            " RETURNING id, platform, platform_msg_id, session_id",
            (json.dumps(batch, ensure_ascii=False),))
        stored = {(r[1], r[2]): (int(r[0]), str(r[3])) for r in rows}
        # pop: of two copies of one message in a batch only the first was inserted.
        return [stored.pop((item[0], item[1]), None) for item in batch]
    @staticmethod
    async def _seen(db: aiosqlite.Connection, platform: str, platform_msg_id: str) -> bool:
        rows = await db.execute_fetchall(
            "SELECT 1 FROM inbound WHERE platform = ? AND platform_msg_id = ?",
            (platform, platform_msg_id))
        return bool(list(rows))

    async def seen(self, platform: str, platform_msg_id: str) -> bool:
        async with self._lock:
            return await self._seen(self._db, platform, platform_msg_id)

    async def record_command(self, msg: InboundMessage, reply: str) -> StoredReply | None:
        """Record a handled bridge command and its reply together; None when seen before."""
        now = time.time()
        msg, reply = _clean_inbound(msg), _clean(reply)
        async with self._tx() as db:
            session_id = await self._ensure_chat(db, msg.chat)
            cur = await db.execute(
                "INSERT INTO inbound(platform, platform_msg_id, chat_key, session_id, sender_id,"
                " sender_name, text, reply_to, status, received_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'answered', ?, ?)"
                " ON CONFLICT(platform, platform_msg_id) DO NOTHING",
                (msg.chat.platform, msg.platform_message_id, msg.chat.key, session_id,
                 msg.sender_id, msg.sender_name, msg.text, msg.reply_to, now, now),
            )
            if cur.rowcount == 0:
                return None
            inbound_id = cur.lastrowid
            out = await db.execute(
                "INSERT INTO outbox(chat_key, session_id, kind, text, reply_to, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (msg.chat.key, session_id, ReplyKind.NOTICE.value, reply, msg.reply_to, now))
            await db.execute("UPDATE inbound SET outbox_id = ? WHERE id = ?",
                             (out.lastrowid, inbound_id))
        assert out.lastrowid is not None
        return StoredReply(out.lastrowid, msg.chat, ReplyKind.NOTICE, reply, msg.reply_to, None,
                           (msg.platform_message_id,), 0)

    async def mark_dispatched(self, ids: Sequence[int]) -> None:
        await self._all(
            "UPDATE inbound SET status = 'dispatched', attempts = attempts + 1, updated_at = ?"
            " WHERE status = 'received' AND id IN (SELECT value FROM json_each(?))",
            (time.time(), json.dumps(list(ids))))

    async def requeue(self, ids: Sequence[int], *, refund: bool = False) -> None:
        """Put dispatched messages back in the queue; `refund` un-counts the attempt."""
        await self._all(
            "UPDATE inbound SET status = 'received', updated_at = ?,"
            " attempts = MAX(0, attempts - ?) WHERE status = 'dispatched'"
            " AND id IN (SELECT value FROM json_each(?))",
            (time.time(), int(refund), json.dumps(list(ids))))

    async def update_text(self, platform: str, platform_msg_id: str,
                          text: str) -> StoredMessage | None:
        """Edit a message that has not reached the agent yet; None if it is too late."""
        text = _clean(text)
        async with self._tx() as db:
            cur = await db.execute(
                "UPDATE inbound SET text = ?, updated_at = ? WHERE platform = ?"
                " AND platform_msg_id = ? AND status = 'received'",
                (text, time.time(), platform, platform_msg_id))
            if cur.rowcount == 0:
                return None
        rows = await self._open_rows("AND i.platform = ? AND i.platform_msg_id = ?",
                                     (platform, platform_msg_id))
        return rows[0] if rows else None

    async def drop_queued(self, chat: ChatRef, ids: Iterable[int]) -> int:
        async with self._tx() as db:
            cur = await db.executemany(
                "UPDATE inbound SET status = 'dropped', updated_at = ? WHERE id = ?"
                " AND chat_key = ? AND status = 'received'",
                [(time.time(), i, chat.key) for i in ids])
            return cur.rowcount

    async def open_messages(self) -> list[StoredMessage]:
        """Messages not yet answered, oldest first: what a restart must dispatch again."""
        return await self._open_rows("", ())

    async def _open_rows(self, where: str, params: Sequence[Any]) -> list[StoredMessage]:
        rows = await self._all(
            "SELECT i.id, i.platform_msg_id, c.platform, c.chat_id, c.thread_id, i.session_id,"
            " i.sender_id, i.text, i.attachments, i.reply_to, i.status, i.attempts, i.received_at"
            " FROM inbound i JOIN chats c ON c.chat_key = i.chat_key"
            f" WHERE i.status IN ('received', 'dispatched') {where} ORDER BY i.id", params)
        return [
            StoredMessage(r[0], r[1], ChatRef(r[2], r[3], r[4]), r[5], r[6], r[7],
                          tuple(Attachment.from_json(a) for a in json.loads(r[8])), r[9], r[10],
                          r[11], r[12])
            for r in rows
        ]

    # -- outbox ----------------------------------------------------------------------------

    async def add_reply(
        self,
        chat: ChatRef,
        kind: ReplyKind,
        text: str,
        *,
        session_id: str | None = None,
        reply_to: str | None = None,
        private_to: str | None = None,
        settles: Sequence[StoredMessage] = (),
        settle_status: str = "answered",
        error: str | None = None,
    ) -> StoredReply:
        """Queue a reply and, in the same transaction, settle the messages it answers.

        Doing both at once is what makes a crash between them harmless: either the reply is
        queued and the messages are answered, or neither happened and the turn runs again.
        """
        text = _clean(text)
        error = _clean(error) if error is not None else None
        ids = [m.id for m in settles]
        answers = tuple(m.platform_msg_id for m in sorted(settles, key=lambda m: m.id))
        row = (chat.key, session_id, kind.value, text, reply_to, private_to, time.time(), error,
               json.dumps(ids) if ids else None, settle_status)
        outbox_id = await self._insert_replies(row)
        if outbox_id is None:
            # The chat has no row yet (a stranger's first message): create it, then insert.
            async with self._tx() as db:
                await self._ensure_chat(db, chat)
                rows = list(await db.execute_fetchall(
                    "INSERT INTO outbox(chat_key, session_id, kind, text, reply_to, private_to,"
                    " created_at, error, settles, settle_status)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id", row))
            outbox_id = int(rows[0][0])
        return StoredReply(outbox_id, chat, kind, text, reply_to, private_to, answers, 0)

    async def _insert_replies_batch(self, batch: Sequence[tuple[Any, ...]]) -> list[int | None]:
        """Insert replies to known chats in one statement (the trigger from migration 0002
        settles each one's messages with it); None for a chat without a row."""
        rows = await self._all(
            "INSERT INTO outbox(chat_key, session_id, kind, text, reply_to, private_to,"
            f" created_at, error, settles, settle_status) SELECT {_fields(10)}"
            " FROM json_each(?) m JOIN chats c ON c.chat_key = json_extract(m.value, '$[0]')"
            " ORDER BY m.key RETURNING id, chat_key, kind, text, reply_to, private_to, settles",
            (json.dumps(batch, ensure_ascii=False),))
        # Rows are told apart by content; two replies alike in all of it are interchangeable.
        ids: dict[tuple[Any, ...], list[int]] = {}
        for r in rows:
            ids.setdefault(tuple(r[1:]), []).append(int(r[0]))
        result: list[int | None] = []
        for item in batch:
            found = ids.get((item[0], item[2], item[3], item[4], item[5], item[8]))
            result.append(found.pop(0) if found else None)
        return result

    async def pending_replies(self, chat_key: str | None = None) -> list[StoredReply]:
        rows = await self._all(
            "SELECT o.id, c.platform, c.chat_id, c.thread_id, o.kind, o.text, o.reply_to,"
            " o.private_to, o.attempts,"
            " (SELECT json_group_array(platform_msg_id) FROM (SELECT i.platform_msg_id"
            "  FROM inbound i WHERE i.outbox_id = o.id ORDER BY i.id))"
            " FROM outbox o JOIN chats c ON c.chat_key = o.chat_key"
            " WHERE o.status = 'pending' AND (? IS NULL OR o.chat_key = ?) ORDER BY o.id",
            (chat_key, chat_key))
        return [
            StoredReply(r[0], ChatRef(r[1], r[2], r[3]), ReplyKind(r[4]), r[5], r[6], r[7],
                        tuple(json.loads(r[9])), r[8])
            for r in rows
        ]

    async def mark_sent(self, outbox_id: int) -> None:
        await self._mark_sent(outbox_id)

    async def _mark_sent_batch(self, ids: Sequence[int]) -> list[None]:
        # The trigger marks the answered messages delivered in the same statement.
        await self._all("UPDATE outbox SET status = 'sent', sent_at = ?,"
                        " attempts = attempts + 1 WHERE id IN (SELECT value FROM json_each(?))",
                        (time.time(), json.dumps(list(ids))))
        return [None] * len(ids)

    async def mark_send_failed(self, outbox_id: int, error: str, *, permanent: bool) -> None:
        await self._all(
            "UPDATE outbox SET attempts = attempts + 1, error = ?,"
            " status = CASE WHEN ? THEN 'failed' ELSE status END WHERE id = ?",
            (error[:500], permanent, outbox_id))

    # -- cursors ---------------------------------------------------------------------------

    async def get_cursor(self, name: str) -> str | None:
        row = await self._one("SELECT value FROM cursors WHERE name = ?", (name,))
        return str(row[0]) if row else None

    async def set_cursor(self, name: str, value: str) -> None:
        await self._all(
            "INSERT INTO cursors(name, value, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT(name) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at", (name, value, time.time()))

    # -- access ----------------------------------------------------------------------------

    async def access_decision(self, platform: str, user_id: str) -> bool | None:
        """The operator's explicit grant (True) or denial (False), None when never decided."""
        row = await self._one("SELECT allowed FROM access_grants WHERE platform = ? AND"
                              " user_id = ?", (platform, user_id))
        return bool(row[0]) if row else None

    async def set_access(self, platform: str, user_id: str, allowed: bool) -> None:
        async with self._tx() as db:
            await db.execute(
                "INSERT INTO access_grants(platform, user_id, allowed, changed_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT(platform, user_id) DO UPDATE SET"
                " allowed = excluded.allowed, changed_at = excluded.changed_at",
                (platform, user_id, int(allowed), time.time()))
            # A user denied again is told again the next time they write.
            await db.execute("DELETE FROM access_notices WHERE platform = ? AND user_id = ?",
                             (platform, user_id))
        marker = self._access_marker
        marker.touch()
        # Two changes within the file system's timestamp granularity must still differ.
        stamp = time.time_ns()
        os.utime(marker, ns=(stamp, max(stamp, marker.stat().st_mtime_ns + 1)))


    def access_stamp(self) -> int:
        """Changes whenever any process changes a grant: lets callers cache decisions.

        A stat is far cheaper than a database round trip on every message, and `picobridge
        access` runs in another process, so an in-memory flag would not see it.
        """
        try:
            return os.stat(self._access_marker_name).st_mtime_ns
        except FileNotFoundError:
            return 0

    async def access_grants(self) -> list[tuple[str, str, bool, float]]:
        rows = await self._all("SELECT platform, user_id, allowed, changed_at FROM access_grants"
                               " ORDER BY platform, user_id")
        return [(r[0], r[1], bool(r[2]), r[3]) for r in rows]

    async def first_denial(self, platform: str, user_id: str) -> bool:
        """Record that this unknown user was told; True only the first time."""
        rows = await self._all(
            "INSERT INTO access_notices(platform, user_id, notified_at) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1", (platform, user_id, time.time()))
        return bool(rows)

    async def open_for_chat(self, chat_key: str) -> int:
        """Messages of a chat still waiting for the agent or for delivery."""
        row = await self._one(
            "SELECT (SELECT COUNT(*) FROM inbound WHERE chat_key = ?"
            "  AND status IN ('received', 'dispatched', 'answered'))"
            " + (SELECT COUNT(*) FROM outbox WHERE chat_key = ? AND status = 'pending')",
            (chat_key, chat_key))
        return int(row[0])

    # -- figures ---------------------------------------------------------------------------

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
