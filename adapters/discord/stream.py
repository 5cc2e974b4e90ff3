"""Streaming (`discord.stream`): the answer shown while the agent writes it, in one message
that is edited as text arrives (at most every EDIT_EVERY seconds, within Discord's rate
limits for edits) and that the final answer then replaces (send.py edits it into the first
part). A turn that fails or runs again takes its draft down. Drafts wait for their own answer
in turn order (adapters/common/drafts.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

import discord

from picobridge.adapters.common.drafts import DraftQueue, DraftText
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.discord.parse import target_channel
from picobridge.adapters.discord.render import DISCORD_LIMIT, escape
from picobridge.contract import ChatRef, Outcome, OutgoingReply

log = logging.getLogger("picobridge.discord.progress")

EDIT_EVERY = 1.5
MORE = " …"


@dataclass
class _Draft:
    chat: ChatRef
    message_ids: tuple[str, ...]
    text: DraftText = field(default_factory=lambda: DraftText(DISCORD_LIMIT - len(MORE)))
    message: discord.Message | None = None
    shown: int = -1  # the text version on screen
    task: asyncio.Task[None] | None = None
    ended: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    async def on_screen(self) -> discord.Message | None:
        """The draft's message once any send or edit under way is over."""
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([self.task])
        return self.message


class DiscordStream:
    def __init__(self, client: discord.Client, tasks: TaskSet) -> None:
        self._client = client
        self._tasks = tasks
        self._drafts: dict[str, _Draft] = {}
        self.queue: DraftQueue[_Draft] = DraftQueue(tasks, self._discard)

    def started(self, chat: ChatRef, message_ids: tuple[str, ...]) -> None:
        self._drafts[chat.key] = _Draft(chat, message_ids)

    def text(self, chat: ChatRef, delta: str) -> None:
        draft = self._drafts.get(chat.key)
        if draft is None:
            return
        draft.text.add(delta)
        if draft.task is None:
            draft.task = self._tasks.spawn(self._flush_every(draft),
                                           name=f"discord-stream-{chat.key}")

    async def _flush_every(self, draft: _Draft) -> None:
        # Not cancelled when the turn ends: a send cut off half-way could leave a message
        # on screen that nobody knows of. It stops after the flush under way.
        while True:
            await self._flush(draft)
            if draft.ended:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(EDIT_EVERY):
                    await draft.wake.wait()

    async def _flush(self, draft: _Draft) -> None:
        if draft.text.version == draft.shown or not draft.text.text().strip():
            return
        version = draft.text.version
        content = escape(draft.text.text())[: DISCORD_LIMIT - len(MORE)] + MORE
        try:
            if draft.message is None:
                channel = self._client.get_partial_messageable(target_channel(draft.chat))
                draft.message = await channel.send(content)
            else:
                await draft.message.edit(content=content)
            draft.shown = version
        except (discord.HTTPException, OSError) as exc:
            log.debug("a streamed draft could not be shown (%s)", exc.__class__.__name__)

    def ended(self, chat: ChatRef, outcome: Outcome) -> None:
        draft = self._drafts.pop(chat.key, None)
        if draft is None:
            return
        draft.ended = True
        draft.wake.set()
        if outcome is Outcome.DONE:
            # Queued at once: the answer may be sent before the draft's last edit is over.
            self.queue.add(chat.key, draft.message_ids, draft)
        else:
            self._tasks.spawn(self._discard(draft), name=f"discord-draft-{chat.key}")

    async def take(self, chat: ChatRef, reply: OutgoingReply) -> discord.Message | None:
        """The message of the draft `reply` replaces, if it has one on screen."""
        draft = self.queue.take(chat.key, reply)
        return None if draft is None else await draft.on_screen()

    async def _discard(self, draft: _Draft) -> None:
        message = await draft.on_screen()
        if message is not None:
            with contextlib.suppress(discord.HTTPException, OSError):
                await message.delete()

    def close(self) -> None:
        for draft in self._drafts.values():
            draft.ended = True
            draft.wake.set()
