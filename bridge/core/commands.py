"""Commands the bridge answers itself, on every platform: /new, /status, /stop, /help.

Any other /command is an ordinary message for the agent. Adapters translate their platform's
command syntax (Slack's `/picobridge new`, `!new`) to this one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from picobridge.contract import BRIDGE_COMMANDS, ChatRef, listed_commands
from picobridge.core.router import Router
from picobridge.store import Store

_COMMAND = re.compile(r"^/([A-Za-z]+)(?:@\S+)?(?:\s|$)")


def help_text() -> str:
    """What /help answers: made from the command catalogue, like the platforms' menus."""
    lines = ["I pass your messages to an AI agent and bring back its answers.", "Commands:"]
    lines += [f"/{c.name}: {c.description}" for c in listed_commands()]
    return "\n".join(lines)


HELP = help_text()
COMMAND_NAMES = frozenset(command.name for command in BRIDGE_COMMANDS)


def parse_command(text: str) -> str | None:
    """The bridge command a message is, or None for anything the agent should see."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name = match[1].lower()
    return name if name in COMMAND_NAMES else None


@dataclass(frozen=True, slots=True)
class AgentSummary:
    state: str
    pid: int | None
    restarts: int
    last_error: str | None


class Commands:
    def __init__(self, store: Store, router: Router,
                 agent_summary: Callable[[], AgentSummary]) -> None:
        self._store = store
        self._router = router
        self._agent_summary = agent_summary

    async def run(self, name: str, chat: ChatRef) -> str:
        if name == "new":
            session = await self._store.new_session(chat)
            return f"Started a new conversation. Session: `{session}`"
        if name == "stop":
            dropped = await self._router.drop_queued(chat)
            if not dropped:
                return "Nothing was waiting; a reply already being worked on still arrives."
            return (f"Dropped {dropped} waiting message{'s' if dropped != 1 else ''}. "
                    "A reply already being worked on still arrives.")
        if name == "status":
            return await self._status(chat)
        if name == "start":
            return "Hello! " + HELP
        return HELP

    async def _status(self, chat: ChatRef) -> str:
        agent = self._agent_summary()
        status = self._router.status(chat)
        session = await self._store.current_session(chat)
        lines = [f"Agent: {agent.state}" + (f" (pid {agent.pid})" if agent.pid else "")
                 + (f", {agent.restarts} restarts" if agent.restarts else "")]
        if agent.last_error and agent.state != "ready":
            lines.append(f"Last problem: {agent.last_error}")
        if status.turn_running_for is not None:
            lines.append(f"Working on your message for {status.turn_running_for:.0f}s")
        if status.queued:
            ahead = f", {status.lanes_ahead} chats ahead of you" if status.lanes_ahead else ""
            lines.append(f"Waiting: {status.queued} message(s){ahead}")
        if status.turn_running_for is None and not status.queued:
            lines.append("Nothing of yours is waiting.")
        lines.append(f"Session: `{session}`")
        return "\n".join(lines)
