"""Slack as picobridge's registry knows it: the `[slack]` section, member ids, and the
adapter built on demand (slack-bolt is imported only then)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from picobridge.contract import DEFAULT_BOT, Platform, bot_platform

if TYPE_CHECKING:
    from picobridge.adapters.slack.settings import SlackAppSettings
    from picobridge.contract import Adapter, BridgeCommand

# A person: U (or W, in Enterprise Grid), then capital letters and digits.
MEMBER_ID = re.compile(r"[UW][A-Z0-9]+")
# A channel, a private channel or group, a DM conversation.
CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,}")


class SlackPlatform(Platform):
    name: ClassVar[str] = "slack"
    section_model: ClassVar[str] = "picobridge.adapters.slack.settings:SlackSettings"
    credentials: ClassVar[dict[str, str]] = {
        "slack_bot_token": "bot_token",
        "slack_app_token": "app_token",
        "slack_signing_secret": "signing_secret",
    }
    enable_hint: ClassVar[str] = "slack.bot_token"
    bots_key: ClassVar[str | None] = "apps"
    user_example: ClassVar[str] = "U0123ABCD"
    library_loggers: ClassVar[tuple[str, ...]] = ("slack_bolt", "slack_sdk")
    # Bot and user tokens, app-level tokens.
    secret_shapes: ClassVar[tuple[str, ...]] = (r"\bxox[abposr]-[A-Za-z0-9-]{8,}",
                                                r"\bxapp-[A-Za-z0-9-]{8,}")

    def active(self, section: SlackAppSettings) -> bool:
        return section.active

    def allowed_users(self, section: SlackAppSettings) -> frozenset[str]:
        return frozenset(section.allowed_users)

    def user_id_problem(self, user_id: str) -> str | None:
        if MEMBER_ID.fullmatch(user_id):
            return None
        if MEMBER_ID.fullmatch(user_id.upper()):
            return f"slack member ids are upper case (did you mean {user_id.upper()}?)"
        if CHANNEL_ID.fullmatch(user_id.upper()):
            return ("that is a channel or conversation id, not a person's: picobridge lets in "
                    "people, so allow the channel's members one by one by their member ids "
                    "(slack.allowed_channels says where the bot may answer)")
        return ("slack member ids are U or W and then capital letters and digits, like "
                "U0123ABCD (profile, then ⋯, then Copy member ID)")

    def token_problems(self, section: SlackAppSettings) -> list[str]:
        problems = []
        for key, prefix, what, other in (
                ("bot_token", "xoxb-", "the Bot User OAuth Token", "xapp-"),
                ("app_token", "xapp-", "an App-Level Token", "xoxb-")):
            value = getattr(section, key)
            token = value.get_secret_value() if value is not None else None
            if token is None or token.startswith(prefix):
                continue
            swapped = {"xoxb-": "slack.bot_token", "xapp-": "slack.app_token"}[other]
            hint = (f"; this one starts with {other}, so it belongs in {swapped}"
                    if token.startswith(other) else "")
            problems.append(f"slack.{key} must be {what}, which starts with {prefix}{hint}")
        return problems

    def needs_listener(self, section: SlackAppSettings) -> str | None:
        if section.active and section.mode == "http":
            return "slack.mode = 'http'"
        return None

    def manifest(self, section: SlackAppSettings, commands: Sequence[BridgeCommand]) -> str:
        from picobridge.adapters.slack.manifest import manifest

        return manifest(section.slash_command, commands, section.events_path)

    def adapter(self, settings: Any) -> Adapter:
        return self.bot_adapter(settings, bot_platform(self.name, DEFAULT_BOT),
                                settings.section(self.name))

    def bot_adapter(self, settings: Any, platform: str, section: Any) -> Adapter:
        from picobridge.adapters.slack.adapter import SlackAdapter

        return SlackAdapter(settings, platform, section)
