"""`picobridge access deny` takes effect for what is already queued: a denied sender's
messages that have not reached the agent are taken out of the queue and marked in the store
(not deleted), and questions the agent asked in their chats are cancelled. The CLI runs in
another process; the grants' stamp (a file's mtime) says when to look."""

from __future__ import annotations

import asyncio
import logging

from picobridge.core.access import AccessPolicy
from picobridge.core.dialogs import Dialogs
from picobridge.core.router import Router
from picobridge.store import Store
from picobridge.store.queued import DENIED

log = logging.getLogger("picobridge.access")


class Revocations:
    def __init__(self, store: Store, router: Router, access: AccessPolicy,
                 dialogs: Dialogs | None = None, every: float = 0.25) -> None:
        self._store = store
        self._router = router
        self._access = access
        self._dialogs = dialogs
        self._every = every

    async def watch(self) -> None:
        stamp = self._store.access_stamp()
        while True:
            await asyncio.sleep(self._every)
            now = self._store.access_stamp()
            if now != stamp:
                stamp = now
                await self.apply()

    async def apply(self) -> int:
        """Take denied senders' messages out of the queue; returns how many."""
        asking = self._dialogs.senders() if self._dialogs is not None else set()
        denied = {(platform, sender) for platform, sender in self._router.queued_senders()
                  | asking if not await self._access.allowed(platform, sender)}
        if not denied:
            return 0
        removed = self._router.unqueue_senders(denied)
        await self._store.mark_held_back([m.id for m in removed], DENIED)
        if self._dialogs is not None:
            await self._dialogs.cancel_from(denied)
        for platform, sender in sorted(denied):
            log.info("access revoked for %s:%s: %d queued message(s) not sent to the agent",
                     platform, sender, sum(m.sender_id == sender for m in removed))
        return len(removed)
