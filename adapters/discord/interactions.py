"""Interactions: slash commands and clicks on the components of the agent's questions.

Discord wants every interaction answered within 3 s, so each one is acknowledged first (a
deferred, ephemeral "thinking" for a command; a deferred update for a click) and handled
after, in its channel's queue (receive.py) so that it keeps its place among the channel's
messages. A command goes to the bridge as the message "/name"; the bridge's answer to it
(a notice for that chat) replaces the command's "thinking" response (`Pending`), seen only
by the person who ran it. A click answers its question through adapters/common/buttons.py;
the question then shows the answer and loses its components.

Interaction callbacks and edits are sent through the bot's own HTTP client (client.py), so
they reach `discord.base_url` like everything else.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

import discord
from discord.http import Route

from picobridge.adapters.common.buttons import answered_line, click, closed_line
from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.discord.buttons import Questions, Shown, choice_of
from picobridge.adapters.discord.parse import chat_ref
from picobridge.adapters.discord.settings import DiscordSettings
from picobridge.contract import (
    BridgeLink,
    ChatRef,
    DialogClosed,
    InboundMessage,
    StorageUnavailable,
)

log = logging.getLogger("picobridge.discord")

DEFERRED_MESSAGE, DEFERRED_UPDATE = 5, 6
EPHEMERAL = 1 << 6
TOKEN_LIFETIME = 14 * 60.0  # an interaction token lasts 15 minutes
NOT_HERE = "I don't answer in this server."
TRY_AGAIN = "I could not take that just now; please try again in a moment."


class Pending:
    """Slash commands waiting for the bridge's answer, per chat, oldest first."""

    def __init__(self, http: Any, app_id: int) -> None:
        self._http = http
        self.app_id = app_id
        self._tokens: dict[str, deque[tuple[str, float]]] = {}

    def add(self, chat: ChatRef, token: str) -> None:
        self._tokens.setdefault(chat.key, deque()).append((token, time.monotonic()))

    async def answer(self, chat: ChatRef, text: str) -> bool:
        """Show `text` as the answer of the chat's oldest waiting command, if one waits."""
        waiting = self._tokens.get(chat.key)
        while waiting:
            token, since = waiting.popleft()
            if time.monotonic() - since < TOKEN_LIFETIME:
                await self.edit_original(token, text)
                return True
        self._tokens.pop(chat.key, None)
        return False

    async def edit_original(self, token: str, text: str) -> None:
        route = Route("PATCH", "/webhooks/{application_id}/{token}/messages/@original",
                      application_id=self.app_id, token=token)
        await self._http.request(route, json={"content": text, "components": [],
                                              "allowed_mentions": {"parse": []}})

    async def follow_up(self, token: str, text: str) -> None:
        route = Route("POST", "/webhooks/{application_id}/{token}",
                      application_id=self.app_id, token=token)
        await self._http.request(route, json={"content": text, "flags": EPHEMERAL,
                                              "allowed_mentions": {"parse": []}})


class Interactions:
    def __init__(self, settings: DiscordSettings, bridge: BridgeLink, client: discord.Client,
                 serial: ChatSerial, questions: Questions, pending: Pending) -> None:
        self._settings = settings
        self._bridge = bridge
        self._client = client
        self._serial = serial
        self._questions = questions
        self._pending = pending

    async def take(self, interaction: discord.Interaction) -> None:
        data: dict[str, Any] = dict(interaction.data or {})
        if interaction.type is discord.InteractionType.application_command:
            await self._ack(interaction, DEFERRED_MESSAGE, {"flags": EPHEMERAL})
            line = " ".join([f"/{data.get('name', '')}", *(
                str(o.get("value")) for o in data.get("options") or () if o.get("value"))])
            self._serial.run(interaction.channel_id or 0,
                             lambda: self._command(interaction, line))
        elif interaction.type is discord.InteractionType.component:
            await self._ack(interaction, DEFERRED_UPDATE)
            self._serial.run(interaction.channel_id or 0,
                             lambda: self._click(interaction, choice_of(data)))

    async def _ack(self, interaction: discord.Interaction, kind: int,
                   data: dict[str, Any] | None = None) -> None:
        route = Route("POST", "/interactions/{interaction_id}/{token}/callback",
                      interaction_id=interaction.id, token=interaction.token)
        body: dict[str, Any] = {"type": kind}
        if data is not None:
            body["data"] = data
        await self._client.http.request(route, json=body)

    async def _command(self, interaction: discord.Interaction, line: str) -> None:
        guild = interaction.guild_id
        try:
            if guild is not None and not self._settings.serves_guild(str(guild)):
                await self._pending.edit_original(interaction.token, NOT_HERE)
                return
            chat = chat_ref(interaction.channel)
            self._pending.add(chat, interaction.token)
            user = interaction.user
            await self._bridge.submit(InboundMessage(
                chat=chat, sender_id=str(user.id),
                sender_name=getattr(user, "global_name", None) or user.name, text=line,
                platform_message_id=f"interaction-{interaction.id}",
                chat_kind="private" if guild is None else "group"))
        except StorageUnavailable:
            await self._pending.edit_original(interaction.token, TRY_AGAIN)
        except discord.HTTPException as exc:
            log.warning("a slash command's answer failed (%s)", exc.status)

    async def _click(self, interaction: discord.Interaction, data: str | None) -> None:
        chat = chat_ref(interaction.channel)
        try:
            outcome = await click(self._bridge, self._questions.asked, data, chat,
                                  str(interaction.user.id))
        except StorageUnavailable:
            await self._pending.follow_up(interaction.token, TRY_AGAIN)
            return
        message = interaction.message
        if outcome.shown is None or message is None:
            await self._pending.follow_up(interaction.token, outcome.notice)
            return
        await self._close(Shown(message.channel.id, message.id, message.content),
                          answered_line(outcome.shown))

    async def _close(self, shown: Shown, line: str) -> None:
        channel = self._client.get_partial_messageable(shown.channel_id)
        await channel.get_partial_message(shown.message_id).edit(
            content=f"{shown.text}\n\n{line}"[:2000], view=None)

    async def closed(self, closed: DialogClosed) -> None:
        """The question closed other than by a click: its components go."""
        shown = self._questions.shown.closed(closed)
        if shown is not None:
            await self._close(shown, closed_line(closed))

    async def sent(self, dialog_id: str, message: discord.Message, text: str) -> None:
        shown, closed = self._questions.sent(dialog_id, message, text)
        if closed is not None:
            await self._close(shown, closed_line(closed))
