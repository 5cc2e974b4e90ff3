"""Chat commands the bridge answers (contract/commands.py holds the catalogue): /new, /status,
/stop, /help here; /mode, /sessions, /resume and the agent's /model, /think, /compact,
/export in core/controls.py and core/history.py.

Any other /command is an ordinary message for the agent. Adapters translate their platform's
command syntax (a slash command with an argument, `!new`) to this one. A command of the
catalogue that the chat's agent does not support is answered with a word saying so.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from picobridge.agent.port import Capabilities, PoolStatus, WorkerState
from picobridge.contract import (
    ALL_COMMANDS,
    DEFAULT_AGENT,
    ChatRef,
    InboundMessage,
    listed_commands,
)
from picobridge.core.command_reply import CommandReply, Handler
from picobridge.core.quotas import Quotas
from picobridge.core.router import Router
from picobridge.core.switching import AgentSwitch
from picobridge.store import Store

_COMMAND = re.compile(r"^/([A-Za-z]+)(?:@\S+)?(?:\s+(.*))?$", re.DOTALL)
COMMAND_NAMES = frozenset(command.name for command in ALL_COMMANDS)


def help_text(agent_commands: frozenset[str] = frozenset()) -> str:
    """What /help answers: made from the command catalogue, like the platforms' menus."""
    lines = ["I pass your messages to an AI agent and bring back its answers.", "Commands:"]
    lines += [f"/{c.name}{' ' + c.usage if c.usage else ''}: {c.description}"
              for c in listed_commands(agent_commands)]
    return "\n".join(lines)


HELP = help_text()


def parse_command(text: str) -> tuple[str, str] | None:
    """(command, its argument) of a message that is a chat command, or None for anything the
    agent should see."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    name = match[1].lower()
    return (name, (match[2] or "").strip()) if name in COMMAND_NAMES else None


class Commands:
    def __init__(self, store: Store, router: Router, agents: PoolStatus,
                 handlers: dict[str, Handler] | None = None,
                 status_lines: Callable[[ChatRef, str], Awaitable[list[str]]] | None = None,
                 *, quotas: Quotas | None = None, switch: AgentSwitch | None = None) -> None:
        self._store = store
        self._router = router
        self._agents = agents
        self._handlers = dict(handlers or {})
        self._status_lines = status_lines
        self._quotas = quotas
        self._switch = switch

    def capabilities(self, agent: str) -> Capabilities:
        return self._agents.capabilities(agent)

    async def run(self, name: str, chat: ChatRef, agent: str | None = None,
                  argument: str = "", sender: str | None = None,
                  message: InboundMessage | None = None) -> CommandReply:
        """Answer a command of `chat`, whose messages now go to `agent` (None: the agent it
        talks to already); `message` is the command as it came (its sender)."""
        if name == "agent" and message is not None and self._switch is not None:
            return await self._switch.command(message, argument)
        agent = agent or await self._store.chat_agent(chat) or DEFAULT_AGENT
        caps = self._agents.capabilities(agent)
        agent_command = next(c for c in ALL_COMMANDS if c.name == name).agent
        if agent_command and name not in caps.commands:
            return CommandReply(f"/{name} is not available with this agent "
                                f"({caps.protocol}). /help lists what is.")
        handler = self._handlers.get(name)
        if handler is not None:
            return await handler(argument, chat, agent)
        if name == "new":
            session = await self._store.new_session(chat, agent)
            return CommandReply(f"Started a new conversation. Session: `{session}` "
                                "(the old one stays in /sessions)")
        if name == "stop":
            return CommandReply(await self._stop(chat))
        if name == "status":
            left = (await self._quotas.left(chat.platform, sender)
                    if self._quotas is not None and sender is not None else None)
            return CommandReply(await self._status(chat, agent) + (f"\n{left}" if left else ""))
        if name == "start":
            return CommandReply("Hello! " + help_text(caps.commands))
        return CommandReply(help_text(caps.commands))

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
        if self._status_lines is not None:
            lines += await self._status_lines(chat, session)
        lines.append(f"Session: `{session}`")
        return "\n".join(lines)
