"""Telegram as picobridge's registry knows it: the `[telegram]` section, numeric user ids,
and the adapter built on demand (python-telegram-bot is imported only then)."""

from __future__ import annotations

from typing import Any, ClassVar

from picobridge.adapters.telegram.settings import TelegramSettings
from picobridge.contract import Adapter, Platform


class TelegramPlatform(Platform):
    name: ClassVar[str] = "telegram"
    section: ClassVar[type[Any]] = TelegramSettings
    credentials: ClassVar[dict[str, str]] = {
        "telegram_token": "token",
        "telegram_webhook_secret": "webhook_secret",
    }
    enable_hint: ClassVar[str] = "telegram.token"
    user_example: ClassVar[str] = "123456789"

    def active(self, section: TelegramSettings) -> bool:
        return section.active

    def allowed_users(self, section: TelegramSettings) -> frozenset[str]:
        return frozenset(str(user) for user in section.allowed_users)

    def user_id_problem(self, user_id: str) -> str | None:
        if not user_id.lstrip("-").isdigit():
            return "telegram user ids are numbers"
        return None

    def needs_listener(self, section: TelegramSettings) -> str | None:
        if section.active and section.mode == "webhook":
            return "telegram.mode = 'webhook'"
        return None

    def adapter(self, settings: Any) -> Adapter:
        from picobridge.adapters.telegram.adapter import TelegramAdapter

        return TelegramAdapter(settings)
