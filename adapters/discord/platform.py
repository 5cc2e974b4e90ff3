"""Discord as picobridge's registry knows it: the `[discord]` section, snowflake user ids,
and the adapter built on demand (discord.py is imported only then)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from picobridge.contract import Platform

if TYPE_CHECKING:
    from picobridge.adapters.discord.settings import DiscordSettings
    from picobridge.contract import Adapter

# Three base64url parts: the bot's id, a timestamp, an HMAC.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{5,}")


class DiscordPlatform(Platform):
    name: ClassVar[str] = "discord"
    section_model: ClassVar[str] = "picobridge.adapters.discord.settings:DiscordSettings"
    credentials: ClassVar[dict[str, str]] = {"discord_token": "token"}
    enable_hint: ClassVar[str] = "discord.token"
    user_example: ClassVar[str] = "400000000000000001"
    library_loggers: ClassVar[tuple[str, ...]] = ("discord",)

    def active(self, section: DiscordSettings) -> bool:
        return section.active

    def allowed_users(self, section: DiscordSettings) -> frozenset[str]:
        return frozenset(section.allowed_users)

    def user_id_problem(self, user_id: str) -> str | None:
        if not user_id.isdigit():
            return "discord user ids are numbers (Developer Mode > Copy User ID)"
        return None

    def token_problems(self, section: DiscordSettings) -> list[str]:
        token = section.token.get_secret_value() if section.token is not None else None
        if token is not None and not TOKEN_SHAPE.fullmatch(token):
            return ["discord.token does not look like a bot token: the Developer Portal gives "
                    "it as three parts separated by dots (MTI...); check that it was copied "
                    "whole, without \"Bot \" in front"]
        return []

    def adapter(self, settings: Any) -> Adapter:
        from picobridge.adapters.discord.adapter import DiscordAdapter

        return DiscordAdapter(settings)
