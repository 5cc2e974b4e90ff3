"""The console as a chat platform, for `picobridge chat`."""

from picobridge.adapters.console.adapter import CONSOLE_CHAT, ConsoleAdapter

__all__ = ["CONSOLE_CHAT", "ConsoleAdapter"]
