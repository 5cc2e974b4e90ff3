"""`picobridge failed retry` beside a running daemon: the requests it writes are taken up
here within a second, without a restart; a message goes to the agent again, a reply to its
platform."""

from __future__ import annotations

import asyncio
import logging

from picobridge.core.orphans import Orphans
from picobridge.core.outbox import Outbox
from picobridge.core.router import Router
from picobridge.store import Store

log = logging.getLogger("picobridge.router")


class Retries:
    def __init__(self, store: Store, router: Router, outbox: Outbox,
                 every: float = 1.0, orphans: Orphans | None = None) -> None:
        self._store = store
        self._router = router
        self._outbox = outbox
        self._every = every
        self._orphans = orphans  # a message of an agent no longer configured goes elsewhere

    async def watch(self) -> None:
        while True:
            await self.take_up()
            await asyncio.sleep(self._every)

    async def take_up(self) -> int:
        messages, replies = await self._store.take_retries()
        if self._orphans is not None and messages:
            messages = await self._orphans.rehome(messages)
        for message in messages:
            self._router.enqueue(message)
        for reply in replies:
            self._outbox.deliver(reply)
        if messages or replies:
            log.info("operator retry: %d message(s) back to the agent, %d reply(ies) to send "
                     "again", len(messages), len(replies))
        return len(messages) + len(replies)
