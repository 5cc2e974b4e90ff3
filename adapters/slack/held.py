"""Slack messages the bridge could not store yet (a locked, full or read-only database).

Such a message is not acknowledged, so Slack sends it again; but Slack gives up after three
retries (a few minutes), and an outage may last longer. The adapter therefore keeps what it
already prepared (the text with its thread context, the downloaded files) and offers it to
the bridge again itself, after a pause that grows while the outage lasts (cut short when
another message gets stored: the database works again). Whichever gets it
stored first, this retry or Slack's redelivery, the other finds it stored (the adapter's
recent ids, then the store's dedupe on channel and ts), so it is answered once.

A message refused before it was even prepared (the database refused the held ones before it,
or its thread lookup) is kept too, as it came (the event's Candidate), and prepared in its
turn: left to Slack's redelivery, it would be lost once Slack stops retrying, and a newer
message of its chat arriving before that redelivery would be stored first.

A chat's held messages are offered before anything newer of that chat, in the chat's turn
(ChatSerial), oldest first, so its messages reach the agent in the order they were written.
Memory is bounded: past MAX_HELD messages the oldest are left to Slack's redelivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.slack.events import Candidate
from picobridge.contract import InboundMessage, StorageUnavailable

log = logging.getLogger("picobridge.slack")

MAX_HELD = 1000
# While the database is locked every attempt waits out its busy timeout and holds up the
# daemon's other writes, so retries start slow; Slack's own redeliveries come meanwhile.
RETRY_FIRST = 5.0
RETRY_CAP = 20.0


class HeldMessages:
    def __init__(self, deliver: Callable[[InboundMessage], Awaitable[None]],
                 prepare: Callable[[Candidate], Awaitable[InboundMessage | None]],
                 serial: ChatSerial) -> None:
        """`deliver` submits one message (raising StorageUnavailable while the outage
        lasts); `prepare` makes the message of a kept Candidate (None: nothing to submit);
        `serial` is the chats' order of work that events go through too."""
        self._deliver = deliver
        self._prepare = prepare
        self._serial = serial
        self._held: OrderedDict[str, InboundMessage | Candidate] = OrderedDict()
        self._waiting = asyncio.Event()
        self._stored = asyncio.Event()
        self._dropped = False

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, platform_message_id: object) -> bool:
        return platform_message_id in self._held

    def hold(self, message: InboundMessage) -> None:
        """A prepared message the database refused (in the place of its Candidate, if kept)."""
        self._add(message)

    def keep(self, found: Candidate) -> None:
        """A message refused before it was prepared, unless it is held already."""
        if found.platform_message_id not in self._held:
            self._add(found)

    def _add(self, item: InboundMessage | Candidate) -> None:
        self._held[item.platform_message_id] = item
        while len(self._held) > MAX_HELD:
            self._held.popitem(last=False)
            if not self._dropped:
                log.warning("more than %d Slack messages wait for the database; the oldest "
                            "are left to Slack's redelivery", MAX_HELD)
                self._dropped = True
        self._waiting.set()

    def stored(self) -> None:
        """A message was just stored: held ones need not wait out their pause."""
        if self._held:
            self._stored.set()

    async def flush(self, chat_key: str) -> None:
        """Offer the chat's held messages again, oldest first (call in the chat's turn);
        raises StorageUnavailable while the database still refuses them."""
        for item in [m for m in self._held.values() if m.chat.key == chat_key]:
            key = item.platform_message_id
            try:
                await self._offer(item)
            except StorageUnavailable:
                raise
            except Exception:
                # Not the outage: a message that fails otherwise must not block its chat
                # for good. Slack may still send it again.
                self._held.pop(key, None)
                log.exception("a held Slack message failed and is let go: %s", key)
                raise
            self._held.pop(key, None)
        if not self._held:
            self._dropped = False

    async def _offer(self, item: InboundMessage | Candidate) -> None:
        if isinstance(item, InboundMessage):
            message: InboundMessage | None = item
        else:
            message = await self._prepare(item)
            if message is not None and item.platform_message_id in self._held:
                # Prepared once: files are not fetched again while the outage lasts.
                self._held[item.platform_message_id] = message
        if message is not None:
            await self._deliver(message)

    async def retry_forever(self) -> None:
        """Offer held messages again until the database takes them (BridgeLink.keep_running
        runs this)."""
        backoff = Backoff(RETRY_FIRST, RETRY_CAP)
        while True:
            await self._waiting.wait()
            self._stored.clear()
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation
            # that meets the event's wake-up, and this loop would then never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff.next()):
                    await self._stored.wait()
            try:
                for key in dict.fromkeys(m.chat.key for m in self._held.values()):
                    await self._serial.run(key, functools.partial(self.flush, key))
            except StorageUnavailable:
                continue
            backoff.reset()
            if not self._held:
                self._waiting.clear()
