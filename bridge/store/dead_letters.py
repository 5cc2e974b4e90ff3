"""Dead letters: messages that failed for good (the agent could not answer them) and replies
the platform refused for good, for `picobridge failed list|retry|drop`. A retry is a request
row (migration 0004) that the daemon takes up; a drop marks a message dropped and deletes a
reply (nothing else refers to a failed reply but its messages' outbox_id)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from picobridge.store.connection import Database
from picobridge.store.records import StoredMessage, StoredReply

if TYPE_CHECKING:
    from picobridge.store.inbound import InboundTable
    from picobridge.store.replies import ReplyTable

PREVIEW = 60
# A message whose answer could not be delivered is that reply's dead letter, not one more.
_OWN_FAILURE = ("NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = inbound.outbox_id"
                " AND o.status = 'failed')")


@dataclass(frozen=True, slots=True)
class DeadLetter:
    kind: str  # message or reply
    id: int
    chat_key: str
    at: float
    why: str
    preview: str
    retry_requested: bool

    @property
    def label(self) -> str:
        """The id the command line takes: m12 for a message, r7 for a reply."""
        return f"{self.kind[0]}{self.id}"


class DeadLetterTable(Database):
    async def dead_letters(self) -> list[DeadLetter]:
        rows = await self._all(
            "SELECT 'message', id, chat_key, updated_at, coalesce(error, ''), text,"
            "  EXISTS (SELECT 1 FROM retry_requests r WHERE r.kind = 'message'"
            "   AND r.item_id = inbound.id)"
            f" FROM inbound WHERE status = 'failed' AND {_OWN_FAILURE}"
            " UNION ALL SELECT 'reply', id, chat_key, created_at, coalesce(error, ''), text,"
            "  EXISTS (SELECT 1 FROM retry_requests r WHERE r.kind = 'reply'"
            "   AND r.item_id = outbox.id)"
            " FROM outbox WHERE status = 'failed' ORDER BY 4")
        return [DeadLetter(r[0], int(r[1]), r[2], float(r[3]), r[4], _preview(r[5]),
                           bool(r[6])) for r in rows]

    async def dead_letter_counts(self) -> dict[str, int]:
        row = await self._one(
            "SELECT (SELECT count(*) FROM inbound WHERE status = 'failed'"
            f"  AND {_OWN_FAILURE}),"
            " (SELECT count(*) FROM outbox WHERE status = 'failed')")
        return {"message": int(row[0]), "reply": int(row[1])}

    async def request_retry(self, items: Sequence[tuple[str, int]]) -> int:
        """Ask the daemon to retry these dead letters; returns how many exist to retry."""
        now = time.time()
        async with self._tx() as db:
            found = 0
            for kind, item_id in items:
                table = "inbound" if kind == "message" else "outbox"
                cur = await db.execute(
                    "INSERT OR IGNORE INTO retry_requests(kind, item_id, requested_at)"
                    f" SELECT ?, id, ? FROM {table} WHERE id = ? AND status = 'failed'",
                    (kind, now, item_id))
                found += cur.rowcount
            return found

    async def take_retries(self) -> tuple[list[StoredMessage], list[StoredReply]]:
        """Put every requested dead letter back (a message waits for the agent again, a
        reply for delivery) and return them for the daemon to hand on."""
        # Asked every second: a plain read first, so that with nothing requested no write
        # transaction waits out another process's write lock (and fails) once a second.
        if await self._one("SELECT 1 FROM retry_requests LIMIT 1") is None:
            return [], []
        async with self._tx() as db:
            requests = list(await db.execute_fetchall(
                "SELECT kind, item_id FROM retry_requests"))
            if not requests:
                return [], []
            messages = [int(i) for k, i in requests if k == "message"]
            replies = [int(i) for k, i in requests if k == "reply"]
            now = time.time()
            await db.executemany(
                "UPDATE inbound SET status = 'received', attempts = 0, error = NULL,"
                " updated_at = ? WHERE id = ? AND status = 'failed'",
                [(now, i) for i in messages])
            # The messages a reply answers failed with it; delivered with it too, once sent.
            await db.executemany(
                "UPDATE inbound SET status = 'answered', error = NULL, updated_at = ?"
                " WHERE outbox_id = ? AND status = 'failed'", [(now, i) for i in replies])
            await db.executemany(
                "UPDATE outbox SET status = 'pending', attempts = 0, error = NULL"
                " WHERE id = ? AND status = 'failed'", [(i,) for i in replies])
            await db.execute("DELETE FROM retry_requests")
        return await self._messages_by_id(messages), await self._replies_by_id(replies)

    async def _messages_by_id(self, ids: Sequence[int]) -> list[StoredMessage]:
        # The tables of one Store share a connection: read them through their own queries.
        wanted = set(ids)
        found = await cast("InboundTable", self).open_messages() if wanted else []
        return [m for m in found if m.id in wanted]

    async def _replies_by_id(self, ids: Sequence[int]) -> list[StoredReply]:
        wanted = set(ids)
        found = await cast("ReplyTable", self).pending_replies() if wanted else []
        return [r for r in found if r.reply.outbox_id in wanted]

    async def drop_dead(self, items: Sequence[tuple[str, int]] = (),
                        older_than: float | None = None) -> int:
        """Drop these dead letters, or all failed before `older_than` (a time); returns how
        many went."""
        async with self._tx() as db:
            if older_than is not None:
                items = [(k, int(i)) for k, i in await db.execute_fetchall(
                    "SELECT 'message', id FROM inbound WHERE status = 'failed'"
                    " AND updated_at < ? UNION ALL SELECT 'reply', id FROM outbox"
                    " WHERE status = 'failed' AND created_at < ?", (older_than, older_than))]
            dropped = 0
            for kind, item_id in items:
                if kind == "message":
                    cur = await db.execute(
                        "UPDATE inbound SET status = 'dropped', updated_at = ?,"
                        " error = 'dropped by the operator: ' || coalesce(error, '')"
                        " WHERE id = ? AND status = 'failed'", (time.time(), item_id))
                else:
                    await db.execute(
                        "UPDATE inbound SET outbox_id = NULL, status = 'dropped',"
                        " error = 'its reply was dropped by the operator'"
                        " WHERE outbox_id = ? AND status = 'failed'", (item_id,))
                    await db.execute("UPDATE inbound SET outbox_id = NULL WHERE outbox_id = ?",
                                     (item_id,))
                    cur = await db.execute(
                        "DELETE FROM outbox WHERE id = ? AND status = 'failed'", (item_id,))
                dropped += cur.rowcount
                await db.execute("DELETE FROM retry_requests WHERE kind = ? AND item_id = ?",
                                 (kind, item_id))
            return dropped


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW else flat[:PREVIEW - 1] + "…"
