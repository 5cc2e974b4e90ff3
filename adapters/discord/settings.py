"""The `[discord]` section of the configuration."""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Literal

from annotated_types import Le

from picobridge.config.fields import plain
from picobridge.config.sections import Section, cleaned
from picobridge.config.values import After, PositiveInt, Secret, empty_list


def _snowflakes(value: object) -> object:
    if isinstance(value, list) and not all(isinstance(v, str) and v.isdigit() for v in value):
        raise ValueError("discord ids are numbers written as strings, "
                         "like \"400000000000000001\"")
    return value


@plain
class DiscordSettings(Section):
    enabled: bool | None = None
    token: Annotated[Secret | None, cleaned("discord.token")] = None
    # The REST API base; the gateway's address comes from its /gateway/bot answer.
    base_url: str = "https://discord.com/api/v10"
    allowed_users: Annotated[list[str], After(_snowflakes)] = field(default_factory=empty_list)
    # "all": every guild the bot is in (slash commands registered globally); "none": DMs
    # only; or a list of guild ids (slash commands registered in each, at once).
    guilds: Annotated[Literal["all", "none"] | list[str], After(_snowflakes)] = "all"
    allow_bots: bool = False
    reaction_received: str = "👀"
    reaction_done: str = "✅"
    reaction_failed: str = "❌"
    # Show the answer while it is written (edits of one message).
    stream: bool = False
    max_chunks: PositiveInt = 4
    # At start, messages missed while the daemon was down are read back from the history of
    # this many of the most recently active conversations, up to `catch_up_messages` each.
    catch_up_channels: PositiveInt = 50
    catch_up_messages: Annotated[PositiveInt, Le(1000)] = 100

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.token is not None

    def __post_init__(self) -> None:
        if self.enabled and self.token is None:
            raise ValueError("discord.enabled is true but discord.token is not set")

    def serves_guild(self, guild_id: str) -> bool:
        if self.guilds == "all":
            return True
        return self.guilds != "none" and guild_id in self.guilds
