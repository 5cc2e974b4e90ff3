"""The bot's command menu (setMyCommands) and the commands a group message may be, from the
bridge's catalogue."""

from __future__ import annotations

from collections.abc import Sequence

from picobridge.contract import ALL_COMMANDS, BridgeCommand, listed_commands


def command_menu(commands: Sequence[BridgeCommand]) -> tuple[tuple[str, str], ...]:
    """The bot's command menu: what the bridge offers for its agent (BridgeLink.commands),
    its descriptions as sentences."""
    return tuple((c.name, c.description[:1].upper() + c.description[1:])
                 for c in commands if c.listed)


# The bridge's own commands (an agent adds its own).
COMMANDS: tuple[tuple[str, str], ...] = command_menu(listed_commands())
# Every chat command, listed or not: a group message that is one of them is for the bot.
COMMAND_NAMES = tuple(c.name for c in ALL_COMMANDS)
