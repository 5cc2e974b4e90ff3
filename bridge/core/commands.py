"""Commands the bridge answers itself, on every platform: /new, /status, /stop, /help.

Any other /command is an ordinary message for the agent. Adapters translate their platform's
command syntax (a slash command with an argument, `!new`) to this one.
"""

from __future__ import annotations

import re

from picobridge.agent.port import PoolStatus, WorkerState
from picobridge.contract import (
    BRIDGE_COMMANDS,
    DEFAULT_AGENT,
    ChatRef,
    InboundMessage,
    listed_commands,
)
from picobridge.core.quotas import Quotas
from picobridge.core.router import Router
from picobridge.core.switching import AgentSwitch, CommandReply
from picobridge.store import Store

_COMMAND = re.compile(r"^/([A-Za-z]+)(?:@\S+)?(?:\s|$)")


def help_text() -> str:
    """What /help answers: made from the command catalogue, like the platforms' menus."""
    lines = ["I pass your messages to an AI agent and bring back its answers.", "Commands:"]
    lines += [f"/{c.name}: {c.description}" for c in listed_commands()]
    return "\n".join(lines)


HELP = help_text()
COMMAND_NAMES = frozenset(command.name for command in BRIDGE_COMMANDS)


def command_argument(text: str) -> str:
    """What follows the command word: `/agent coder` -> "coder"."""
    match = _COMMAND.match(text.strip())
    return text.strip()[match.end():].strip() if match else ""


def parse_command(text: str) -> str | None:
    """The bridge command a message is, or None for anything the agent should see."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name = match[1].lower()
    return name if name in COMMAND_NAMES else None


class Commands:
    def __init__(self, store: Store, router: Router, agents: PoolStatus,
                 quotas: Quotas | None = None, switch: AgentSwitch | None = None) -> None:
        self._switch = switch
        self._store = store
        self._router = router
        self._agents = agents
        self._quotas = quotas

    async def run(self, name: str, chat: ChatRef, agent: str | None = None,
                  sender: str | None = None,
                  message: InboundMessage | None = None) -> str | CommandReply:
        """Answer a command of `chat`, whose messages now go to `agent` (None: the agent it
        talks to already); `message` is the command as it came (its sender, its argument)."""
        if name == "agent" and message is not None and self._switch is not None:
            return await self._switch.command(message, command_argument(message.text))
        if name == "new":
            session = await self._store.new_session(chat, agent)
            return f"Started a new conversation. Session: `{session}`"
        if name == "stop":
            return await self._stop(chat)
        if name == "status":
            left = (await self._quotas.left(chat.platform, sender)
                    if self._quotas is not None and sender is not None else None)
            return await self._status(chat, agent) + (f"\n{left}" if left else "")
        if name == "start":
            return "Hello! " + HELP
        return HELP

    async def _stop(self, chat: ChatRef) -> str:
        dropped = await self._router.drop_queued(chat)
        stopped = self._router.stop_turn(chat)
        waiting = (f"Dropped {dropped} waiting message{'s' if dropped != 1 else ''}. "
                   if dropped else "Nothing was waiting. ")
        if stopped:
            return waiting + "Stopping the reply being worked on."
        return waiting + "A reply already being worked on still arrives."

    def _agent_line(self, session: str, agent: str) -> list[str]:
        everyone = self._agents.infos()
        workers = [w for w in everyone if w.agent == agent] or everyone
        name = self._agents.assigned_worker(session)
        mine = next((w for w in workers if w.name == name), None)
        if mine is None:
            # Not placed yet: any ready worker will take it; show the best of them.
            mine = next((w for w in workers if w.state is WorkerState.READY), workers[0])
        label = f"worker {mine.name} " if len(workers) > 1 else ""
        if len({w.agent for w in everyone}) > 1:
            label = f"{agent}, {label}"
        line = (f"Agent: {label}{mine.state.value}" + (f" (pid {mine.pid})" if mine.pid else "")
                + (f", {mine.restarts} restarts" if mine.restarts else ""))
        if len(workers) > 1:
            ready = sum(1 for w in workers if w.state is WorkerState.READY)
            line += f"; {ready} of {len(workers)} workers ready"
        lines = [line]
        if mine.last_error and mine.state is not WorkerState.READY:
            lines.append(f"Last problem: {mine.last_error}")
        return lines

    async def _status(self, chat: ChatRef, agent: str | None) -> str:
        status = self._router.status(chat)
        session = await self._store.current_session(chat, agent)
        agent = agent or await self._store.chat_agent(chat) or DEFAULT_AGENT
        lines = self._agent_line(session, agent)
        if status.turn_running_for is not None:
            lines.append(f"Working on your message for {status.turn_running_for:.0f}s")
        if status.queued:
            ahead = f", {status.lanes_ahead} chats ahead of you" if status.lanes_ahead else ""
            lines.append(f"Waiting: {status.queued} message(s){ahead}")
        if status.turn_running_for is None and not status.queued:
            lines.append("Nothing of yours is waiting.")
        lines.append(f"Session: `{session}`")
        return "\n".join(lines)
