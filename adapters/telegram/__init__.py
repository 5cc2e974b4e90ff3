"""Telegram: python-telegram-bot on our own event loop, long polling or a webhook."""

from picobridge.adapters.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
