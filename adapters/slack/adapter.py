"""Slack, through slack-bolt's AsyncApp: Socket Mode (default) or the Events API over the
daemon's own HTTP server (`slack.mode = "http"`).

Conversations. A DM outside threads is one conversation per DM channel (thread None). Every
thread is its own conversation, keyed on its thread_ts. A channel @mention outside a thread
starts a thread on that message (thread_id = the mention's ts) and the reply goes there; later
messages in that thread reach the agent without a new mention because the bridge knows the
thread (BridgeLink.knows_chat). In channels nothing else is read.

Events and slash commands (acknowledgement after the commit, per-conversation order, the
command syntax, storage outages) are handled in inbound.py; clicks on the buttons of the
agent's questions (interactivity) in clicks.py, their blocks in buttons.py; what bolt's result
means for the acknowledgement, and payloads that do not parse, in dispatch.py.

Long-lived loops (the Socket Mode watch, the retry of messages waiting for the database, the
media clean-up) run under the daemon's supervision (BridgeLink.keep_running): a loop that
dies is logged and restarted, and one that keeps dying makes the daemon unhealthy.

Around this module: events (which events are messages, pure), shapes (which payloads can be
read at all, pure), inbound (events and commands to the bridge), held (messages waiting for
the database), dispatch (bolt and the acknowledgement), socketmode (the Socket Mode client),
files (downloads), send (replies), progress (reactions, status, streaming), client (Web API).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.middleware.authorization.async_single_team_authorization import (
    AsyncSingleTeamAuthorization,
)
from slack_sdk.web.async_client import AsyncWebClient

from picobridge.adapters.common.attachments import AttachmentPolicy
from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.common.buttons import Asked, QuestionMessages
from picobridge.adapters.common.lifecycle import Lifecycle
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.slack.buttons import Posted
from picobridge.adapters.slack.clicks import SlackClicks
from picobridge.adapters.slack.client import (
    SlackAuthError,
    as_response,
    check_app_token,
    file_info,
    identify,
    web_client,
)
from picobridge.adapters.slack.dispatch import Dispatcher, NotYet, listening
from picobridge.adapters.slack.events import PLATFORM
from picobridge.adapters.slack.files import SlackFiles
from picobridge.adapters.slack.inbound import SlackInbound
from picobridge.adapters.slack.progress import SlackProgress
from picobridge.adapters.slack.send import SlackSender
from picobridge.adapters.slack.socketmode import SocketLink
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
    from picobridge.adapters.slack.settings import SlackAppSettings
    from picobridge.config.settings import Settings

log = logging.getLogger("picobridge.slack")

CONNECT_WAIT = 10.0  # start() returns after this even if Socket Mode is not up yet
RETRY_FIRST = 2.0  # first wait before trying to reach Slack again after a failed start
# The adapter's loops under the daemon's supervision (names are unique per daemon).
LOOP_SOCKET = "slack-socket-watch"
LOOP_HELD = "slack-held-messages"
LOOP_MEDIA = "slack-media-cleanup"
# Bolt's logger, and the Socket Mode SDK's: without one bolt copies the root level onto its
# loggers, overriding the cap setup_logging puts on "slack_bolt"; at DEBUG they would log
# whole payloads.
BOLT_LOGGER = "slack_bolt.picobridge"


class SlackAdapter(Adapter):
    def __init__(self, settings: Settings, platform: str = PLATFORM,
                 section: SlackAppSettings | None = None) -> None:
        # `platform`: the name the bridge knows this app by ("slack", "slack@work").
        self.platform = platform
        self._settings: SlackAppSettings = (section if section is not None
                                            else settings.section(PLATFORM))
        self._policy = AttachmentPolicy(settings.attachments, settings.media_dir)
        self._bridge: BridgeLink | None = None
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._app: AsyncApp | None = None
        self._dispatcher: Dispatcher | None = None
        self._socket: SocketLink | None = None
        self._life = Lifecycle(platform, PLATFORM)
        self._sender: SlackSender | None = None
        self._progress: SlackProgress | None = None
        self._inbound: SlackInbound | None = None
        self._clicks: SlackClicks | None = None
        self._asked = Asked()  # the questions sent with buttons
        self._shown: QuestionMessages[Posted] = QuestionMessages()  # ... and their messages
        self._stopped = False
        self._tasks = TaskSet(log)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, bridge: BridgeLink) -> None:
        self._bridge = self._life.bridge = bridge
        s = self._settings
        self._session = aiohttp.ClientSession()
        client = self._client = web_client(s, self._session)
        self._progress = SlackProgress(client, received=s.reaction_received,
                                       done=s.reaction_done, failed=s.reaction_failed,
                                       stream=s.stream)
        assert s.bot_token is not None
        files = SlackFiles(self._session, s.bot_token.get_secret_value(), s.file_hosts,
                           self._policy, functools.partial(file_info, client),
                           platform=self.platform)
        self._inbound = SlackInbound(s, bridge, client, files, self._progress, self._tasks,
                                     self.platform)
        clicks = self._clicks = SlackClicks(bridge, client, self._asked, self._inbound.serial,
                                            self._tasks, self._shown, self.platform)
        self._sender = SlackSender(client, bridge, max_chunks=s.max_chunks,
                                   on_auth_failure=self._auth_failed, asked=self._asked,
                                   on_question=clicks.sent, platform=self.platform)
        self._app = self._make_app(client)
        secret = s.signing_secret.get_secret_value() if s.signing_secret else None
        self._dispatcher = Dispatcher(self._app, secret)
        if s.mode == "http":
            http = bridge.http_app()
            if http is None:
                bridge.fatal(self.platform, "slack.mode = 'http' needs http.listen")
                return
            dispatcher = self._dispatcher

            async def receive(request: web.Request) -> web.StreamResponse:
                bridge.heard_from(self.platform)
                return await dispatcher.http(request)

            http.router.add_post(s.events_path, receive)
        self._life.keep(LOOP_HELD, self._inbound.held.retry_forever)
        self._life.keep(LOOP_MEDIA, self._policy.cleanup_forever)
        try:
            await self._go_online()
        except SlackAuthError as exc:
            bridge.fatal(self.platform, str(exc))
        except Exception as exc:
            # Slack unreachable (network, 5xx): keep trying in the background; messages wait
            # on Slack's side (Socket Mode) or are retried by Slack (HTTP mode).
            log.warning("Slack is not reachable yet (%s); retrying in the background",
                        exc.__class__.__name__)
            self._tasks.spawn(self._online_later(), name="slack-online")

    async def _go_online(self) -> None:
        assert self._client is not None and self._inbound is not None
        me, data = await identify(self._client)
        if self._settings.mode == "socket":
            assert self._settings.app_token is not None
            await check_app_token(self._client, self._settings.app_token.get_secret_value())
        self._inbound.me = me
        self._prime_bolt(data)
        log.info("Slack: signed in as @%s (%s) in %s (%s), %s mode", data.get("user"),
                 me.user_id, data.get("team"), me.team_id, self._settings.mode)
        if self._settings.mode == "http":
            self._life.set_connected(True)
            return
        await self._open_socket()

    async def _online_later(self) -> None:
        backoff = Backoff(RETRY_FIRST)
        while not self._stopped:
            await backoff.wait()
            try:
                await self._go_online()
                return
            except SlackAuthError as exc:
                assert self._bridge is not None
                self._bridge.fatal(self.platform, str(exc))
                return
            except Exception as exc:
                log.warning("Slack still not reachable (%s)", exc.__class__.__name__)

    async def _open_socket(self) -> None:
        assert self._dispatcher is not None and self._client is not None
        assert self._settings.app_token is not None
        bridge = self._bridge
        assert bridge is not None
        self._socket = SocketLink(self._settings.app_token.get_secret_value(), self._client,
                                  self._dispatcher, logging.getLogger(BOLT_LOGGER),
                                  self._life.set_connected,
                                  silence_timeout=self._settings.silence_timeout,
                                  heard=lambda: bridge.heard_from(self.platform),
                                  silence=lambda s: bridge.silence(self.platform, s))
        connecting = self._socket.connect()
        done, _ = await asyncio.wait({connecting}, timeout=CONNECT_WAIT)
        if done:
            connecting.result()  # a failure within CONNECT_WAIT is raised here
            self._life.set_connected(True)
        else:
            log.warning("Socket Mode connection not up after %.0fs; still trying", CONNECT_WAIT)
            connecting.add_done_callback(_log_late_failure)
        self._life.keep(LOOP_SOCKET, self._socket.watch)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self._life.stop_loops()
        if self._socket is not None:
            await self._socket.close()
        if self._progress is not None:
            await self._progress.settle(2.0)
            await self._progress.close()
        await self._tasks.close()
        if self._session is not None:
            await self._session.close()
        self._life.set_connected(False)

    def connected(self) -> bool:
        return self._life.connected

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
            self._bridge.fatal(self.platform, f"Slack refused the bot token ({error}); "
                                         "check slack.bot_token")

    # -- bolt --------------------------------------------------------------------------------

    def _make_app(self, client: AsyncWebClient) -> AsyncApp:
        s = self._settings
        secret = s.signing_secret.get_secret_value() if s.signing_secret else ""
        app = AsyncApp(
            logger=logging.getLogger(BOLT_LOGGER),
            name="picobridge", client=client, signing_secret=secret,
            process_before_response=True,
            request_verification_enabled=s.mode == "http",
        )
        app.event(re.compile(".*"))(self._on_event)
        app.command(s.slash_command)(self._on_command)
        # Button clicks (interactivity), in Socket Mode and on the events URL alike.
        app.block_action(re.compile(".*"))(self._on_click)
        return app

    def _prime_bolt(self, auth_test: dict[str, Any]) -> None:
        """Hand bolt the auth.test result we already have, so its first events do not wait
        for auth.test calls of their own. They would: each envelope runs in a task of its
        own, and those waiting on the Web API come back in any order, so a burst delivered
        at connect would reach the conversations' queues out of order."""
        assert self._app is not None and self._client is not None
        primed = False
        for middleware in getattr(self._app, "_async_middleware_list", []):
            if isinstance(middleware, AsyncSingleTeamAuthorization):
                with contextlib.suppress(Exception):
                    middleware.auth_test_result = as_response(self._client, auth_test)
                    primed = True
        if not primed:  # a slack-bolt this code does not know: keep going, but say so
            log.warning("could not hand bolt the bot's identity: Slack events that arrive "
                        "together right after connecting may reach the bridge out of order")

    async def _on_event(self, body: dict[str, Any], ack: Any) -> None:
        # Returning normally lets bolt acknowledge; raising makes it answer 5xx / not ack,
        # so Slack sends the event again (dispatch.py).
        listening()
        await self.handle_event(body)
        await ack()

    async def _on_click(self, body: dict[str, Any], ack: Any) -> None:
        # Acknowledged at once: Slack never sends a click again, and answering it may wait
        # for the conversation's turn (clicks.py).
        listening()
        if self._clicks is None:
            raise NotYet("the Slack adapter is not ready for clicks yet")
        self._clicks.take(body)
        await ack()

    async def _on_command(self, body: dict[str, Any], ack: Any) -> None:
        listening()
        answer = await self.handle_command(body)
        if answer is None:
            await ack()
        else:
            await ack(text=answer)

    # -- inbound -----------------------------------------------------------------------------

    async def handle_event(self, body: dict[str, Any]) -> None:
        """Process one Events API payload; returns once it is safe to acknowledge."""
        if self._inbound is None:
            raise NotYet("the Slack adapter is not ready for events yet")
        await self._inbound.event(body)

    async def handle_command(self, body: dict[str, Any]) -> str | None:
        """A slash command; returns an ephemeral answer for Slack, or None when the bridge
        answers in the DM."""
        if self._inbound is None:
            raise NotYet("the Slack adapter is not ready for commands yet")
        return await self._inbound.command(body)

    # -- outbound ----------------------------------------------------------------------------

    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        if self._sender is None or self._progress is None:
            raise DeliveryError("Slack is not connected yet")
        target = None
        if self._settings.stream and reply.kind is ReplyKind.ANSWER and reply.private_to is None:
            target = await self._progress.take_stream(chat, reply)
        with self._progress.settling(reply):
            await self._sender.send(chat, reply, target)

    async def dialog_closed(self, chat: ChatRef, closed: DialogClosed) -> None:
        if self._clicks is not None:
            await self._clicks.closed(closed)
        else:
            self._shown.closed(closed)  # not started: kept for when its question is sent

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


def _log_late_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("Socket Mode connection failed: %s", task.exception().__class__.__name__)
