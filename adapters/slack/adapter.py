"""Slack, through slack-bolt's AsyncApp: Socket Mode (default) or the Events API over the
daemon's own HTTP server (`slack.mode = "http"`).

Conversations. A DM outside threads is one conversation per DM channel (thread None). Every
thread is its own conversation, keyed on its thread_ts. A channel @mention outside a thread
starts a thread on that message (thread_id = the mention's ts) and the reply goes there; later
messages in that thread reach the agent without a new mention because the bridge knows the
thread (BridgeLink.knows_chat). In channels nothing else is read.

Acknowledgement. Slack redelivers an event it did not see acknowledged within 3 s. Bolt runs
with process_before_response, so the ack (a Socket Mode response or the HTTP 200) leaves only
after our listener returned, which is after `bridge.submit` committed the message: a daemon
killed before the commit leaves the event unacknowledged and Slack sends it again. Copies (the
redelivery, and the `message` + `app_mention` pair Slack sends for one mention) share channel
and ts, the platform message id the store deduplicates on; recent event ids and message ids
are also remembered here so a copy costs no database work and no second file download.

Events of one conversation are handled one at a time, in arrival order, so the agent sees
messages in the order they were written even when one of them carries a slow file. A file
that takes longer than Slack's 3 s to download delays that ack: Slack redelivers, the copy
waits for the original and is then recognised, and the file is downloaded once.

Commands: `/picobridge new|status|stop|help` (the name is slack.slash_command) in a DM with the
bot, and `!new` etc. as text (slack.command_prefix) anywhere, both passed to the bridge as
`/new`. Slash commands cannot be used inside threads, and a channel has no conversation of its
own, so in channels the slash command only explains how to use `!new` in a thread.

Around this module: slack_events (which events are messages, pure), slack_files (downloads),
slack_send (replies), slack_progress (reactions, status, streaming), slack_client (Web API).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.middleware.authorization.async_single_team_authorization import (
    AsyncSingleTeamAuthorization,
)
from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.common.attachments import AttachmentPolicy, AttachmentRefused
from picobridge.adapters.slack.client import (
    Recent,
    SlackAuthError,
    as_response,
    check_app_token,
    identify,
    web_client,
)
from picobridge.adapters.slack.context import thread_context
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
from picobridge.adapters.slack.progress import SlackProgress
from picobridge.adapters.slack.send import SlackSender, StreamTarget, reply_key
from picobridge.contract import (
    Adapter,
    BridgeLink,
    ChatRef,
    DeliveryError,
    InboundMessage,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ProgressKind,
    ReplyKind,
    SubmitResult,
)

if TYPE_CHECKING:
    from picobridge.config.settings import Settings

log = logging.getLogger("picobridge.slack")

CONNECT_WAIT = 10.0  # start() returns after this even if Socket Mode is not up yet
MONITOR_INTERVAL = 2.0
RETRY_FIRST = 2.0  # first wait before trying to reach Slack again after a failed start


class SlackAdapter(Adapter):
    platform = PLATFORM

    def __init__(self, settings: Settings) -> None:
        self._settings = settings.slack
        self._policy = AttachmentPolicy(settings.attachments, settings.media_dir)
        self._bridge: BridgeLink | None = None
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._app: AsyncApp | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._sender: SlackSender | None = None
        self._progress: SlackProgress | None = None
        self._files: SlackFiles | None = None
        self._me: Identity | None = None
        self._connected = False
        self._stopped = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        self._seen_events = Recent()
        self._seen_messages = Recent()
        self._reply_streams: dict[str, StreamTarget] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> Adapter | None:
        return cls(settings) if settings.slack.active else None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, bridge: BridgeLink) -> None:
        self._bridge = bridge
        s = self._settings
        self._session = aiohttp.ClientSession()
        client = self._client = web_client(s, self._session)
        self._sender = SlackSender(client, bridge, max_chunks=s.max_chunks,
                                   on_auth_failure=self._auth_failed)
        self._progress = SlackProgress(client, received=s.reaction_received,
                                       done=s.reaction_done, failed=s.reaction_failed,
                                       stream=s.stream)
        assert s.bot_token is not None
        self._files = SlackFiles(self._session, s.bot_token.get_secret_value(), s.file_hosts,
                                 self._policy, self._file_info)
        self._app = self._make_app(client)
        if s.mode == "http":
            http = bridge.http_app()
            if http is None:
                bridge.fatal(PLATFORM, "slack.mode = 'http' needs http.listen")
                return
            http.router.add_post(s.events_path, self._http_events)
        self._spawn(self._policy.cleanup_forever())
        try:
            await self._go_online()
        except SlackAuthError as exc:
            bridge.fatal(PLATFORM, str(exc))
        except Exception as exc:
            # Slack unreachable (network, 5xx): keep trying in the background; messages wait
            # on Slack's side (Socket Mode) or are retried by Slack (HTTP mode).
            log.warning("Slack is not reachable yet (%s); retrying in the background",
                        exc.__class__.__name__)
            self._spawn(self._online_later())

    async def _go_online(self) -> None:
        assert self._client is not None and self._bridge is not None
        me, data = await identify(self._client)
        if self._settings.mode == "socket":
            assert self._settings.app_token is not None
            await check_app_token(self._client, self._settings.app_token.get_secret_value())
        self._me = me
        self._prime_bolt(data)
        log.info("Slack: signed in as @%s (%s) in %s (%s), %s mode", data.get("user"),
                 me.user_id, data.get("team"), me.team_id, self._settings.mode)
        if self._settings.mode == "http":
            self._set_connected(True)
            return
        await self._open_socket()

    async def _online_later(self) -> None:
        delay = RETRY_FIRST
        while not self._stopped:
            await asyncio.sleep(delay)
            try:
                await self._go_online()
                return
            except SlackAuthError as exc:
                assert self._bridge is not None
                self._bridge.fatal(PLATFORM, str(exc))
                return
            except Exception as exc:
                log.warning("Slack still not reachable (%s)", exc.__class__.__name__)
                delay = min(60.0, delay * 2)

    async def _open_socket(self) -> None:
        assert self._app is not None and self._client is not None
        assert self._settings.app_token is not None
        self._socket = AsyncSocketModeHandler(
            self._app, self._settings.app_token.get_secret_value(), web_client=self._client)
        connecting = self._spawn(self._socket.connect_async())  # type: ignore[no-untyped-call]
        done, _ = await asyncio.wait({connecting}, timeout=CONNECT_WAIT)
        if done:
            connecting.result()
            self._set_connected(True)
        else:
            log.warning("Socket Mode connection not up after %.0fs; still trying", CONNECT_WAIT)
        self._spawn(self._monitor_socket())

    async def _monitor_socket(self) -> None:
        while self._socket is not None and not self._stopped:
            await asyncio.sleep(MONITOR_INTERVAL)
            with contextlib.suppress(Exception):
                self._set_connected(await self._socket.client.is_connected())

    def _set_connected(self, up: bool) -> None:
        self._connected = up
        if self._bridge is not None:
            self._bridge.connection_changed(PLATFORM, up)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._socket is not None:
            with contextlib.suppress(Exception):
                await self._socket.close_async()  # type: ignore[no-untyped-call]
        if self._progress is not None:
            await self._progress.settle(2.0)
            await self._progress.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        self._set_connected(False)

    def connected(self) -> bool:
        return self._connected

    async def verify(self) -> str:
        s = self._settings
        async with aiohttp.ClientSession() as session:
            client = web_client(s, session)
            _, data = await identify(client)
            where = f"bot @{data.get('user')} ({data.get('user_id')}) in team " \
                    f"{data.get('team')} ({data.get('team_id')})"
            if s.mode == "socket":
                assert s.app_token is not None
                await check_app_token(client, s.app_token.get_secret_value())
                return f"{where}; Socket Mode app token ok"
            return f"{where}; HTTP mode, events at {s.events_path}"

    def _auth_failed(self, error: str) -> None:
        if self._bridge is not None:
            self._bridge.fatal(PLATFORM, f"Slack refused the bot token ({error}); "
                                         "check slack.bot_token")

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- bolt --------------------------------------------------------------------------------

    def _make_app(self, client: AsyncWebClient) -> AsyncApp:
        s = self._settings
        secret = s.signing_secret.get_secret_value() if s.signing_secret else ""
        app = AsyncApp(
            # Without a logger bolt copies the root level onto its loggers, overriding the cap
            # setup_logging puts on "slack_bolt"; at DEBUG it would log whole payloads.
            logger=logging.getLogger("slack_bolt.picobridge"),
            name="picobridge", client=client, signing_secret=secret,
            process_before_response=True,
            request_verification_enabled=s.mode == "http",
        )
        app.event(re.compile(".*"))(self._on_event)
        app.command(s.slash_command)(self._on_command)
        return app

    def _prime_bolt(self, auth_test: dict[str, Any]) -> None:
        """Hand bolt the auth.test result we already have, so its first event does not wait for
        another auth.test call (and events keep their arrival order)."""
        assert self._app is not None and self._client is not None
        for middleware in getattr(self._app, "_async_middleware_list", []):
            if isinstance(middleware, AsyncSingleTeamAuthorization):
                with contextlib.suppress(Exception):
                    middleware.auth_test_result = as_response(self._client, auth_test)

    async def _http_events(self, request: web.Request) -> web.StreamResponse:
        assert self._app is not None
        response = await self._app.async_dispatch(await to_bolt_request(request))
        if response.status == 401:
            log.warning("refused a request to %s: bad or stale Slack signature", request.path)
        return await to_aiohttp_response(response)

    async def _on_event(self, body: dict[str, Any], ack: Any) -> None:
        # Returning normally lets bolt acknowledge; raising makes it answer 500 / not ack,
        # so Slack sends the event again.
        await self.handle_event(body)
        await ack()

    async def _on_command(self, body: dict[str, Any], ack: Any) -> None:
        answer = await self.handle_command(body)
        if answer is None:
            await ack()
        else:
            await ack(text=answer)

    # -- inbound -----------------------------------------------------------------------------

    async def handle_event(self, body: dict[str, Any]) -> None:
        """Process one Events API payload; returns once it is safe to acknowledge."""
        bridge, me = self._bridge, self._me
        if bridge is None or me is None:
            raise RuntimeError("Slack adapter is not ready for events yet")
        event_id = body.get("event_id") if isinstance(body.get("event_id"), str) else None
        if event_id is not None and event_id in self._seen_events:
            return
        found = normalise(body, me, allow_bots=self._settings.allow_bots,
                          command_prefix=self._settings.command_prefix)
        if isinstance(found, Skip):
            log.debug("event %s skipped: %s", event_id, found.reason)
            self._seen_events.add(event_id)
            return
        if not found.is_dm and self._settings.allowed_channels \
                and found.channel not in self._settings.allowed_channels:
            if not found.needs_known_thread:
                self._spawn(self._ephemeral(found.channel, found.user,
                                            "I am not enabled in this channel.", found.chat))
            log.info("mention in channel %s ignored: not in slack.allowed_channels",
                     found.channel)
            self._seen_events.add(event_id)
            return
        async with self._chat_lock(found.chat.key):
            if found.platform_message_id in self._seen_messages:
                self._seen_events.add(event_id)
                return
            context = ""
            thread = found.chat.thread_id
            if found.needs_known_thread or (thread is not None and thread != found.ts
                                            and not found.is_dm):
                known = await bridge.knows_chat(found.chat)
                if found.needs_known_thread and not known:
                    return
                if not known and thread is not None and self._client is not None \
                        and await bridge.is_allowed(PLATFORM, found.user):
                    # Mentioned for the first time in a thread that ran without the bot.
                    context = await thread_context(self._client, me, found.channel, thread,
                                                   found.ts)
            await self._submit(bridge, found, context)
            self._seen_messages.add(found.platform_message_id)
            self._seen_events.add(event_id)

    async def _submit(self, bridge: BridgeLink, found: Candidate, context: str = "") -> None:
        attachments = []
        notices: list[str] = []
        text = found.text
        if found.files:
            if await bridge.is_allowed(PLATFORM, found.user):
                assert self._files is not None
                for file in found.files:
                    try:
                        attachments.append(await self._files.fetch(file))
                    except AttachmentRefused as exc:
                        notices.append(str(exc))
            elif not text:
                text = "(a file)"  # still submitted, so the stranger hears why nothing happens
        for notice in notices:
            self._spawn(self._notice(found.chat, f"⚠️ {notice}"))
        if not text and not attachments:
            if found.files:
                return  # every file was refused, and the user was told why
            if not context:
                text = "/help"  # a bare @mention: say what the bot does rather than nothing
        if context and not text.startswith("/"):
            text = context + (text or "(I was mentioned without a question.)")
        result = await bridge.submit(InboundMessage(
            chat=found.chat, sender_id=found.user, text=text,
            platform_message_id=found.platform_message_id, sender_name=found.sender_name,
            attachments=tuple(attachments), reply_to=found.ts, sent_at=ts_seconds(found.ts)))
        log.debug("slack message %s -> %s", found.platform_message_id, result.value)
        if result is SubmitResult.ACCEPTED and self._progress is not None:
            self._progress.received(found.channel, found.ts)

    async def handle_command(self, body: dict[str, Any]) -> str | None:
        """A slash command; returns an ephemeral answer for Slack, or None when the bridge
        answers in the DM."""
        bridge = self._bridge
        if bridge is None or self._client is None:
            raise RuntimeError("Slack adapter is not ready for commands yet")
        s = self._settings
        command = slash_command_text(str(body.get("text") or "")) or "/help"
        channel = str(body.get("channel_id") or "")
        user = str(body.get("user_id") or "")
        if not channel.startswith("D"):
            p = s.command_prefix
            return (f"In channels every thread is its own conversation: mention me inside the "
                    f"thread with `{p}new`, `{p}status`, `{p}stop` or `{p}help`. "
                    f"`{s.slash_command}` works in a direct message with me.")
        try:
            # The command may come from a DM with someone else; answer in the user's DM with us.
            opened = await self._client.conversations_open(users=user)
            channel = str(opened["channel"]["id"])
        except Exception as exc:
            log.debug("conversations.open failed: %s", exc.__class__.__name__)
        await bridge.submit(InboundMessage(
            chat=ChatRef(PLATFORM, channel, None), sender_id=user, text=command,
            platform_message_id=f"command:{body.get('trigger_id') or body.get('envelope_id')}",
            sender_name=str(body.get("user_name") or "")))
        return None

    @contextlib.asynccontextmanager
    async def _chat_lock(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                self._locks.pop(key, None)

    async def _file_info(self, file_id: str) -> dict[str, Any]:
        assert self._client is not None
        resp = await self._client.files_info(file=file_id)
        file = resp.get("file")
        return dict(file) if isinstance(file, dict) else {}

    async def _notice(self, chat: ChatRef, text: str) -> None:
        assert self._client is not None
        try:
            await self._client.chat_postMessage(channel=chat.chat_id, thread_ts=chat.thread_id,
                                                text=text)
        except Exception as exc:
            log.warning("could not post a notice to %s: %s", chat.key, exc.__class__.__name__)

    async def _ephemeral(self, channel: str, user: str, text: str, chat: ChatRef) -> None:
        assert self._client is not None
        try:
            await self._client.chat_postEphemeral(channel=channel, user=user, text=text,
                                                  thread_ts=chat.thread_id)
        except Exception as exc:
            log.debug("ephemeral notice failed: %s", exc.__class__.__name__)

    # -- outbound ----------------------------------------------------------------------------

    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        if self._sender is None or self._progress is None:
            raise DeliveryError("Slack is not connected yet")
        if not self._settings.stream:
            await self._sender.send(chat, reply)
            return
        key = reply_key(chat, reply)
        target = self._reply_streams.get(key)
        if target is None and reply.kind is ReplyKind.ANSWER and reply.private_to is None:
            target = await self._progress.take_stream(chat)
            if target is not None:
                # Kept until delivered: a retry must edit the same message, not post anew.
                self._reply_streams[key] = target
        await self._sender.send(chat, reply, target)
        self._reply_streams.pop(key, None)

    async def show_progress(self, chat: ChatRef, event: ProgressEvent) -> None:
        if self._progress is None:
            return
        if event.kind is ProgressKind.STARTED:
            self._progress.turn_started(chat, event.message_ids)
        elif event.kind is ProgressKind.TEXT:
            self._progress.text(chat, event.text)

    async def clear_progress(self, chat: ChatRef, outcome: Outcome) -> None:
        if self._progress is not None:
            self._progress.turn_ended(chat, outcome)
