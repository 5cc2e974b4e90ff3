"""The bridge side of the adapter contract (`BridgeLink`): where platform messages come in.

`submit` returns only after the message is committed, so an adapter can then acknowledge it
to its platform (a polling offset, an event ack) knowing a crash cannot lose it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from picobridge.agent.port import PoolStatus
from picobridge.contract import (
    DEFAULT_AGENT,
    BridgeCommand,
    ChatRef,
    DialogAnswer,
    InboundMessage,
    OutgoingReply,
    ReplyKind,
    SubmitResult,
    catalogue,
)
from picobridge.core.access import AccessPolicy, denial_text
from picobridge.core.command_reply import CommandReply
from picobridge.core.commands import Commands, parse_command
from picobridge.core.dialogs import Dialogs
from picobridge.core.liveness import Liveness
from picobridge.core.menus import ChatMenus
from picobridge.core.outbox import Outbox
from picobridge.core.quotas import Quotas, refusal_text
from picobridge.core.router import Router
from picobridge.core.routes import Routing
from picobridge.core.stats import IntakeStats, bump
from picobridge.core.storage import StorageGuard
from picobridge.core.voice import VoiceInbox
from picobridge.store import Store
from picobridge.supervision import TaskSupervisor, keep

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger("picobridge.intake")

AGENT_DOWN_TEXT = ("⏳ The agent is not available right now. Your message is saved and will be "
                   "answered as soon as it is back.")
MAX_TOLD = 100_000  # chats remembered as told during one outage
# How long a command may take before it is answered in the background (seconds).
COMMAND_INLINE = 3.0
WORKING_ON_IT = "⏳ On it: the answer follows here."


class Intake:
    def __init__(self, store: Store, router: Router, outbox: Outbox, access: AccessPolicy,
                 commands: Commands, agents: PoolStatus, app: web.Application | None = None,
                 *, tell_after: float | Mapping[str, float] = float("inf"),
                 tasks: TaskSupervisor | None = None, dialogs: Dialogs | None = None,
                 routing: Routing | None = None, quotas: Quotas | None = None,
                 voice: VoiceInbox | None = None, menus: ChatMenus | None = None) -> None:
        """A message arriving after no worker of its agent has been ready for `tell_after`
        seconds (per agent: its restart budget) gets a notice, once per chat and outage, so
        its sender knows it waits. `routing` picks each message's agent. With `voice`, a voice
        message is transcribed before it joins its chat's queue. `menus` keeps each chat's
        command menu to its agent's."""
        self._menus = menus
        self._app = app
        self._agents = agents
        self._tell_after = tell_after
        self._routing = routing if routing is not None else Routing([], DEFAULT_AGENT)
        self._outage: dict[str, float] = {}  # per agent, since when it is down
        self._told: set[str] = set()
        # Agents whose outage passed tell_after, and the chats then waiting for them were told.
        self._swept: set[str] = set()
        self._store = store
        self._router = router
        self._queue = voice.take if voice is not None else router.arrive_soon
        self._outbox = outbox
        self._access = access
        self._commands = commands
        self._connections: dict[str, bool] = {}
        self._disconnected_since: dict[str, float] = {}
        self.connections_changed = asyncio.Event()
        self.fatal_error: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._received: dict[str, int] = {}
        self._duplicates: dict[str, int] = {}
        self._denied: dict[str, int] = {}
        self._storage = StorageGuard()
        self._tasks = tasks if tasks is not None else TaskSupervisor()
        self._dialogs = dialogs
        self._later: set[asyncio.Task[None]] = set()  # commands answered in the background
        self._quotas = quotas
        self._liveness = Liveness()

    def stats(self) -> IntakeStats:
        return IntakeStats(dict(self._received), dict(self._duplicates), dict(self._denied),
                           dict(self._connections), dict(self._disconnected_since),
                           self._liveness.ages(), self._liveness.silent())

    async def submit(self, message: InboundMessage) -> SubmitResult:
        with self._storage.writing("receiving a message"):
            return await self._submit(message)

    async def _submit(self, message: InboundMessage) -> SubmitResult:
        chat, platform = message.chat, message.chat.platform
        if not await self._access.allowed(platform, message.sender_id):
            bump(self._denied, platform)
            log.info("message from unknown user refused platform=%s user=%s chat=%s", platform,
                     message.sender_id, chat.key)
            if await self._access.should_tell(platform, message.sender_id):
                self._outbox.deliver(await self._store.add_reply(chat, OutgoingReply(
                    denial_text(platform, message.sender_id), ReplyKind.NOTICE,
                    message.reply_to, private_to=message.sender_id)))
            return SubmitResult.DENIED
        agent = self._routing.agent_for(chat, message.sender_id, message.chat_kind)
        if self._menus is not None:
            await self._menus.agent_is(chat, agent)
        command = parse_command(message.text) if not message.attachments else None
        if command is not None:
            return await self._command(*command, message, agent)
        if self._dialogs is not None and self._dialogs.asking(chat) is not None:
            return await self._typed_answer(message, agent)
        stored = await self._store.record_inbound(message, agent)
        if stored is None:
            bump(self._duplicates, platform)
            log.info("duplicate ignored platform=%s id=%s", platform, message.platform_message_id)
            return SubmitResult.DUPLICATE
        bump(self._received, platform)
        log.debug("received platform=%s chat=%s id=%s session=%s agent=%s", platform, chat.key,
                  message.platform_message_id, stored.session_id, agent)
        if self._quotas is not None and not await self._within_limits(message, stored.id):
            return SubmitResult.ACCEPTED
        self._queue(stored)
        await self._tell_if_agent_down(message, agent)
        return SubmitResult.ACCEPTED

    async def _within_limits(self, message: InboundMessage, stored_id: int) -> bool:
        assert self._quotas is not None
        verdict = await self._quotas.check(message.chat.platform, message.sender_id)
        if verdict.allowed:
            return True
        await self._store.hold_over_limit(stored_id, verdict.why)
        log.info("over the limit (%s): message of %s:%s kept, not sent to the agent",
                 verdict.why, message.chat.platform, message.sender_id)
        if verdict.tell:
            self._outbox.deliver(await self._store.add_reply(message.chat, OutgoingReply(
                refusal_text(verdict), ReplyKind.NOTICE, message.reply_to)))
        return False

    async def _tell_if_agent_down(self, message: InboundMessage, agent: str) -> None:
        since = self._outage_now(agent)
        if since is not None:
            await self._tell(message.chat, message.reply_to, since, agent)

    def _outage_now(self, agent: str) -> float | None:
        """When the agent's current outage began, once it is past its `tell_after`; else
        None."""
        since = self._agents.down_since(agent)
        after = self._tell_after if isinstance(self._tell_after, float | int) \
            else self._tell_after.get(agent, float("inf"))
        if since is None or time.monotonic() - since < after:
            return None
        if since != self._outage.get(agent):  # a new outage of this agent: tell them again
            self._outage[agent] = since
            self._told = {key for key in self._told if not key.startswith(f"{agent} ")}
            self._swept.discard(agent)
        if len(self._told) >= MAX_TOLD:
            self._told.clear()
        return since

    async def watch_outages(self, every: float = 1.0) -> None:
        """Once an agent's outage passes its `tell_after`, every chat with a message already
        waiting for it is told too (once), not only those that write during it."""
        while True:
            await asyncio.sleep(every)
            down = {}
            for agent in sorted({w.agent for w in self._agents.infos()}):
                since = self._outage_now(agent)
                if since is not None and agent not in self._swept:
                    down[agent] = since
            if not down:
                continue
            for waiting in await self._store.waiting_chats():
                if waiting.agent in down:
                    await self._tell(waiting.chat, waiting.reply_to, down[waiting.agent],
                                     waiting.agent)
            self._swept.update(down)

    async def _tell(self, chat: ChatRef, reply_to: str | None, since: float,
                    agent: str) -> None:
        told = f"{agent} {chat.key}"
        if told in self._told:
            return
        self._told.add(told)
        log.warning("agent %s down for %.0fs: telling chat=%s its message waits", agent,
                    time.monotonic() - since, chat.key)
        try:
            self._outbox.deliver(await self._store.add_reply(
                chat, OutgoingReply(AGENT_DOWN_TEXT, ReplyKind.NOTICE, reply_to)))
        except Exception:
            # The message itself is stored: the platform must hear that it arrived.
            log.exception("could not store the agent-down notice chat=%s", chat.key)

    async def _command(self, name: str, argument: str, message: InboundMessage,
                       agent: str) -> SubmitResult:
        platform = message.chat.platform
        if await self._store.seen(platform, message.platform_message_id):
            bump(self._duplicates, platform)
            return SubmitResult.DUPLICATE
        # A command that waits for the agent (/compact, a model list while it starts) must not
        # hold up the platform's other messages: after a moment it answers in the background.
        running = asyncio.ensure_future(self._commands.run(
            name, message.chat, agent, argument, message.sender_id, message))
        await asyncio.wait({running}, timeout=COMMAND_INLINE)
        if running.done():
            await self._answer_command(message, running.result(), first=True)
        else:
            stored = await self._store.record_command(message, WORKING_ON_IT)
            if stored is not None:
                self._outbox.deliver(stored)
                keep(self._later, self._answer_later(message, running), f"command-{name}")
            else:
                running.cancel()
        log.info("command /%s platform=%s chat=%s", name, platform, message.chat.key)
        return SubmitResult.COMMAND

    async def _answer_later(self, message: InboundMessage,
                            running: asyncio.Future[CommandReply]) -> None:
        try:
            reply = await running
        except Exception as exc:
            log.exception("command in chat=%s failed", message.chat.key)
            reply = CommandReply(f"⚠️ That did not work ({exc.__class__.__name__}).")
        await self._answer_command(message, reply, first=False)

    async def _answer_command(self, message: InboundMessage, reply: CommandReply, *,
                              first: bool) -> None:
        """Store a command's answer with the command (`first`) or after it, and send it."""
        chat = message.chat
        menu = bool(reply.options and reply.chosen is not None and self._dialogs is not None)
        kind = ReplyKind.QUESTION if menu else ReplyKind.NOTICE
        if first and not reply.files:
            stored = await self._store.record_command(message, reply.text, kind)
        else:
            if first:  # a file goes after the command's own answer, which is stored with it
                done = await self._store.record_command(message, "✓")
                if done is None:
                    return
                self._outbox.deliver(done)
            stored = await self._store.add_reply(chat, OutgoingReply(
                reply.text, kind, reply_to=message.reply_to, files=reply.files))
        if stored is None:
            return
        if menu:
            assert self._dialogs is not None
            dialog = self._dialogs.offer(chat, reply.title, reply.options,
                                         self._menu_choice(message, reply))
            self._outbox.deliver(stored, dialog=dialog)
        else:
            self._outbox.deliver(stored)

    def _menu_choice(self, message: InboundMessage, reply: CommandReply
                     ) -> Callable[[str], Awaitable[None]]:
        """What a click on one of a command's buttons does: the command's answer to it, told
        to the chat like any command's."""
        chosen = reply.chosen
        assert chosen is not None

        async def run(value: str) -> None:
            text = await chosen(value)
            self._outbox.deliver(await self._store.add_reply(message.chat, OutgoingReply(
                text, ReplyKind.NOTICE, reply_to=message.reply_to)))

        return run

    def commands(self, chat: ChatRef | None = None, *,
                 bot: str | None = None) -> tuple[BridgeCommand, ...]:
        agent = self._routing.agent_for(chat) if chat is not None \
            else self._routing.bot_agent(bot) if bot is not None \
            else self._routing.default_agent
        return catalogue(self._commands.capabilities(agent).commands)

    def offered_commands(self, platform: str, kind: str | None = None
                         ) -> tuple[BridgeCommand, ...]:
        return catalogue({name for agent in self._routing.reachable(platform, kind)
                          for name in self._commands.capabilities(agent).commands})

    async def _typed_answer(self, message: InboundMessage, agent: str) -> SubmitResult:
        """The chat's open question takes this message as its answer, not the agent."""
        platform = message.chat.platform
        if await self._store.seen(platform, message.platform_message_id):
            bump(self._duplicates, platform)
            return SubmitResult.DUPLICATE
        assert self._dialogs is not None
        typed = self._dialogs.read_typed(message.chat, message.text)
        if typed is None:  # answered meanwhile (a button): an ordinary message after all
            stored = await self._store.record_inbound(message, agent)
            if stored is not None:
                self._queue(stored)
            return SubmitResult.ACCEPTED
        # Stored before the agent hears the answer: a store that refuses the message leaves
        # the question open for the platform's next offer of it.
        stored_reply = await self._store.record_command(message, typed.reply)
        await self._dialogs.give(typed, message.chat)
        if stored_reply is not None:
            self._outbox.deliver(stored_reply)
        return SubmitResult.COMMAND

    async def answer_dialog(self, dialog_id: str, chat: ChatRef, user_id: str,
                            answer: DialogAnswer) -> str | None:
        with self._storage.writing("reading a click"):
            allowed = await self._access.allowed(chat.platform, user_id)
        if not allowed:
            return None
        if self._dialogs is None:
            return None
        return await self._dialogs.answer(dialog_id, chat, answer)

    async def is_allowed(self, platform: str, user_id: str) -> bool:
        with self._storage.writing("checking access"):
            return await self._access.allowed(platform, user_id)

    async def update_queued(self, platform: str, platform_message_id: str, text: str) -> bool:
        with self._storage.writing("applying an edit"):
            updated = await self._store.update_text(platform, platform_message_id, text)
        if updated is None:
            return False
        self._router.replace_queued(updated)
        return True

    async def knows_chat(self, chat: ChatRef) -> bool:
        with self._storage.writing("looking up a chat"):
            return await self._store.has_chat(chat)

    async def get_cursor(self, name: str) -> str | None:
        with self._storage.writing("reading a position"):
            return await self._store.get_cursor(name)

    async def set_cursor(self, name: str, value: str) -> None:
        with self._storage.writing("saving a position"):
            await self._store.set_cursor(name, value)

    def heard_from(self, platform: str) -> None:
        self._liveness.heard_from(platform)

    def silence(self, platform: str, seconds: float | None) -> None:
        self._liveness.silence(platform, seconds)

    def rate_limited(self, platform: str) -> None:
        self._outbox.rate_limited(platform)

    def connection_changed(self, platform: str, connected: bool) -> None:
        if self._connections.get(platform) != connected:
            log.info("platform %s %s", platform, "connected" if connected else "disconnected")
        self._connections[platform] = connected
        if connected:
            self._disconnected_since.pop(platform, None)
        else:
            self._disconnected_since.setdefault(platform, time.monotonic())
        self.connections_changed.set()

    def http_app(self) -> web.Application | None:
        return self._app

    def keep_running(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        self._tasks.start(name, loop)

    async def stop_running(self, name: str) -> None:
        await self._tasks.cancel(name)

    def fatal(self, platform: str, reason: str) -> None:
        log.critical("platform %s failed for good: %s", platform, reason)
        if not self.fatal_error.done():
            self.fatal_error.set_result(f"{platform}: {reason}")
