"""Messages whose agent is gone. A waiting message belongs to its session's agent; a config that
no longer names that agent (taken out of `[agents]`, renamed) would leave it waiting for ever
and its sender told nothing. So at start, and when `picobridge failed retry` brings one back,
such messages go to the agent their chat gets now (the chat's route, else
`bridge.default_agent`), in the chat's conversation with that agent, and the chat is told once
which agent answers instead: the old conversation is not the new agent's to continue."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Sequence

from picobridge.contract import ChatRef, OutgoingReply, ReplyKind
from picobridge.core.outbox import Outbox
from picobridge.core.routes import Routing
from picobridge.store import Store, StoredMessage

log = logging.getLogger("picobridge.router")


def notice_text(gone: Collection[str], agent: str, count: int) -> str:
    names = ", ".join(f"“{name}”" for name in sorted(gone))
    what = "message" if count == 1 else f"{count} messages"
    return (f"The agent {names} that was to answer is no longer configured: “{agent}” answers "
            f"your waiting {what} instead, in a new conversation.")


class Orphans:
    def __init__(self, store: Store, routing: Routing, agents: Collection[str],
                 outbox: Outbox) -> None:
        self._store = store
        self._routing = routing
        self._agents = frozenset(agents)
        self._outbox = outbox

    async def adopt_waiting(self) -> int:
        """Move what the store holds for agents no longer configured; returns how many."""
        waiting = await self._store.open_messages()
        await self.rehome(waiting)
        return sum(1 for m in waiting if m.agent not in self._agents)

    async def rehome(self, messages: Sequence[StoredMessage]) -> list[StoredMessage]:
        """The messages as they are now: moved to their chat's agent where their own is gone
        (the chat told), the others as they were."""
        by_chat: dict[str, list[StoredMessage]] = {}
        for message in messages:
            if message.agent not in self._agents:
                by_chat.setdefault(message.chat.key, []).append(message)
        now: dict[int, StoredMessage] = {}
        for waiting in by_chat.values():
            now.update(await self._move(waiting[0].chat, waiting))
        return [now.get(m.id, m) for m in messages]

    async def _move(self, chat: ChatRef, waiting: list[StoredMessage]
                    ) -> dict[int, StoredMessage]:
        first = waiting[0]
        kind = await self._store.chat_kind(chat)
        agent = self._routing.agent_for(chat, first.sender_id, kind)
        gone = {m.agent for m in waiting}
        notice = OutgoingReply(notice_text(gone, agent, len(waiting)), ReplyKind.NOTICE,
                               first.reply_to)
        session, reply = await self._store.move_queued(chat, [m.id for m in waiting], agent,
                                                       notice)
        log.warning("agent %s no longer configured: %d waiting message(s) of chat %s go to "
                    "agent %s", ", ".join(sorted(gone)), len(waiting), chat.key, agent)
        self._outbox.deliver(reply)
        return {m.id: dataclasses.replace(m, session_id=session, agent=agent) for m in waiting}
