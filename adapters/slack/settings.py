"""The `[slack]` section of the configuration, and its further apps (`[[slack.apps]]`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt, SecretStr, field_validator, model_validator

from picobridge.config.sections import BotEntry, Section, clean_secret


class SlackAppSettings(Section):
    """One app's keys: `[slack]` (the app named "default") and each `[[slack.apps]]`."""

    enabled: bool | None = None
    bot_token: SecretStr | None = None
    app_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    mode: Literal["socket", "http"] = "socket"
    # Seconds a Socket Mode connection may carry nothing, not even the answers to its pings,
    # while it reports connected; then it is replaced (and /healthz says degraded).
    silence_timeout: PositiveFloat = 120.0
    base_url: str = "https://slack.com/api/"
    events_path: str = "/slack/events"
    allowed_users: list[str] = Field(default=[])
    allowed_channels: list[str] = Field(default=[])
    file_hosts: list[str] = Field(default=["files.slack.com"])
    allow_bots: bool = False
    slash_command: str = "/picobridge"
    command_prefix: str = "!"
    reaction_received: str = "eyes"
    reaction_done: str = "white_check_mark"
    reaction_failed: str = "x"
    stream: bool = False
    max_chunks: PositiveInt = 4

    _no_placeholders = field_validator("bot_token", "app_token", "signing_secret")(
        lambda v, info: clean_secret(v, f"slack.{info.field_name}")
    )

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.bot_token is not None

    @model_validator(mode="after")
    def _tokens_when_enabled(self) -> SlackAppSettings:
        if not self.active:
            return self
        if self.bot_token is None:
            raise ValueError("slack is enabled but slack.bot_token is not set")
        if self.mode == "socket" and self.app_token is None:
            raise ValueError("slack.mode = 'socket' needs slack.app_token (xapp-...)")
        if self.mode == "http" and self.signing_secret is None:
            raise ValueError("slack.mode = 'http' needs slack.signing_secret")
        return self


class SlackApp(BotEntry, SlackAppSettings):
    """A further app, `[[slack.apps]]`: a name and every key of `[slack]`."""

    @classmethod
    def default_paths(cls, name: str) -> dict[str, Any]:
        return {"events_path": f"/slack/{name}/events"}


class SlackSettings(SlackAppSettings):
    apps: list[SlackApp] = Field(default=[])
