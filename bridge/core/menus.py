"""Each chat's command menu, where a platform can give one chat a menu of its own
(`Adapter.chat_menus`): it shows what the chat's agent offers.

A bot's own menu holds the commands of the agent its chats get by default (its first route
that takes every chat, else `bridge.default_agent`). A chat whose agent (by its route
or an /agent switch) offers other commands gets its own menu once its agent is known (its
first message, a switch), and loses it again when it is back on an agent the bot's menu fits.
What was set is stored (fingerprints, `chat_menus`), so a restart asks the platform nothing
for the chats whose menu is already right. Setting a menu never holds up a message: it runs
in a task of its own per chat, tried again after the platform's retry-after or a backoff, and
always sets what the chat's agent is by then.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from picobridge.contract import Adapter, BridgeCommand, ChatRef, DeliveryError
from picobridge.store import Store

log = logging.getLogger("picobridge.menus")

FIRST_RETRY, LAST_RETRY = 1.0, 300.0  # seconds between tries when the platform names none


def fingerprint(commands: tuple[BridgeCommand, ...]) -> str:
    """What identifies a menu: its commands as a menu shows them."""
    shown = "\n".join(f"{c.name} {c.description}" for c in commands if c.listed)
    return hashlib.sha256(shown.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class _Wanted:
    chat: ChatRef
    commands: tuple[BridgeCommand, ...] | None  # None: the bot's own menu
    menu: str | None  # its fingerprint


class ChatMenus:
    def __init__(self, store: Store, adapters: Mapping[str, Adapter],
                 commands_of: Callable[[str], tuple[BridgeCommand, ...]],
                 bot_agent: Callable[[str], str]) -> None:
        """`commands_of(agent)`: that agent's catalogue; a bot's own menu is that of
        `bot_agent(bot)`, the agent its chats get by default (`BridgeLink.commands`)."""
        self._store = store
        self._adapters = {name: a for name, a in adapters.items() if a.chat_menus}
        self._commands_of = commands_of
        self._bot_agent = bot_agent
        self._held: dict[str, str] | None = None  # chat key -> menu set there (stored)
        self._loading = asyncio.Lock()
        self._wanted: dict[str, _Wanted] = {}
        self._setting: dict[str, asyncio.Task[None]] = {}
        # (bot, agent) -> what a chat of that bot on that agent shows
        self._menus: dict[tuple[str, str], tuple[tuple[BridgeCommand, ...] | None,
                                                 str | None]] = {}
        self._refused: set[tuple[str, str | None]] = set()  # (chat key, menu) refused for good

    async def agent_is(self, chat: ChatRef, agent: str) -> None:
        """`chat` talks to `agent` (a message came, or it switched): make its menu fit."""
        if chat.platform not in self._adapters:
            return
        chat = ChatRef(chat.platform, chat.chat_id)
        commands, menu = self._menu(chat.platform, agent)
        held = await self._load()
        if (held.get(chat.key) == menu or (chat.key, menu) in self._refused) \
                and chat.key not in self._wanted:
            return
        self._wanted[chat.key] = _Wanted(chat, commands, menu)
        if chat.key not in self._setting:
            task = asyncio.create_task(self._set(chat.key, held), name=f"menu-{chat.key}")
            self._setting[chat.key] = task

    def _menu(self, bot: str, agent: str
              ) -> tuple[tuple[BridgeCommand, ...] | None, str | None]:
        """The agent's commands and their fingerprint; None for the bot's own menu."""
        known = self._menus.get((bot, agent))
        if known is None:
            commands = self._commands_of(agent)
            menu = fingerprint(commands)
            own = fingerprint(self._commands_of(self._bot_agent(bot)))
            known = (None, None) if menu == own else (commands, menu)
            self._menus[(bot, agent)] = known
        return known

    async def stop(self) -> None:
        tasks = list(self._setting.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _load(self) -> dict[str, str]:
        if self._held is not None:
            return self._held
        async with self._loading:
            if self._held is None:
                self._held = await self._store.chat_menus()
            return self._held

    async def _set(self, key: str, held: dict[str, str]) -> None:
        delay = FIRST_RETRY
        try:
            while (wanted := self._wanted.get(key)) is not None:
                if held.get(key) == wanted.menu:
                    del self._wanted[key]
                    return
                wait = await self._try(wanted, held)
                if wait is None:  # set, or refused for good: done with this menu
                    if self._wanted.get(key) == wanted:
                        del self._wanted[key]
                    continue
                await asyncio.sleep(wait if wait > 0 else delay)
                delay = min(delay * 2, LAST_RETRY)
        finally:
            self._setting.pop(key, None)

    async def _try(self, wanted: _Wanted, held: dict[str, str]) -> float | None:
        """Set the menu; None when done with it, else how long to wait (0: a backoff)."""
        chat = wanted.chat
        try:
            await self._adapters[chat.platform].show_commands(chat, wanted.commands)
        except DeliveryError as exc:
            if exc.permanent:
                log.warning("chat=%s keeps the menu it has: the platform refused it (%s)",
                            chat.key, exc)
                self._refused.add((chat.key, wanted.menu))
                return None
            log.info("chat=%s: setting its command menu failed (%s); trying again", chat.key,
                     exc)
            return exc.retry_after or 0.0
        except Exception as exc:
            log.warning("chat=%s: setting its command menu failed (%s); trying again",
                        chat.key, exc.__class__.__name__)
            return 0.0
        if wanted.menu is None:
            held.pop(chat.key, None)
        else:
            held[chat.key] = wanted.menu
        try:
            await self._store.set_chat_menu(chat.key, wanted.menu)
        except Exception as exc:  # it is set; a restart would only set it once more
            log.warning("could not store the menu of chat=%s (%s)", chat.key,
                        exc.__class__.__name__)
        log.info("chat=%s shows %s", chat.key,
                 "the bot's own menu" if wanted.menu is None else "its agent's own menu")
        return None
