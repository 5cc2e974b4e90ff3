"""The commands the bridge answers itself: one catalogue for /help, menus and slash commands."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BridgeCommand:
    """A command the bridge answers itself, on every platform.

    `description` is one line in lower case, as /help lists it after the command (a platform
    may capitalise it for its command menu). An unlisted command works but is not offered:
    /start is what chat apps send when someone first opens a bot.
    """

    name: str
    description: str
    listed: bool = True


# The one list of bridge commands: /help and every platform's command menu and command help
# are made from it, so they cannot disagree.
BRIDGE_COMMANDS: tuple[BridgeCommand, ...] = (
    BridgeCommand("new", "start a fresh conversation (the agent forgets this one)"),
    BridgeCommand("status", "agent health, your place in the queue, your session"),
    BridgeCommand("stop", "drop your messages that are still waiting"),
    BridgeCommand("agent", "which agent answers here; switch to another (/agent NAME)"),
    BridgeCommand("help", "what this bot does and its commands"),
    BridgeCommand("start", "say hello and explain the bot", listed=False),
)


def listed_commands() -> tuple[BridgeCommand, ...]:
    """The bridge commands offered to users, in the order menus show them."""
    return tuple(command for command in BRIDGE_COMMANDS if command.listed)
