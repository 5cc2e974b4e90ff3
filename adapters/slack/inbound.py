"""Slack events and slash commands on their way to the bridge.

Acknowledgement. Slack redelivers an event it did not see acknowledged within 3 s. Bolt runs
with process_before_response, so the ack (a Socket Mode response or the HTTP 200) leaves only
after `event` returned, which is after `bridge.submit` committed the message: a daemon killed
before the commit leaves the event unacknowledged and Slack sends it again. Copies (the
redelivery, and the `message` + `app_mention` pair Slack sends for one mention) share channel
and ts, the platform message id the store deduplicates on; recent event ids and message ids
are also remembered here so a copy costs no database work and no second file download.

Events of one conversation are handled one at a time, in arrival order (ChatSerial), so the
agent sees messages in the order they were written even when one of them carries a slow
file. A file that takes longer than Slack's 3 s to download delays that ack: Slack
redelivers, the copy waits for the original and is then recognised, and the file is
downloaded once. The place is taken as the event arrives: slack-sdk runs each envelope's
listeners in a task of its own, started in the order the websocket delivered them, and
nothing on the way through bolt to `event` waits (bolt's auth.test answer is primed,
adapter.py), so no envelope gets ahead of an earlier one. A slash command takes its DM's
place the same way, before it asks Slack which DM that is. Its ack goes once it is carried
out, with what it has to say (a storage outage's notice), or after ACK_WITHIN at the latest,
without: behind a slow file of its DM's, Slack's 3 s would pass, and Slack would show the user
an error although the command then runs. What it has to say then goes to its response_url.
(Slack never sends a command again: its ack confirms nothing the database must hold first.)

Storage outages. While the bridge cannot store (StorageUnavailable), an event is not
acknowledged: Slack sends it again. The message as prepared is kept (held.py) and offered
again by the adapter too (and one refused before it was prepared, because the chat's held
messages came first, is kept as it came), so an outage longer than Slack's retries loses
nothing and nothing newer of the chat goes first; the copy that comes second is recognised
as stored. A slash command is answered with a short notice
instead (Slack does not send commands again).

Payloads that do not parse are screened before bolt (dispatch.py, shapes.py); `event` checks
again, so whatever reaches it by another way is skipped the same way.

Commands: `/picobridge new|status|stop|help` (the name is slack.slash_command) in a DM with the
bot, and `!new` etc. as text (slack.command_prefix) anywhere, both passed to the bridge as
`/new`. Slash commands cannot be used inside threads, and a channel has no conversation of its
own, so in channels the slash command only explains how to use `!new` in a thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.common.attachments import AttachmentRefused
from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.slack.client import Recent, post_ephemeral, respond
from picobridge.adapters.slack.context import thread_context
from picobridge.adapters.slack.dispatch import NotYet
from picobridge.adapters.slack.events import (
    PLATFORM,
    Candidate,
    Identity,
    Skip,
    normalise,
    slash_command_text,
    ts_seconds,
)
from picobridge.adapters.slack.files import SlackFiles
from picobridge.adapters.slack.held import HeldMessages
from picobridge.adapters.slack.progress import SlackProgress
from picobridge.adapters.slack.shapes import payload_problem
from picobridge.contract import (
    Attachment,
    BridgeLink,
    ChatRef,
    InboundMessage,
    StorageUnavailable,
    SubmitResult,
)

if TYPE_CHECKING:
    from picobridge.adapters.slack.settings import SlackAppSettings

log = logging.getLogger("picobridge.slack")

# Slack shows the user an error for a command not acknowledged within 3 s (and never sends it
# again): the ack carries the command's answer when it has one by then, else it goes without.
ACK_WITHIN = 2.0
STORAGE_DOWN_NOTICE = ("⚠️ I cannot take commands right now: my storage is unavailable. "
                       "Please try again in a few minutes.")


class SlackInbound:
    def __init__(self, settings: SlackAppSettings, bridge: BridgeLink, client: AsyncWebClient,
                 files: SlackFiles, progress: SlackProgress, tasks: TaskSet,
                 platform: str = PLATFORM) -> None:
        self._settings = settings
        self._platform = platform
        self._bridge = bridge
        self._client = client
        self._files = files
        self._progress = progress
        self._tasks = tasks
        self._serial = ChatSerial(tasks, name="slack-chat")
        self._seen_events = Recent()
        self._seen_messages = Recent()
        self.held = HeldMessages(self._deliver, self._ready, self._serial)
        # Who the bot is; known once auth.test answered. Events before that are refused
        # (not acknowledged), so Slack sends them again.
        self.me: Identity | None = None

    @property
    def serial(self) -> ChatSerial:
        """The conversations' order of work (clicks go in it too)."""
        return self._serial

    async def event(self, body: dict[str, Any]) -> None:
        """Process one Events API payload; returns once it is safe to acknowledge."""
        me = self.me
        if me is None:
            raise NotYet("the Slack adapter is not ready for events yet")
        problem = payload_problem(body)
        if problem is not None:
            log.warning("a Slack event was skipped: %s (content not logged)", problem)
            return
        event_id = body.get("event_id") if isinstance(body.get("event_id"), str) else None
        if event_id is not None and event_id in self._seen_events:
            return
        found = normalise(body, me, allow_bots=self._settings.allow_bots,
                          command_prefix=self._settings.command_prefix, platform=self._platform)
        if isinstance(found, Skip):
            log.debug("event %s skipped: %s", event_id, found.reason)
            self._seen_events.add(event_id)
            return
        allowed = self._settings.allowed_channels
        if not found.is_dm and allowed and found.channel not in allowed:
            if not found.needs_known_thread:
                self._tasks.spawn(self._ephemeral(found, "I am not enabled in this channel."),
                                  name="slack-ephemeral")
            log.info("mention in channel %s ignored: not in slack.allowed_channels",
                     found.channel)
            self._seen_events.add(event_id)
            return
        await self._serial.run(found.chat.key, lambda: self._in_order(found, event_id))

    async def _in_order(self, found: Candidate, event_id: str | None) -> None:
        try:
            await self._take(found)
        except StorageUnavailable:
            # Kept in its place (held.py), prepared or not: Slack's redelivery may come
            # after newer messages of the chat, or never.
            self.held.keep(found)
            raise
        self._seen_events.add(event_id)

    async def _take(self, found: Candidate) -> None:
        if found.platform_message_id not in self._seen_messages:
            # This chat's messages still waiting for the database go first (or this one
            # waits too); this very message may be one of them.
            await self.held.flush(found.chat.key)
        if found.platform_message_id in self._seen_messages:
            return
        message = await self._ready(found)
        if message is not None:
            try:
                await self._deliver(message)
            except StorageUnavailable:
                self.held.hold(message)
                raise

    async def _ready(self, found: Candidate) -> InboundMessage | None:
        """The message for the bridge, or None when there is nothing to submit (a follow-up
        in a thread the bridge does not hold, every file refused)."""
        me = self.me
        if me is None:
            raise NotYet("the Slack adapter is not ready for events yet")
        context = await self._earlier_in_thread(found, me)
        if context is None:
            return None
        return await self._prepare(found, context)

    async def _earlier_in_thread(self, found: Candidate, me: Identity) -> str | None:
        """What the thread said before the bot was in it ('' when nothing or not needed);
        None when the message is a follow-up in a thread the bridge does not hold."""
        thread = found.chat.thread_id
        if not found.needs_known_thread and (thread is None or thread == found.ts
                                             or found.is_dm):
            return ""
        known = await self._bridge.knows_chat(found.chat)
        if found.needs_known_thread and not known:
            return None
        if known or thread is None or not await self._bridge.is_allowed(self._platform, found.user):
            return ""
        # Mentioned for the first time in a thread that ran without the bot.
        return await thread_context(self._client, me, found.channel, thread, found.ts)

    async def _prepare(self, found: Candidate, context: str) -> InboundMessage | None:
        """The message for the bridge (files fetched, thread context added), or None when
        nothing is left to send."""
        text = found.text
        attachments: list[Attachment] = []
        notices: list[str] = []
        if found.files:
            # Strangers' files are not fetched: the bridge refuses them anyway, and
            # downloading first would let anyone fill the disk.
            if await self._bridge.is_allowed(self._platform, found.user):
                attachments, notices = await self._fetch(found.files)
            elif not text:
                text = "(a file)"  # still submitted, so the stranger hears why nothing happens
        for notice in notices:
            self._tasks.spawn(self._notice(found.chat, f"⚠️ {notice}"), name="slack-notice")
        if not text and not attachments:
            if found.files:
                self._seen_messages.add(found.platform_message_id)
                return None  # every file was refused, and the user was told why
            if not context:
                text = "/help"  # a bare @mention: say what the bot does rather than nothing
        if context and not text.startswith("/"):
            text = context + (text or "(I was mentioned without a question.)")
        return InboundMessage(
            chat=found.chat, sender_id=found.user, text=text,
            platform_message_id=found.platform_message_id, sender_name=found.sender_name,
            attachments=tuple(attachments), reply_to=found.ts, sent_at=ts_seconds(found.ts),
            chat_kind="private" if found.is_dm else "group")

    async def _deliver(self, message: InboundMessage) -> None:
        """Hand a prepared message to the bridge (StorageUnavailable: nothing was stored)."""
        result = await self._bridge.submit(message)
        log.debug("slack message %s -> %s", message.platform_message_id, result.value)
        self._seen_messages.add(message.platform_message_id)
        self.held.stored()
        if result is SubmitResult.ACCEPTED and message.reply_to is not None:
            self._progress.received(message.chat.chat_id, message.reply_to)

    async def _fetch(self, files: tuple[dict[str, Any], ...]
                     ) -> tuple[list[Attachment], list[str]]:
        """The files that could be fetched, and why the others could not."""
        attachments: list[Attachment] = []
        notices: list[str] = []
        for file in files:
            try:
                attachments.append(await self._files.fetch(file))
            except AttachmentRefused as exc:
                notices.append(str(exc))
        return attachments, notices

    async def command(self, body: dict[str, Any]) -> str | None:
        """A slash command; returns an ephemeral answer for Slack, or None when the bridge
        answers in the DM."""
        s = self._settings
        command = slash_command_text(str(body.get("text") or "")) or "/help"
        channel = str(body.get("channel_id") or "")
        if not channel.startswith("D"):
            names = [f"`{s.command_prefix}{c.name}`"
                     for c in self._bridge.commands(ChatRef(self._platform, channel, None))
                     if c.listed]
            return (f"In channels every thread is its own conversation: mention me inside the "
                    f"thread with {', '.join(names[:-1])} or {names[-1]}. "
                    f"`{s.slash_command}` works in a direct message with me.")
        # Taken in the DM's turn, as it came: a message sent right after `/picobridge new`
        # must not reach the bridge (and the old session) before it.
        dm = ChatRef(self._platform, channel, None)
        handled = self._serial.run(dm.key, lambda: self._command_in_turn(body, command, dm))
        await asyncio.wait([handled], timeout=ACK_WITHIN)
        if handled.done():
            return handled.result()
        # Still waiting for its DM's earlier messages (a file downloading) or for Slack (a slow
        # conversations.open): the ack goes now, and what the command has to say once it is
        # carried out goes to its response_url.
        self._tasks.spawn(self._answer_later(handled, str(body.get("response_url") or "")),
                          name="slack-command-answer")
        return None

    async def _answer_later(self, handled: asyncio.Future[str | None], response_url: str
                            ) -> None:
        answer = await handled
        if answer is not None and response_url:
            await respond(self._client, response_url, answer)

    async def _command_in_turn(self, body: dict[str, Any], command: str,
                               dm: ChatRef) -> str | None:
        user = str(body.get("user_id") or "")
        try:
            # The command may come from a DM with someone else; answer in the user's DM with
            # us (whose turn it then takes: the bot hears nothing else from the other DM).
            opened = await self._client.conversations_open(users=user)
            channel = str(opened["channel"]["id"])
        except Exception as exc:
            log.debug("conversations.open failed: %s", exc.__class__.__name__)
            channel = dm.chat_id
        message = InboundMessage(
            chat=ChatRef(self._platform, channel, None), sender_id=user, text=command,
            platform_message_id=f"command:{body.get('trigger_id') or body.get('envelope_id')}",
            sender_name=str(body.get("user_name") or ""), chat_kind="private")
        if channel == dm.chat_id:
            return await self._submit_command(message)
        return await self._serial.run(message.chat.key,
                                      lambda: self._submit_command(message))

    async def _submit_command(self, message: InboundMessage) -> str | None:
        try:
            # The chat's messages waiting for the database go first.
            await self.held.flush(message.chat.key)
            await self._bridge.submit(message)
        except StorageUnavailable:
            return STORAGE_DOWN_NOTICE
        return None

    async def _notice(self, chat: ChatRef, text: str) -> None:
        try:
            await self._client.chat_postMessage(channel=chat.chat_id, thread_ts=chat.thread_id,
                                                text=text)
        except Exception as exc:
            log.warning("could not post a notice to %s: %s", chat.key, exc.__class__.__name__)

    async def _ephemeral(self, found: Candidate, text: str) -> None:
        await post_ephemeral(self._client, found.channel, found.user, text, found.chat.thread_id)
