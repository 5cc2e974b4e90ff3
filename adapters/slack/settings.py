"""The `[slack]` section of the configuration, and its further apps (`[[slack.apps]]`)."""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any, Literal

from picobridge.config.fields import plain
from picobridge.config.sections import BotEntry, Section, cleaned
from picobridge.config.values import PositiveFloat, PositiveInt, Secret, empty_list


@plain
class SlackAppSettings(Section):
    """One app's keys: `[slack]` (the app named "default") and each `[[slack.apps]]`."""

    enabled: bool | None = None
    bot_token: Annotated[Secret | None, cleaned("slack.bot_token")] = None
    app_token: Annotated[Secret | None, cleaned("slack.app_token")] = None
    signing_secret: Annotated[Secret | None, cleaned("slack.signing_secret")] = None
    mode: Literal["socket", "http"] = "socket"
    # Seconds a Socket Mode connection may carry nothing, not even the answers to its pings,
    # while it reports connected; then it is replaced (and /healthz says degraded).
    silence_timeout: PositiveFloat = 120.0
    base_url: str = "https://slack.com/api/"
    events_path: str = "/slack/events"
    allowed_users: list[str] = field(default_factory=empty_list)
    allowed_channels: list[str] = field(default_factory=empty_list)
    file_hosts: list[str] = field(default_factory=lambda: ["files.slack.com"])
    allow_bots: bool = False
    slash_command: str = "/picobridge"
    command_prefix: str = "!"
    reaction_received: str = "eyes"
    reaction_done: str = "white_check_mark"
    reaction_failed: str = "x"
    stream: bool = False
    max_chunks: PositiveInt = 4

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.bot_token is not None

    def __post_init__(self) -> None:
        if not self.active:
            return
        if self.bot_token is None:
            raise ValueError("slack is enabled but slack.bot_token is not set")
        if self.mode == "socket" and self.app_token is None:
            raise ValueError("slack.mode = 'socket' needs slack.app_token (xapp-...)")
        if self.mode == "http" and self.signing_secret is None:
            raise ValueError("slack.mode = 'http' needs slack.signing_secret")


@plain
class SlackApp(BotEntry, SlackAppSettings):
    """A further app, `[[slack.apps]]`: a name and every key of `[slack]`."""

    @classmethod
    def default_paths(cls, name: str) -> dict[str, Any]:
        return {"events_path": f"/slack/{name}/events"}


@plain
class SlackSettings(SlackAppSettings):
    apps: list[SlackApp] = field(default_factory=empty_list)
