"""Telegram: python-telegram-bot on our own event loop, long polling or a webhook."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from picobridge.adapters.telegram.platform import TelegramPlatform

if TYPE_CHECKING:
    from picobridge.adapters.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter", "TelegramPlatform"]


def __getattr__(name: str) -> Any:
    # The adapter (and its libraries) load on first use, so the registry can read the
    # platform's settings without importing them.
    if name == "TelegramAdapter":
        from picobridge.adapters.telegram.adapter import TelegramAdapter

        return TelegramAdapter
    raise AttributeError(name)
