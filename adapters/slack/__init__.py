"""Slack: slack-bolt in Socket Mode or HTTP mode."""

from picobridge.adapters.slack.adapter import SlackAdapter

__all__ = ["SlackAdapter"]
