"""Slack: slack-bolt in Socket Mode or HTTP mode."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from picobridge.adapters.slack.platform import SlackPlatform

if TYPE_CHECKING:
    from picobridge.adapters.slack.adapter import SlackAdapter

__all__ = ["SlackAdapter", "SlackPlatform"]


def __getattr__(name: str) -> Any:
    # The adapter (and its libraries) load on first use, so the registry can read the
    # platform's settings without importing them.
    if name == "SlackAdapter":
        from picobridge.adapters.slack.adapter import SlackAdapter

        return SlackAdapter
    raise AttributeError(name)
