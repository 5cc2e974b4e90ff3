"""Discord: discord.py's gateway client and REST API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from picobridge.adapters.discord.platform import DiscordPlatform

if TYPE_CHECKING:
    from picobridge.adapters.discord.adapter import DiscordAdapter

__all__ = ["DiscordAdapter", "DiscordPlatform"]


def __getattr__(name: str) -> Any:
    # The adapter (and discord.py) load on first use, so the registry can read the platform's
    # settings without importing them.
    if name == "DiscordAdapter":
        from picobridge.adapters.discord.adapter import DiscordAdapter

        return DiscordAdapter
    raise AttributeError(name)
