"""A chat's replies reach it in the order they were stored, also when the store fails while a
reply is being retried: the soak's "c00 answered out of order: [... 15, 19, 16, 17, 18 ...]".

The cause it had: a Telegram send refused with a 429 (or a 5xx) while another process held the
database's write lock (or the disk was full). Recording that failed attempt raised, the chat's
delivery task ended and meant to read its replies back five seconds later; the chat's next
answer, stored once the lock was gone, started a delivery task of its own at once and went out
first.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from picobridge.contract import ChatRef, DeliveryError, OutgoingReply
from picobridge.core.outbox import Outbox
from picobridge.store import Store
from tests.unit.test_router import Recorder

CHAT = ChatRef("test", "c")


class RefusingOnce(Recorder):
    """Refuses the first send of each reply whose text is in `refuse` (transient unless
    `permanent`), and records every attempt."""

    def __init__(self, refuse: set[str], *, permanent: bool = False) -> None:
        super().__init__()
        self.refuse = set(refuse)
        self.permanent = permanent
        self.attempts: list[str] = []

    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        self.attempts.append(reply.text)
        if reply.text in self.refuse:
            self.refuse.discard(reply.text)
            raise DeliveryError("flood control", permanent=self.permanent, retry_after=0.01)
        await super().send_reply(chat, reply)

    async def wait_sent(self, n: int) -> None:
        # Longer than the outbox's pause before it reads a failed chat back (5 s by default).
        async with asyncio.timeout(20), self.changed:
            await self.changed.wait_for(lambda: len(self.sent) >= n)


class LockedOnce(Store):
    """A store whose next mark_send_failed meets a write lock held elsewhere."""

    lock_failed: asyncio.Event

    async def mark_send_failed(self, *args: Any, **kwargs: Any) -> None:
        if not self.lock_failed.is_set():
            self.lock_failed.set()
            raise sqlite3.OperationalError("database is locked")
        await super().mark_send_failed(*args, **kwargs)


async def _store(tmp_path: Path) -> LockedOnce:
    store = await LockedOnce.open(tmp_path / "outbox.db")
    assert isinstance(store, LockedOnce)
    store.lock_failed = asyncio.Event()
    return store


async def _sent_in_order(store: LockedOnce, adapter: RefusingOnce, outbox: Outbox) -> None:
    first = await store.add_reply(CHAT, OutgoingReply("answer m16 m17 m18"))
    outbox.deliver(first)
    await store.lock_failed.wait()  # the retry of m16-m18 could not be recorded
    second = await store.add_reply(CHAT, OutgoingReply("answer m19"))
    outbox.deliver(second)
    await adapter.wait_sent(2)
    assert [r.text for _, r in adapter.sent] == ["answer m16 m17 m18", "answer m19"]
    await outbox.wait_idle()
    assert await store.pending_replies() == []


async def test_a_retry_the_store_cannot_record_keeps_its_place(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    adapter = RefusingOnce({"answer m16 m17 m18"})
    outbox = Outbox(store, {"test": adapter})
    try:
        await _sent_in_order(store, adapter, outbox)
        # Retried at once, not after reading the store again.
        assert adapter.attempts == ["answer m16 m17 m18", "answer m16 m17 m18", "answer m19"]
    finally:
        await outbox.stop(0)
        await store.close()


async def test_a_chat_whose_task_failed_keeps_its_order_while_it_reads_back(
        tmp_path: Path) -> None:
    """A refusal for good must be recorded (or the next run sends it again), so the store's
    error ends the attempt; the chat's task reads its replies back after a pause, and a reply
    stored meanwhile waits for that."""
    store = await _store(tmp_path)
    adapter = RefusingOnce({"answer m16 m17 m18"}, permanent=True)
    outbox = Outbox(store, {"test": adapter}, reload_after=0.05)
    try:
        await _sent_in_order(store, adapter, outbox)
        assert adapter.attempts == ["answer m16 m17 m18", "answer m16 m17 m18", "answer m19"]
    finally:
        await outbox.stop(0)
        await store.close()
