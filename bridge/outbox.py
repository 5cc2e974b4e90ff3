"""Delivery of stored replies to the platforms, in order per chat, until they are accepted.

Every reply is committed before delivery starts, so a crash only ever means "send again".
One delivery task per chat with pending replies: a chat stuck behind a platform's 429 does
not hold up the others, and within a chat the order is the order the replies were stored.

Whoever commits a reply hands it over (`deliver`) as the store returned it: the outbox reads
the store only at start, for what an earlier run left undelivered, never once per reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from adapters.base import Adapter, DeliveryError, OutgoingReply
from bridge.store import Store, StoredReply

log = logging.getLogger("picobridge.outbox")

RETRY_FIRST = 1.0
RETRY_CAP = 60.0


class Outbox:
    def __init__(self, store: Store, adapters: Mapping[str, Adapter]) -> None:
        self._store = store
        self._adapters = adapters
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Replies waiting for their chat's delivery task, by outbox id (the store's order).
        self._queued: dict[str, dict[int, StoredReply]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False
        # Running totals per platform, read by metrics.
        self.sent: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.rate_limited: dict[str, int] = {}

    async def start(self) -> None:
        for reply in await self._store.pending_replies():
            self.deliver(reply)

    def deliver(self, reply: StoredReply) -> None:
        """Send a committed reply to its chat after the ones stored before it."""
        if self._stopping:
            return  # stays pending in the store; the next run sends it
        chat_key = reply.chat.key
        self._queued.setdefault(chat_key, {})[reply.id] = reply
        if chat_key not in self._tasks:
            self._idle.clear()
            self._tasks[chat_key] = asyncio.create_task(self._drain(chat_key),
                                                        name=f"outbox-{chat_key}")

    @property
    def busy_chats(self) -> int:
        return len(self._tasks)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def stop(self, grace: float) -> None:
        """Finish what can be sent within `grace` seconds; the rest stays stored for next run."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace)
        self._stopping = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _drain(self, chat_key: str) -> None:
        try:
            while queued := self._queued.pop(chat_key, None):
                for outbox_id in sorted(queued):
                    if not await self._deliver(queued[outbox_id]):
                        return  # the rest stays pending in the store for the next run
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("delivery task failed chat=%s", chat_key)
        finally:
            self._tasks.pop(chat_key, None)
            self._queued.pop(chat_key, None)
            if not self._tasks:
                self._idle.set()

    async def _deliver(self, reply: StoredReply) -> bool:
        """Send one reply, retrying transient failures; False when the chat cannot be served."""
        adapter = self._adapters.get(reply.chat.platform)
        if adapter is None:
            log.warning("reply %d for %s kept: platform %s is not enabled", reply.id,
                        reply.chat.key, reply.chat.platform)
            return False
        outgoing = OutgoingReply(reply.text, reply.kind, reply.reply_to, reply.answers,
                                 reply.private_to)
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
                await self._store.mark_send_failed(reply.id, str(exc), permanent=exc.permanent)
                platform = reply.chat.platform
                if exc.permanent:
                    self.failed[platform] = self.failed.get(platform, 0) + 1
                    log.error("reply %d to %s failed permanently: %s", reply.id, reply.chat.key,
                              exc)
                    return True
                if exc.retry_after is not None:
                    self.rate_limited[platform] = self.rate_limited.get(platform, 0) + 1
                wait = exc.retry_after if exc.retry_after is not None else delay
                log.warning("reply %d to %s not delivered (%s); retry in %.1fs", reply.id,
                            reply.chat.key, exc, wait)
                await asyncio.sleep(wait)
                delay = min(RETRY_CAP, delay * 2)
                continue
            await self._store.mark_sent(reply.id)
            self.sent[reply.chat.platform] = self.sent.get(reply.chat.platform, 0) + 1
            return True
