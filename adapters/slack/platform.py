"""Slack as picobridge's registry knows it: the `[slack]` section, member ids, and the
adapter built on demand (slack-bolt is imported only then)."""

from __future__ import annotations

from typing import Any, ClassVar

from picobridge.adapters.slack.settings import SlackSettings
from picobridge.contract import Adapter, Platform


class SlackPlatform(Platform):
    name: ClassVar[str] = "slack"
    section: ClassVar[type[Any]] = SlackSettings
    credentials: ClassVar[dict[str, str]] = {
        "slack_bot_token": "bot_token",
        "slack_app_token": "app_token",
        "slack_signing_secret": "signing_secret",
    }
    enable_hint: ClassVar[str] = "slack.bot_token"
    user_example: ClassVar[str] = "U0123ABCD"

    def active(self, section: SlackSettings) -> bool:
        return section.active

    def allowed_users(self, section: SlackSettings) -> frozenset[str]:
        return frozenset(section.allowed_users)

    def user_id_problem(self, user_id: str) -> str | None:
        if not user_id.isalnum():
            return "slack member ids are letters and digits, like U0123ABCD"
        return None

    def needs_listener(self, section: SlackSettings) -> str | None:
        if section.active and section.mode == "http":
            return "slack.mode = 'http'"
        return None

    def adapter(self, settings: Any) -> Adapter:
        from picobridge.adapters.slack.adapter import SlackAdapter

        return SlackAdapter(settings)
