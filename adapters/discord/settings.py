"""The `[discord]` section of the configuration."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, SecretStr, field_validator, model_validator

from picobridge.config.sections import Section, clean_secret


class DiscordSettings(Section):
    enabled: bool | None = None
    token: SecretStr | None = None
    # The REST API base; the gateway's address comes from its /gateway/bot answer.
    base_url: str = "https://discord.com/api/v10"
    allowed_users: list[str] = Field(default=[])
    # "all": every guild the bot is in (slash commands registered globally); "none": DMs
    # only; or a list of guild ids (slash commands registered in each, at once).
    guilds: Literal["all", "none"] | list[str] = "all"
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
    catch_up_messages: PositiveInt = Field(default=100, le=1000)

    _no_placeholders = field_validator("token")(
        lambda v, info: clean_secret(v, f"discord.{info.field_name}")
    )

    @field_validator("allowed_users", "guilds")
    @classmethod
    def _snowflakes(cls, value: object) -> object:
        if isinstance(value, list) and not all(isinstance(v, str) and v.isdigit()
                                               for v in value):
            raise ValueError("discord ids are numbers written as strings, "
                             "like \"400000000000000001\"")
        return value

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.token is not None

    @model_validator(mode="after")
    def _token_when_enabled(self) -> DiscordSettings:
        if self.enabled and self.token is None:
            raise ValueError("discord.enabled is true but discord.token is not set")
        return self

    def serves_guild(self, guild_id: str) -> bool:
        if self.guilds == "all":
            return True
        return self.guilds != "none" and guild_id in self.guilds
