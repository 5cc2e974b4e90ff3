"""Answers on their way into the store: committed without holding up the agent's output, and
never dropped while the database cannot take them (a full disk, another process holding the
write lock): kept in memory and tried again until stored, then handed to the outbox."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from picobridge.contract import ChatRef, OutgoingReply, ReplyKind
from picobridge.core.outbox import Outbox
from picobridge.core.turns import Turn
from picobridge.core.voice import VoiceOut
from picobridge.store import Store, StoredMessage
from picobridge.supervision import InOrder

log = logging.getLogger("picobridge.router")

STORE_RETRY_FIRST = 0.5
STORE_RETRY_CAP = 30.0


class Answers:
    def __init__(self, store: Store, outbox: Outbox, voice: VoiceOut | None = None) -> None:
        self._store = store
        self._outbox = outbox
        self._voice = voice
        self._settling: set[asyncio.Task[None]] = set()
        # Each chat's answers on their way into the store.
        self._chats = InOrder(self._settling)

    def _in_order(self, chat: ChatRef, work: Coroutine[Any, Any, None], name: str) -> None:
        """Store a chat's answers in the order they came: one kept back by an outage must not
        be overtaken by the chat's next one (its next turn may run meanwhile)."""
        self._chats.add(chat.key, work, name)

    def settle(self, turn: Turn, reply: OutgoingReply, after: Callable[[Turn], None], *,
               status: str = "answered", error: str | None = None) -> None:
        """Store the turn's reply and hand it to the outbox, then call `after(turn)`.

        The agent's output is read by one task per worker; committing each answer before
        reading the next would queue every chat's answer behind the others' round trips. (The
        chat's next turn may start meanwhile; its answer is stored after this one.)
        """
        async def run() -> None:
            try:
                spoken = reply if self._voice is None else await self._voice.spoken(
                    turn.messages, reply)
                reply_to = turn.messages[-1].reply_to
                if spoken.reply_to != reply_to:
                    spoken = dataclasses.replace(spoken, reply_to=reply_to)
                await self.commit(turn.chat, spoken, session_id=turn.session,
                                  settles=turn.messages, settle_status=status, error=error)
            finally:
                after(turn)

        self._in_order(turn.chat, run(), f"settle-{turn.session}")

    def give_up(self, messages: list[StoredMessage], reason: str) -> None:
        last = messages[-1]
        log.error("giving up chat=%s after %d attempts: %s", last.chat.key, last.attempts,
                  reason)
        text = (f"⚠️ Sorry, the agent failed {last.attempts} times on your message and I gave "
                f"up ({reason}). Please try again later.")
        self._in_order(last.chat, self.commit(
            last.chat, OutgoingReply(text, ReplyKind.ERROR, last.reply_to),
            session_id=last.session_id, settles=messages, settle_status="failed", error=reason),
            f"give-up-{last.session_id}")

    async def unsolicited(self, session: str | None, reply: OutgoingReply) -> None:
        """An answer no turn waits for (a scheduled job, a second answer): its session tells
        the chat."""
        chat = await self._store.chat_for_session(session) if session else None
        if chat is None:
            log.warning("agent response for unknown session %r dropped", session)
            return
        self._outbox.deliver(await self._store.add_reply(
            chat, dataclasses.replace(reply, kind=ReplyKind.UNSOLICITED), session_id=session))

    async def commit(self, chat: ChatRef, reply: OutgoingReply, **details: Any) -> None:
        delay = STORE_RETRY_FIRST
        failed = False
        while True:
            try:
                stored = await self._store.add_reply(chat, reply, **details)
            except Exception as exc:
                if not failed:
                    log.error("storing the answer failed chat=%s (%s: %s); keeping it and "
                              "trying again", chat.key, exc.__class__.__name__, exc)
                failed = True
                await asyncio.sleep(delay)
                delay = min(STORE_RETRY_CAP, delay * 2)
                continue
            if failed:
                log.warning("the answer for chat=%s is stored now", chat.key)
            self._outbox.deliver(stored)
            return

    async def wind_up(self, grace: float) -> None:
        """At shutdown: let answers under way be stored, for a while."""
        if not self._settling:
            return
        _, pending = await asyncio.wait(set(self._settling), timeout=max(grace, 1.0))
        if pending:
            log.error("%d answer(s) could not be stored before shutdown; their messages are "
                      "asked again after the next start", len(pending))
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
