"""What a person sees while the agent works: the typing indicator (sent again every 8 s, as
Discord shows it for 10 s), the "received" reaction once their message is stored, and a
done or failed reaction when the turn ends. Best effort in tasks of their own: a failure is
logged, never raised into the bridge."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import discord

from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.discord.parse import target_channel
from picobridge.contract import ChatRef, Outcome

log = logging.getLogger("picobridge.discord.progress")

TYPING_EVERY = 8.0


class DiscordProgress:
    def __init__(self, client: discord.Client, tasks: TaskSet, *, received: str, done: str,
                 failed: str) -> None:
        self._client = client
        self._tasks = tasks
        self._received, self._done, self._failed = received, done, failed
        self._typing: dict[str, asyncio.Task[None]] = {}
        self._turns: dict[str, tuple[str, ...]] = {}

    async def received(self, message: discord.Message, refused: tuple[str, ...] = ()) -> None:
        """The message is stored: tell its sender (the acknowledgement Discord has), and
        which of its files did not come through (the agent is told too)."""
        if self._received:
            await self._react(message.channel.id, message.id, self._received)
        if refused:
            with contextlib.suppress(discord.HTTPException, OSError):
                await message.reply("\n".join(refused)[:2000], mention_author=False)

    def turn_started(self, chat: ChatRef, message_ids: tuple[str, ...]) -> None:
        self._turns[chat.key] = message_ids
        if chat.key not in self._typing:
            self._typing[chat.key] = self._tasks.spawn(self._type(chat),
                                                       name=f"discord-typing-{chat.key}")

    def turn_ended(self, chat: ChatRef, outcome: Outcome) -> None:
        typing = self._typing.pop(chat.key, None)
        if typing is not None:
            typing.cancel()
        ids = self._turns.pop(chat.key, ())
        if outcome is Outcome.REQUEUED:
            return
        emoji = self._done if outcome is Outcome.DONE else self._failed
        for message_id in ids:
            if emoji and message_id.isdigit():
                self._tasks.spawn(self._finish(target_channel(chat), int(message_id), emoji),
                                  name="discord-reaction")

    async def _type(self, chat: ChatRef) -> None:
        channel = self._client.get_partial_messageable(target_channel(chat))
        while True:
            with contextlib.suppress(discord.HTTPException, OSError):
                await self._client.http.send_typing(channel.id)
            await asyncio.sleep(TYPING_EVERY)

    async def _finish(self, channel_id: int, message_id: int, emoji: str) -> None:
        if self._received:
            await self._react(channel_id, message_id, self._received, remove=True)
        await self._react(channel_id, message_id, emoji)

    async def _react(self, channel_id: int, message_id: int, emoji: str,
                     remove: bool = False) -> None:
        try:
            if remove:
                await self._client.http.remove_own_reaction(channel_id, message_id, emoji)
            else:
                await self._client.http.add_reaction(channel_id, message_id, emoji)
        except (discord.HTTPException, OSError) as exc:
            log.debug("a reaction failed (%s)", exc.__class__.__name__)

    def close(self) -> None:
        for task in self._typing.values():
            task.cancel()
        self._typing.clear()
