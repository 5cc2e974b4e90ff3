"""Discord as picobridge's registry knows it: the `[discord]` section, snowflake user ids,
and the adapter built on demand (discord.py is imported only then)."""

from __future__ import annotations

from typing import Any, ClassVar

from picobridge.adapters.discord.settings import DiscordSettings
from picobridge.contract import Adapter, Platform


class DiscordPlatform(Platform):
    name: ClassVar[str] = "discord"
    section: ClassVar[type[Any]] = DiscordSettings
    credentials: ClassVar[dict[str, str]] = {"discord_token": "token"}
    enable_hint: ClassVar[str] = "discord.token"
    user_example: ClassVar[str] = "400000000000000001"

    def active(self, section: DiscordSettings) -> bool:
        return section.active

    def allowed_users(self, section: DiscordSettings) -> frozenset[str]:
        return frozenset(section.allowed_users)

    def user_id_problem(self, user_id: str) -> str | None:
        if not user_id.isdigit():
            return "discord user ids are numbers (Developer Mode > Copy User ID)"
        return None

    def adapter(self, settings: Any) -> Adapter:
        from picobridge.adapters.discord.adapter import DiscordAdapter

        return DiscordAdapter(settings)
