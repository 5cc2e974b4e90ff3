"""The bot's command menus from the bridge's catalogue: the bot's own (setMyCommands, default
scope) and a chat's own where its agent offers other commands (BotCommandScopeChat; deleting
it shows the bot's own again); and the commands a group message may be."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from telegram import Bot, BotCommand, BotCommandScopeChat
from telegram.error import RetryAfter, TelegramError

from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.telegram.errors import check_cancelled, retry_seconds
from picobridge.adapters.telegram.parse import UNREADABLE
from picobridge.contract import ALL_COMMANDS, BridgeCommand, ChatRef, DeliveryError

log = logging.getLogger("picobridge.telegram")


def command_menu(commands: Sequence[BridgeCommand]) -> tuple[tuple[str, str], ...]:
    """A command menu: the listed commands, their descriptions as sentences."""
    return tuple((c.name, c.description[:1].upper() + c.description[1:])
                 for c in commands if c.listed)


# Every chat command, listed or not: a group message that is one of them is for the bot.
COMMAND_NAMES = tuple(c.name for c in ALL_COMMANDS)


def _bot_commands(commands: Sequence[BridgeCommand]) -> list[BotCommand]:
    return [BotCommand(name, text) for name, text in command_menu(commands)]


class Menus:
    def __init__(self, bot: Bot, scrub: Callable[[str], str],
                 delivery_error: Callable[[TelegramError], DeliveryError]) -> None:
        self._bot = bot
        self._scrub = scrub
        self._delivery_error = delivery_error

    async def register(self, commands: Sequence[BridgeCommand]) -> None:
        """The bot's own menu, set only when Telegram holds another (setMyCommands is rate
        limited hard; a daemon restarting in a loop must not call it each time); a 429 or a
        failing Telegram is waited out."""
        menu = command_menu(commands)
        backoff = Backoff()
        while True:
            try:
                current = [(c.command, c.description) for c in await self._bot.get_my_commands()]
                if current == list(menu):
                    log.debug("bot commands already registered")
                    return
                await self._bot.set_my_commands(_bot_commands(commands))
                log.info("bot commands registered")
                return
            except RetryAfter as exc:
                await asyncio.sleep(retry_seconds(exc))
            except TelegramError as exc:
                check_cancelled()
                error = self._delivery_error(exc)
                if error.permanent:
                    log.warning("could not register the bot's commands: %s", error)
                    return
                log.warning("could not register the bot's commands (%s); retrying in %.0fs",
                            error, backoff.delay)
                await backoff.wait()
            except UNREADABLE as exc:
                log.warning("could not register the bot's commands: an answer of the wrong "
                            "shape (%s)", exc.__class__.__name__)
                return

    async def show(self, chat: ChatRef, commands: Sequence[BridgeCommand] | None) -> None:
        """The chat's own menu (None: none, so that it shows the bot's)."""
        scope = BotCommandScopeChat(int(chat.chat_id))
        try:
            if commands is None:
                await self._bot.delete_my_commands(scope=scope)
            else:
                await self._bot.set_my_commands(_bot_commands(commands), scope=scope)
        except TelegramError as exc:
            check_cancelled()
            raise self._delivery_error(exc) from None
        except UNREADABLE as exc:
            raise DeliveryError(f"an answer of the wrong shape ({exc.__class__.__name__})"
                                ) from None
