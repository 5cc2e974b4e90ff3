"""/agent: which agent a chat talks to, and switching it to another its route allows.

`/agent` answers with the chat's agent and, when its route lists `switchable` agents, a
question whose buttons name the others (platforms without buttons show the choices and how to
type them); `/agent NAME` switches at once. A switch is stored with the chat (it survives
restarts) and takes the chat to its session with that agent: a fresh one the first time, the
one it had there when it comes back, so the agent still knows the conversation. An agent the
route does not list is refused; the click of a person not allowed is refused by intake.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections import OrderedDict
from dataclasses import dataclass

from picobridge.contract import ChatRef, Dialog, DialogAnswer, DialogKind, InboundMessage
from picobridge.core.command_reply import CommandReply
from picobridge.core.routes import Routing
from picobridge.store import Store

log = logging.getLogger("picobridge.switching")

MAX_MENUS = 1000  # menus whose buttons still work (older ones say they no longer do)


@dataclass(frozen=True, slots=True)
class _Menu:
    chat: ChatRef
    choices: tuple[str, ...]


class AgentSwitch:
    def __init__(self, store: Store, routing: Routing) -> None:
        self._store = store
        self._routing = routing
        self._menus: OrderedDict[str, _Menu] = OrderedDict()
        # Unguessable ids, as for the agent's questions: a button names only its own menu.
        self._prefix = f"agent.{secrets.token_hex(4)}."
        self._numbers = itertools.count(1)

    def owns(self, dialog_id: str) -> bool:
        return dialog_id.startswith(self._prefix)

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
        dialog = Dialog(f"{self._prefix}{next(self._numbers)}", DialogKind.SELECT,
                        "Switch to", options=tuple(others))
        self._menus[dialog.id] = _Menu(chat, route.choices)
        while len(self._menus) > MAX_MENUS:
            self._menus.popitem(last=False)
        lines = [f"This chat talks to the agent {current}. Switch to:"]
        lines += [f"{n}. {name}  (/agent {name})" for n, name in enumerate(others, 1)]
        return CommandReply("\n".join(lines), dialog=dialog)

    async def clicked(self, dialog_id: str, chat: ChatRef, answer: DialogAnswer) -> str | None:
        """A button of a menu: switch (the question then shows what happened), or None
        when the menu is unknown, of another chat, or the click chose nothing."""
        menu = self._menus.get(dialog_id)
        if menu is None or menu.chat != chat or answer.cancelled or not answer.value:
            return None
        current = await self._store.chat_agent(chat)
        return await self._switch(chat, menu.choices, current, answer.value)

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
        log.info("chat=%s switched from agent %s to %s session=%s", chat.key, current, name,
                 session)
        if known is not None:
            return f"Switched to the agent {name}: back to your conversation there."
        return f"Switched to the agent {name}: a new conversation starts."
