"""The chat commands: one catalogue for /help, menus and slash commands.

The bridge answers some commands itself, on every agent (/new, /status, /stop, /mode,
/sessions, /resume, /help); the others control the agent and exist only where its protocol
driver declares them (`Driver.commands`: /model, /think, /compact, /export with prime-rpc).
`catalogue` merges the two for one agent, so /help and every platform's command menu and
command help show what the chat's agent supports, in one order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BridgeCommand:
    """A chat command.

    `description` is one line in lower case, as /help lists it after the command (a platform
    may capitalise it for its command menu); `usage` the argument it takes, if any. An
    unlisted command works but is not offered: /start is what chat apps send when someone
    first opens a bot. `agent` commands are offered only where the agent's driver has them.
    """

    name: str
    description: str
    listed: bool = True
    usage: str = ""
    agent: bool = False


# The one list of chat commands, in the order menus show them: /help and every platform's
# command menu and command help are made from it, so they cannot disagree.
ALL_COMMANDS: tuple[BridgeCommand, ...] = (
    BridgeCommand("new", "start a fresh conversation (the old one stays in /sessions)"),
    BridgeCommand("status", "agent health, your place in the queue, your session"),
    BridgeCommand("stop", "drop your messages that are still waiting"),
    BridgeCommand("agent", "which agent answers here; switch to another (/agent NAME)"),
    BridgeCommand("mode", "what a message does while the agent works: collect, steer, "
                  "followup, interrupt", usage="[collect|steer|followup|interrupt]"),
    BridgeCommand("model", "choose the agent's model", usage="[name]", agent=True),
    BridgeCommand("think", "choose how hard the model thinks", usage="[level]", agent=True),
    BridgeCommand("compact", "summarise the conversation so far to free the agent's memory",
                  usage="[instructions]", agent=True),
    BridgeCommand("export", "get this conversation as a file", agent=True),
    BridgeCommand("sessions", "your last conversations"),
    BridgeCommand("resume", "go back to an earlier conversation", usage="[number]"),
    BridgeCommand("help", "what this bot does and its commands"),
    BridgeCommand("start", "say hello and explain the bot", listed=False),
)

# The bridge's own commands, there whatever the agent.
BRIDGE_COMMANDS: tuple[BridgeCommand, ...] = tuple(c for c in ALL_COMMANDS if not c.agent)
# Commands a protocol driver may declare.
AGENT_COMMANDS: frozenset[str] = frozenset(c.name for c in ALL_COMMANDS if c.agent)


def catalogue(agent_commands: Iterable[str] = ()) -> tuple[BridgeCommand, ...]:
    """The commands of a chat whose agent supports `agent_commands`, in menu order."""
    supported = frozenset(agent_commands)
    return tuple(c for c in ALL_COMMANDS if not c.agent or c.name in supported)


def listed_commands(agent_commands: Iterable[str] = ()) -> tuple[BridgeCommand, ...]:
    """The commands offered to users of such a chat, in the order menus show them."""
    return tuple(command for command in catalogue(agent_commands) if command.listed)
