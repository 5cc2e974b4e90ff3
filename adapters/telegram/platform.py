"""Telegram as picobridge's registry knows it: the `[telegram]` section, numeric user ids,
and the adapter built on demand (python-telegram-bot is imported only then)."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, ClassVar

from picobridge.contract import DEFAULT_BOT, Platform, bot_platform

if TYPE_CHECKING:
    from picobridge.adapters.telegram.settings import TelegramBotSettings
    from picobridge.contract import Adapter

# <bot id>:<secret>, as @BotFather gives it (the secret: letters, digits, _ and -).
TOKEN_SHAPE = re.compile(r"[0-9]+:[A-Za-z0-9_-]+")


class TelegramPlatform(Platform):
    name: ClassVar[str] = "telegram"
    section_model: ClassVar[str] = "picobridge.adapters.telegram.settings:TelegramSettings"
    credentials: ClassVar[dict[str, str]] = {
        "telegram_token": "token",
        "telegram_webhook_secret": "webhook_secret",
    }
    enable_hint: ClassVar[str] = "telegram.token"
    bots_key: ClassVar[str | None] = "bots"
    user_example: ClassVar[str] = "123456789"
    library_loggers: ClassVar[tuple[str, ...]] = ("telegram", "httpx", "httpcore")
    # A bot token, also inside .../bot<token>/ URLs.
    secret_shapes: ClassVar[tuple[str, ...]] = (r"(?<!\d)\d{5,}:[A-Za-z0-9_-]{30,}",)

    def active(self, section: TelegramBotSettings) -> bool:
        return section.active

    def allowed_users(self, section: TelegramBotSettings) -> frozenset[str]:
        return frozenset(str(user) for user in section.allowed_users)

    def user_id_problem(self, user_id: str) -> str | None:
        if not re.fullmatch(r"-?[0-9]+", user_id):
            return "telegram user ids are numbers, like 123456789"
        if int(user_id) <= 0:
            return ("telegram user ids are positive; a negative id is a group or channel (a "
                    "chat, not a person). picobridge lets in people, not chats: allow the "
                    "group's members one by one, by their own user ids (the bot tells each "
                    "their id when they write to it)")
        return None

    def token_problems(self, section: TelegramBotSettings) -> list[str]:
        token = section.token.get_secret_value() if section.token is not None else None
        if token is not None and not TOKEN_SHAPE.fullmatch(token):
            return ["telegram.token does not look like a bot token: @BotFather gives it as "
                    "the bot's number, a colon and a secret (123456789:AA...); check that "
                    "it was copied whole"]
        return []

    def needs_listener(self, section: TelegramBotSettings) -> str | None:
        if section.active and section.mode == "webhook":
            return "telegram.mode = 'webhook'"
        return None

    def adapter(self, settings: Any) -> Adapter:
        return self.bot_adapter(settings, bot_platform(self.name, DEFAULT_BOT),
                                settings.section(self.name))

    def bot_adapter(self, settings: Any, platform: str, section: Any) -> Adapter:
        # python-telegram-bot imports httpx (its default transport, kept for proxies), and
        # httpx then imports its command-line tool, with rich, click and pygments (6 MB
        # resident), wherever those happen to be installed. A daemon never runs that tool.
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
        from picobridge.adapters.telegram.adapter import TelegramAdapter

        return TelegramAdapter(settings, platform, section)
