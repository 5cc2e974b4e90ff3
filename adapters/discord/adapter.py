"""Discord, through discord.py's gateway client (client.py points it at `discord.base_url`).

Receiving (receive.py, intake.py): messages from the gateway, which discord.py resumes after
a disconnect, and at each new session a catch-up from the history of recently active
channels. Conversations (parse.py): DMs, guild channels where the bot is mentioned or
replied to, threads as their own sessions. Slash commands and clicks (commands.py,
interactions.py, buttons.py). Sending (send.py, render.py, errors.py) and what shows while
the agent works (progress.py).

The gateway runs under the daemon's supervision (BridgeLink.keep_running): discord.py
reconnects by itself; what ends its loop (a token Discord refuses, intents the bot was not
granted) stops the daemon with the reason.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import aiohttp
import discord

from picobridge.adapters.common.attachments import AttachmentPolicy
from picobridge.adapters.common.lifecycle import Lifecycle
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.discord.buttons import Questions
from picobridge.adapters.discord.client import BridgeClient, quiet_library_logs
from picobridge.adapters.discord.commands import register
from picobridge.adapters.discord.files import DiscordFiles
from picobridge.adapters.discord.intake import Intake
from picobridge.adapters.discord.interactions import Interactions, Pending
from picobridge.adapters.discord.parse import PLATFORM
from picobridge.adapters.discord.progress import DiscordProgress
from picobridge.adapters.discord.receive import Receiver
from picobridge.adapters.discord.seen import Seen
from picobridge.adapters.discord.send import DiscordSender
from picobridge.adapters.discord.stream import DiscordStream
from picobridge.adapters.discord.verify import describe_login, missing_intents
from picobridge.contract import (
    Adapter,
    BridgeLink,
    ChatRef,
    DeliveryError,
    DialogClosed,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ProgressKind,
    ReplyKind,
)

if TYPE_CHECKING:
    from picobridge.adapters.discord.settings import DiscordSettings
    from picobridge.config.settings import Settings

log = logging.getLogger("picobridge.discord")

LOOP_GATEWAY = "discord-gateway"
LOOP_MEDIA = "discord-media-cleanup"


class DiscordAdapter(Adapter):
    platform = PLATFORM

    def __init__(self, settings: Settings) -> None:
        self._settings: DiscordSettings = settings.section(PLATFORM)
        quiet_library_logs()
        self._policy = AttachmentPolicy(settings.attachments, settings.media_dir)
        self._bridge: BridgeLink | None = None
        self._client: BridgeClient | None = None
        self._session: aiohttp.ClientSession | None = None
        self._receiver: Receiver | None = None
        self._interactions: Interactions | None = None
        self._sender: DiscordSender | None = None
        self._progress: DiscordProgress | None = None
        self._stream: DiscordStream | None = None
        self._questions = Questions()
        self._tasks = TaskSet(log)
        self._life = Lifecycle(PLATFORM, PLATFORM)
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, bridge: BridgeLink) -> None:
        self._bridge = self._life.bridge = bridge
        s = self._settings
        assert s.token is not None
        client = self._client = BridgeClient(s.base_url, {
            "message": self._on_message, "connect": self._on_connect,
            "resumed": self._on_resumed, "disconnect": self._on_disconnect,
            "interaction": self._on_interaction, "raw_message_edit": self._on_edit},
            rate_limited=lambda: bridge.rate_limited(PLATFORM))
        try:
            await client.login(s.token.get_secret_value())
        except discord.LoginFailure:
            bridge.fatal(PLATFORM, "Discord refused the bot token; check discord.token")
            return
        app_id = client.application_id or 0
        self._wire(bridge, client, app_id)
        try:
            await register(client.routed_http, app_id, s,
                           lambda kind: bridge.offered_commands(PLATFORM, kind))
        except (discord.HTTPException, OSError) as exc:
            log.warning("Discord: slash commands not registered (%s)", exc.__class__.__name__)
        log.info("Discord: signed in as %s", describe_login(client))
        self._life.keep(LOOP_GATEWAY, self._gateway)
        self._life.keep(LOOP_MEDIA, self._policy.cleanup_forever)

    def _wire(self, bridge: BridgeLink, client: BridgeClient, app_id: int) -> None:
        s = self._settings
        self._session = aiohttp.ClientSession()
        self._progress = DiscordProgress(client, self._tasks, received=s.reaction_received,
                                         done=s.reaction_done, failed=s.reaction_failed)
        if s.stream:
            self._stream = DiscordStream(client, self._tasks)
        seen = Seen(bridge, s.catch_up_channels)
        intake = Intake(s, bridge, DiscordFiles(self._session, self._policy), seen,
                        self._acknowledge)
        intake.me = client.user.id if client.user else 0
        self._receiver = Receiver(client, intake, seen, self._tasks, s.catch_up_messages)
        pending = Pending(client.http, app_id)
        self._interactions = Interactions(s, bridge, client, self._receiver.serial,
                                          self._questions, pending)
        self._sender = DiscordSender(client, bridge, self._questions, pending,
                                     max_chunks=s.max_chunks, on_auth_failure=self._auth_failed,
                                     on_question=self._interactions.sent)

    async def _gateway(self) -> None:
        assert self._client is not None and self._bridge is not None
        try:
            await self._client.connect(reconnect=True)
        except discord.PrivilegedIntentsRequired:
            self._bridge.fatal(PLATFORM, "Discord refused the gateway intents: "
                                         + missing_intents(self._client))
        except discord.ConnectionClosed as exc:
            if exc.code == 4004:
                self._bridge.fatal(PLATFORM, "Discord refused the bot token; check "
                                             "discord.token")
            raise

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self._life.stop_loops()
        if self._progress is not None:
            self._progress.close()
        if self._stream is not None:
            self._stream.close()
        await self._tasks.close()
        if self._client is not None:
            await self._client.close()
        if self._session is not None:
            await self._session.close()
        self._life.set_connected(False)

    def connected(self) -> bool:
        return self._life.connected

    async def verify(self) -> str:
        from picobridge.adapters.discord.verify import verify

        return await verify(self._settings)

    def _auth_failed(self, error: str) -> None:
        if self._bridge is not None:
            self._bridge.fatal(PLATFORM, f"Discord refused the bot token ({error}); "
                                         "check discord.token")

    # -- gateway events ----------------------------------------------------------------------

    # Inbound liveness: what the gateway delivers counts (its heartbeat acknowledgements stay
    # inside discord.py), so a quiet bot shows a growing age, as a Telegram webhook does.
    def _heard(self) -> None:
        if self._bridge is not None:
            self._bridge.heard_from(PLATFORM)

    async def _on_connect(self) -> None:
        self._heard()
        self._life.set_connected(True)
        if self._receiver is not None:
            await self._receiver.new_session()

    async def _on_resumed(self) -> None:
        self._heard()
        self._life.set_connected(True)

    async def _on_disconnect(self) -> None:
        self._life.set_connected(False)

    async def _on_message(self, message: discord.Message) -> None:
        self._heard()
        if self._receiver is not None:
            self._receiver.receive(message)

    async def _on_edit(self, edit: discord.RawMessageUpdateEvent) -> None:
        self._heard()
        if self._receiver is not None:
            self._receiver.edited(edit.message)

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        self._heard()
        if self._interactions is not None:
            await self._interactions.take(interaction)

    async def _acknowledge(self, message: discord.Message, refused: tuple[str, ...]) -> None:
        if self._progress is not None:
            self._tasks.spawn(self._progress.received(message, refused),
                              name="discord-received")

    # -- outbound ----------------------------------------------------------------------------

    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        if self._sender is None:
            raise DeliveryError("Discord is not connected yet")
        if self._stream is None or reply.kind is not ReplyKind.ANSWER:
            await self._sender.send(chat, reply)
            return
        draft = await self._stream.take(chat, reply)
        with self._stream.queue.settling(reply):
            await self._sender.send(chat, reply, draft)

    async def dialog_closed(self, chat: ChatRef, closed: DialogClosed) -> None:
        if self._interactions is not None:
            await self._interactions.closed(closed)
        else:
            self._questions.shown.closed(closed)

    async def show_progress(self, chat: ChatRef, event: ProgressEvent) -> None:
        if self._progress is not None and event.kind is ProgressKind.STARTED:
            self._progress.turn_started(chat, event.message_ids)
        if self._stream is not None:
            if event.kind is ProgressKind.STARTED:
                self._stream.started(chat, event.message_ids)
            elif event.kind is ProgressKind.TEXT:
                self._stream.text(chat, event.text)

    async def clear_progress(self, chat: ChatRef, outcome: Outcome) -> None:
        if self._progress is not None:
            self._progress.turn_ended(chat, outcome)
        if self._stream is not None:
            self._stream.ended(chat, outcome)
