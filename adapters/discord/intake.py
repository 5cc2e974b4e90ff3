"""From Discord messages to committed bridge messages, one chat at a time in order.

`Intake.take` decides whether a message is for the bot (a DM, a mention, a reply to the bot,
a thread the bridge knows; guilds outside `discord.guilds` are ignored), fetches its files
(only for people allowed in), submits it, and only after the commit acknowledges it to the
person (the "received" reaction) and records the message as the newest seen in its channel
(the catch-up at the next start reads history after it). While the database refuses writes
the chat waits and tries again: Discord does not deliver a message twice, so giving it up
would lose it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import discord

from picobridge.adapters.common.attachments import AttachmentRefused
from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.discord.files import DiscordFiles
from picobridge.adapters.discord.normalise import normalise
from picobridge.adapters.discord.parse import PLATFORM, Parsed, parse
from picobridge.adapters.discord.seen import Seen
from picobridge.adapters.discord.settings import DiscordSettings
from picobridge.contract import (
    Attachment,
    BridgeLink,
    InboundMessage,
    StorageUnavailable,
    SubmitResult,
)

log = logging.getLogger("picobridge.discord")

# The message is stored: react to it, and tell its sender which files did not come through.
Acknowledge = Callable[[discord.Message, tuple[str, ...]], Awaitable[None]]


class Intake:
    def __init__(self, settings: DiscordSettings, bridge: BridgeLink, files: DiscordFiles,
                 seen: Seen, acknowledge: Acknowledge) -> None:
        self._settings = settings
        self._bridge = bridge
        self._files = files
        self._seen = seen
        self._acknowledge = acknowledge
        self.me = 0

    async def take(self, message: discord.Message) -> SubmitResult | None:
        """Handle one message; returns once it is committed, refused or not for the bot."""
        parsed = parse(message, self.me, self._settings.allow_bots)
        if parsed is None or not await self._for_us(parsed):
            return None
        inbound, refused = await self._normalised(message, parsed)
        result = await self._stored(lambda: self._bridge.submit(inbound))
        assert isinstance(result, SubmitResult)
        if result is SubmitResult.ACCEPTED:
            await self._acknowledge(message, refused)
        await self._stored(lambda: self._seen.saw(str(parsed.channel_id), str(message.id)))
        return result

    async def edited(self, message: discord.Message) -> None:
        """A message was edited: if it still waits for its turn, the agent gets the new text
        (once answered, an edit changes nothing)."""
        parsed = parse(message, self.me, self._settings.allow_bots)
        if parsed is None or not await self._for_us(parsed):
            return
        text = normalise(message, parsed).text
        if await self._stored(lambda: self._bridge.update_queued(PLATFORM, str(message.id),
                                                                  text)):
            log.info("queued Discord message %s updated by an edit", message.id)

    async def _for_us(self, parsed: Parsed) -> bool:
        if parsed.guild_id is not None and not self._settings.serves_guild(parsed.guild_id):
            return False
        if parsed.addressed:
            return True
        if parsed.in_thread:
            return bool(await self._stored(lambda: self._bridge.knows_chat(parsed.chat)))
        return False

    async def _normalised(self, message: discord.Message, parsed: Parsed
                          ) -> tuple[InboundMessage, tuple[str, ...]]:
        attachments: list[Attachment] = []
        refused: list[str] = []
        # Strangers' files are not fetched: the bridge refuses them anyway, and downloading
        # first would let anyone fill the disk.
        if message.attachments and await self._stored(
                lambda: self._bridge.is_allowed(PLATFORM, parsed.sender_id)):
            for attachment in message.attachments:
                try:
                    attachments.append(await self._files.fetch(attachment))
                except AttachmentRefused as exc:
                    refused.append(str(exc))
                except TimeoutError:
                    refused.append(f"{attachment.filename!r} took too long to download")
        return normalise(message, parsed, tuple(attachments), tuple(refused)), tuple(refused)

    async def _stored(self, call: Callable[[], Awaitable[object]]) -> object:
        backoff = Backoff(1.0, cap=30.0)
        while True:
            try:
                result = await call()
            except StorageUnavailable:
                log.warning("the bridge cannot store messages now; a Discord chat waits")
                await backoff.wait()
                continue
            return result
