"""Receiving: messages from the gateway, and at every new gateway session the ones it did
not deliver, read back from history.

Live messages go to `Intake.take` through a per-channel queue (adapters/common/serial.py):
a channel's messages are committed in the order they were written, channels side by side.
A new session (a start, or a fresh IDENTIFY after Discord dropped the old one; a RESUME
replays what was missed by itself) queues, ahead of whatever the session delivers next, a
catch-up of each recently active channel (seen.py): its history after the newest message
taken, oldest first, at most `catch_up_messages`. What the gateway also delivers is then a
duplicate the bridge recognises by its message id.
"""

from __future__ import annotations

import functools
import logging

import discord

from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.discord.intake import Intake
from picobridge.adapters.discord.seen import Seen

log = logging.getLogger("picobridge.discord")


class Receiver:
    def __init__(self, client: discord.Client, intake: Intake, seen: Seen, tasks: TaskSet,
                 limit: int) -> None:
        self._client = client
        self._intake = intake
        self._seen = seen
        self._serial = ChatSerial(tasks, name="discord-channel")
        self._limit = limit

    @property
    def serial(self) -> ChatSerial:
        return self._serial

    def receive(self, message: discord.Message) -> None:
        """A message from the gateway: queued behind its channel's earlier ones."""
        self._serial.run(message.channel.id, lambda: self._take(message))

    def edited(self, message: discord.Message) -> None:
        """An edit from the gateway, in its channel's queue behind the message itself."""
        self._serial.run(message.channel.id, lambda: self._edit(message))

    async def _edit(self, message: discord.Message) -> None:
        try:
            await self._intake.edited(message)
        except Exception as exc:
            log.error("an edit of Discord message %s could not be applied (%s)", message.id,
                      exc.__class__.__name__, exc_info=log.isEnabledFor(logging.DEBUG))

    async def _take(self, message: discord.Message) -> None:
        try:
            await self._intake.take(message)
        except Exception as exc:
            # A bug or content we cannot cope with: never hold the channel for ever.
            log.error("a Discord message %s could not be taken (%s)", message.id,
                      exc.__class__.__name__, exc_info=log.isEnabledFor(logging.DEBUG))

    async def new_session(self) -> None:
        """A gateway session began: queue the catch-up of every recently active channel."""
        channels = await self._seen.load()
        for channel_id, after in channels.items():
            self._serial.run(int(channel_id), functools.partial(self._catch_up, channel_id, after))

    async def _catch_up(self, channel_id: str, after: str) -> None:
        try:
            channel = await self._client.fetch_channel(int(channel_id))
            if not isinstance(channel, discord.abc.Messageable):
                return
            missed = [m async for m in channel.history(
                limit=self._limit, after=discord.Object(int(after)), oldest_first=True)]
        except (discord.NotFound, discord.Forbidden):
            log.info("Discord channel %s is gone or closed to the bot; no catch-up", channel_id)
            return
        except (discord.HTTPException, OSError) as exc:
            log.warning("catch-up of Discord channel %s failed (%s); its missed messages "
                        "wait for the next session", channel_id, exc.__class__.__name__)
            return
        if missed:
            log.info("catching up %d message(s) in Discord channel %s", len(missed), channel_id)
        for message in missed:
            await self._take(message)
