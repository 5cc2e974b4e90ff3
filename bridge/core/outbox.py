"""Delivery of stored replies to the platforms, in order per chat, until they are accepted.

Every reply is committed before delivery starts, so a crash only ever means "send again".
One delivery task per chat with pending replies: a chat stuck behind a platform's 429 does
not hold up the others, and within a chat the order is the order the replies were stored.

Whoever commits a reply hands it over (`deliver`) as the store returned it: the outbox reads
the store only at start, for what an earlier run left undelivered, never once per reply.

It also tells a platform when a question it shows closed (`dialog_closed`): nothing stored, in
a task of its own, tried once; a failure leaves at worst buttons that no longer count.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sqlite3
import time
from collections import deque
from collections.abc import Mapping

from picobridge.contract import (
    Adapter,
    ChatRef,
    DeliveryError,
    Dialog,
    DialogClosed,
    ReplyKind,
)
from picobridge.core.stats import Delivery, OutboxStats, bump
from picobridge.store import Store, StoredReply, StoreError
from picobridge.supervision import keep

log = logging.getLogger("picobridge.outbox")

RETRY_FIRST = 1.0
RETRY_CAP = 60.0
RELOAD_AFTER = 5.0
# A store that cannot take a mark usually can again within seconds; the chat's next replies
# wait behind the mark, so it is tried often.
MARK_RETRY_CAP = 5.0
RECENT = 20  # deliveries and failures kept for the status page
# A platform that takes longer to change a question's message is not waited for.
CLOSE_TIMEOUT = 30.0


class Outbox:
    def __init__(self, store: Store, adapters: Mapping[str, Adapter], *,
                 reload_after: float = RELOAD_AFTER) -> None:
        self._store = store
        self._adapters = adapters
        self._reload_after = reload_after
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Replies waiting for their chat's delivery task, by outbox id (the store's order).
        self._queued: dict[str, dict[int, StoredReply]] = {}
        # Ids a running delivery task has taken on: handed over again (read from the store
        # while still pending), they are not sent twice.
        self._taken: dict[str, set[int]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False
        self._dialogs: dict[int, Dialog] = {}  # questions' dialogs, by outbox id
        self._sent: dict[str, int] = {}
        self._failed: dict[str, int] = {}
        self._rate_limited: dict[str, int] = {}
        self._recent: deque[Delivery] = deque(maxlen=RECENT)
        self._closing: set[asyncio.Task[None]] = set()

    def stats(self) -> OutboxStats:
        return OutboxStats(dict(self._sent), dict(self._failed), dict(self._rate_limited),
                           tuple(self._recent))

    def rate_limited(self, platform: str) -> None:
        """One rate-limit answer from the platform, the outbox's own or one its library
        waited out."""
        bump(self._rate_limited, platform)

    async def start(self) -> None:
        for reply in await self._store.pending_replies():
            if reply.kind is ReplyKind.QUESTION:
                # Its turn died with the last run and runs again; it may ask again.
                await self._store.mark_send_failed(reply.id, "the question expired with a "
                                                   "restart", permanent=True)
                continue
            self.deliver(reply)

    def deliver(self, reply: StoredReply, *, dialog: Dialog | None = None) -> None:
        """Send a committed reply to its chat after the ones stored before it (a question
        with its dialog, for platforms that show buttons)."""
        if dialog is not None:
            self._dialogs[reply.id] = dialog
        if self._stopping:
            return  # stays pending in the store; the next run sends it
        chat_key = reply.chat.key
        if reply.id in self._taken.get(chat_key, ()):
            return
        self._queued.setdefault(chat_key, {})[reply.id] = reply
        if chat_key not in self._tasks:
            self._idle.clear()
            self._tasks[chat_key] = asyncio.create_task(self._drain(chat_key),
                                                        name=f"outbox-{chat_key}")

    def dialog_closed(self, chat: ChatRef, closed: DialogClosed) -> None:
        """Tell the chat's platform that its question closed (its buttons go), in the
        background: the chat and the turn go on meanwhile."""
        adapter = self._adapters.get(chat.platform)
        if adapter is None or self._stopping:
            return
        keep(self._closing, self._close_dialog(adapter, chat, closed),
             f"dialog-closed-{closed.dialog_id}")

    async def _close_dialog(self, adapter: Adapter, chat: ChatRef,
                            closed: DialogClosed) -> None:
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await adapter.dialog_closed(chat, closed)
        except Exception as exc:
            # The class only: the error of a platform may quote the question.
            log.warning("question %s in chat=%s may keep its buttons (%s); they no longer "
                        "count", closed.dialog_id, chat.key, exc.__class__.__name__)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def stop(self, grace: float) -> None:
        """Finish what can be sent within `grace` seconds; the rest stays stored for next run."""
        deadline = time.monotonic() + grace
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self._idle.wait()
        if self._closing:
            # Questions closed as the daemon stops show it while their platform is still up.
            await asyncio.wait(set(self._closing), timeout=max(0.0, deadline - time.monotonic()))
        self._stopping = True
        tasks = [*self._tasks.values(), *self._closing]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _drain(self, chat_key: str) -> None:
        taken = self._taken.setdefault(chat_key, set())
        try:
            while True:
                try:
                    await self._send_queued(chat_key, taken)
                    return
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # The store failed under us (marking a reply failed for good, say): what
                    # this task held is still pending there. The task keeps the chat while it
                    # reads that back, so a reply stored meanwhile waits behind the ones
                    # before it instead of overtaking them in a task of its own.
                    log.exception("delivery task failed chat=%s; reading its replies again "
                                  "in %.0fs", chat_key, self._reload_after)
                    await self._reread(chat_key)
        finally:
            self._tasks.pop(chat_key, None)
            self._queued.pop(chat_key, None)
            self._taken.pop(chat_key, None)
            if not self._tasks:
                self._idle.set()

    async def _send_queued(self, chat_key: str, taken: set[int]) -> None:
        while queued := self._queued.pop(chat_key, None):
            for outbox_id in sorted(queued):
                taken.add(outbox_id)
                if not await self._deliver(queued[outbox_id]):
                    return  # the rest stays pending in the store for the next run

    async def _reread(self, chat_key: str) -> None:
        """After a pause, the chat's pending replies from the store, queued with whatever was
        handed over meanwhile; paused and read again while the store cannot be read."""
        while True:
            await asyncio.sleep(self._reload_after)
            try:
                pending = await self._store.pending_replies(chat_key)
            except Exception:
                log.exception("reading replies for chat=%s failed; trying again", chat_key)
                continue
            queued = self._queued.setdefault(chat_key, {})
            for reply in pending:
                queued.setdefault(reply.id, reply)
            return

    async def _deliver(self, reply: StoredReply) -> bool:
        """Send one reply, retrying transient failures; False when the chat cannot be served."""
        try:
            return await self._send(reply)
        finally:
            self._dialogs.pop(reply.id, None)

    async def _send(self, reply: StoredReply) -> bool:
        adapter = self._adapters.get(reply.chat.platform)
        if adapter is None:
            log.warning("reply %d for %s kept: platform %s is not enabled", reply.id,
                        reply.chat.key, reply.chat.platform)
            return False
        dialog = self._dialogs.get(reply.id)
        outgoing = reply.reply if dialog is None else dataclasses.replace(reply.reply,
                                                                          dialog=dialog)
        delay = RETRY_FIRST
        while True:
            try:
                try:
                    await adapter.send_reply(reply.chat, outgoing)
                except DeliveryError:
                    raise
                except Exception as exc:
                    # An adapter bug or an unforeseen library error: keep the reply, retry.
                    log.exception("adapter %s raised while sending", reply.chat.platform)
                    raise DeliveryError(exc.__class__.__name__) from exc
            except DeliveryError as exc:
                platform = reply.chat.platform
                if exc.permanent:
                    # Must be stored, or the next run sends it again: a store error here goes
                    # to the chat's task, which reads the chat's replies again.
                    await self._store.mark_send_failed(reply.id, str(exc), permanent=True)
                    bump(self._failed, platform)
                    self._recent.append(Delivery(time.time(), reply.chat.key, False))
                    log.error("reply %d to %s failed permanently: %s", reply.id, reply.chat.key,
                              exc)
                    return True
                await self._count_attempt(reply, exc)
                if exc.retry_after is not None:
                    self.rate_limited(platform)
                wait = exc.retry_after if exc.retry_after is not None else delay
                log.warning("reply %d to %s not delivered (%s); retry in %.1fs", reply.id,
                            reply.chat.key, exc, wait)
                await asyncio.sleep(wait)
                delay = min(RETRY_CAP, delay * 2)
                continue
            await self._mark_sent(reply)
            bump(self._sent, reply.chat.platform)
            self._recent.append(Delivery(time.time(), reply.chat.key, True))
            return True

    async def _count_attempt(self, reply: StoredReply, exc: DeliveryError) -> None:
        """Record a failed attempt that will be retried. Only the count and the last error are
        lost when the store cannot take that (a lock, a full disk): the reply is retried here
        all the same, still ahead of the chat's later replies."""
        try:
            await self._store.mark_send_failed(reply.id, str(exc), permanent=False)
        except (sqlite3.Error, StoreError, OSError) as error:
            log.debug("attempt at reply %d to %s not recorded (%s)", reply.id, reply.chat.key,
                      error)

    async def _mark_sent(self, reply: StoredReply) -> None:
        # The reply is on the platform: only remembering that is left. Reading it back as
        # pending when the store cannot take the mark (a lock, a full disk) would send the
        # user a duplicate, so the mark is retried instead, for as long as the store needs.
        delay = 0.5
        while True:
            try:
                await self._store.mark_sent(reply.id)
                return
            except (sqlite3.Error, StoreError, OSError) as exc:
                # Once per reply: the store's outage itself is logged where it is noticed.
                level = logging.WARNING if delay == 0.5 else logging.DEBUG
                log.log(level, "reply %d to %s delivered but not yet marked sent (%s); "
                        "retry in %.1fs", reply.id, reply.chat.key, exc, delay)
            await asyncio.sleep(delay)
            delay = min(MARK_RETRY_CAP, delay * 2)
