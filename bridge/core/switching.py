"""/agent: which agent a chat talks to, and switching it to another its route allows.

`/agent` answers with the chat's agent and, when its route lists `switchable` agents, a
question whose buttons name the others (platforms without buttons show the choices and how to
type them); `/agent NAME` switches at once. A switch is stored with the chat (it survives
restarts) and takes the chat to its session with that agent: a fresh one the first time, the
one it had there when it comes back, so the agent still knows the conversation. An agent the
route does not list is refused. The buttons are a menu of the bridge's like /model's
(`Dialogs.offer`): a click counts only in the chat that asked, from a person allowed, once.
"""

from __future__ import annotations

import logging

from picobridge.contract import ChatRef, InboundMessage
from picobridge.core.command_reply import CommandReply
from picobridge.core.menus import ChatMenus
from picobridge.core.routes import Routing
from picobridge.store import Store

log = logging.getLogger("picobridge.switching")


class AgentSwitch:
    def __init__(self, store: Store, routing: Routing, menus: ChatMenus | None = None) -> None:
        self._store = store
        self._routing = routing
        self._menus = menus  # the chat's command menu follows its agent

    async def command(self, message: InboundMessage, argument: str) -> CommandReply:
        chat = message.chat
        route = self._routing.route(chat, message.sender_id, message.chat_kind)
        current = self._routing.agent_for(chat, message.sender_id, message.chat_kind)
        others = [a for a in route.choices if a != current]
        if argument:
            return CommandReply(await self._switch(chat, route.choices, current, argument))
        if not others:
            return CommandReply(f"This chat talks to the agent {current}; it cannot switch "
                                "to another.")

        async def chosen(name: str) -> str:
            # The bridge's menus (Dialogs.offer) take a click only in this chat, from a
            # person allowed, once.
            return await self._switch(chat, route.choices, await self._store.chat_agent(chat),
                                      name)

        lines = [f"This chat talks to the agent {current}. Switch to:"]
        lines += [f"{n}. {name}  (/agent {name})" for n, name in enumerate(others, 1)]
        return CommandReply("\n".join(lines), options=tuple(others), title="Switch to",
                            chosen=chosen)

    async def _switch(self, chat: ChatRef, choices: tuple[str, ...], current: str | None,
                      name: str) -> str:
        name = name.strip()
        if name not in choices:
            others = [a for a in choices if a != current]
            allowed = (f"it can switch to {', '.join(others)}" if others
                       else "it cannot switch to another")
            return f"This chat cannot switch to the agent {name!r}: {allowed}."
        if name == current:
            return f"This chat already talks to the agent {name}."
        known = await self._store.agent_session(chat, name)
        # The route's own agent is no choice to keep: the chat follows its route again.
        remember = name != choices[0]
        session = await self._store.choose_agent(chat, name, remember=remember)
        self._routing.choose(chat, name if remember else None)
        if self._menus is not None:
            await self._menus.agent_is(chat, name)
        log.info("chat=%s switched from agent %s to %s session=%s", chat.key, current, name,
                 session)
        if known is not None:
            return f"Switched to the agent {name}: back to your conversation there."
        return f"Switched to the agent {name}: a new conversation starts."
