"""Telegram through python-telegram-bot 22, embedded in the daemon's event loop.

The library is used as a Bot API client only (Bot.initialize/shutdown, no Application, no
Updater): the updates loop is ours so that the offset confirms only what the store holds
(telegram_poll), normalising and downloads are in telegram_normalise/telegram_intake,
delivery in telegram_send and typing/streaming in telegram_progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from telegram import Bot, Message, Update
from telegram.error import BadRequest, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.request import BaseRequest

from picobridge.adapters.common.attachments import AttachmentPolicy
from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.common.buttons import Asked, QuestionMessages
from picobridge.adapters.common.partlog import PartLog
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.telegram.buttons import Clicks, Closings, keyboard
from picobridge.adapters.telegram.client import make_bot, request
from picobridge.adapters.telegram.commands import COMMAND_NAMES, Menus
from picobridge.adapters.telegram.errors import check_cancelled, retry_seconds
from picobridge.adapters.telegram.intake import Dispatcher, Pipeline
from picobridge.adapters.telegram.normalise import ALLOWED_UPDATES, PLATFORM, BotIdentity
from picobridge.adapters.telegram.parse import UNREADABLE
from picobridge.adapters.telegram.poll import Poller
from picobridge.adapters.telegram.progress import ProgressDisplay
from picobridge.adapters.telegram.send import Sender
from picobridge.adapters.telegram.storage import StorageWait
from picobridge.contract import (
    Adapter,
    BridgeCommand,
    BridgeLink,
    ChatRef,
    DeliveryError,
    DialogClosed,
    Outcome,
    OutgoingReply,
    ProgressEvent,
    ReplyKind,
)

if TYPE_CHECKING:
    from picobridge.adapters.telegram.settings import TelegramBotSettings
    from picobridge.config.settings import Settings

log = logging.getLogger("picobridge.telegram")

READY_WAIT = 30.0
# The name of the adapter's main loop (connecting, then polling or serving the webhook) under
# the daemon's supervision: "<its platform name>-updates" ("telegram-updates" for the bot
# named "default").
MAIN_LOOP = "{platform}-updates"
REVOKED = ("Telegram refused the bot token (401 Unauthorized): it is wrong or was revoked. "
           "Get the current token from @BotFather and set telegram.token.")


def _quiet_library_logs() -> None:
    # python-telegram-bot logs its API URLs, which contain the token, and every call's
    # parameters (users' messages) at DEBUG; the bridge's own DEBUG lines are enough.
    for name in ("telegram", "httpx", "httpcore"):
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO or logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO if name == "telegram" else logging.WARNING)


class TelegramAdapter(Adapter):
    def __init__(self, settings: Settings, platform: str = PLATFORM,
                 cfg: TelegramBotSettings | None = None) -> None:
        # `platform`: the name the bridge knows this bot by ("telegram", "telegram@work").
        self.platform = platform
        self._loop_name = MAIN_LOOP.format(platform=platform)
        cfg = cfg if cfg is not None else settings.section(PLATFORM)
        assert cfg is not None and cfg.token is not None
        self._cfg = cfg
        self._token = cfg.token.get_secret_value()
        # Case-insensitive: python-telegram-bot lowers the case of error descriptions, and a
        # token echoed in one is still the token.
        self._token_pattern = re.compile(re.escape(self._token), re.IGNORECASE)
        self._policy = AttachmentPolicy(settings.attachments, settings.media_dir)
        self._typing_cap = settings.agent.turn_timeout + 60
        self._ready = asyncio.Event()
        self._bridge: BridgeLink | None = None
        self._bot: Bot | None = None
        self._poll_request: BaseRequest | None = None
        self._action_request: BaseRequest | None = None
        self._pipeline: Pipeline | None = None
        self._sender: Sender | None = None
        self._menus: Menus | None = None
        self._progress: ProgressDisplay | None = None
        self._poller: Poller | None = None
        self._dispatcher = Dispatcher(self._handle)
        self._asked = Asked()  # the questions shown with buttons
        self._shown: QuestionMessages[Message] = QuestionMessages()  # ... and their messages
        self._tasks = TaskSet(log)
        self._closings = Closings(self._shown, self._tasks, self._scrub)
        self._webhook_up = False
        self._running = False
        _quiet_library_logs()

    # -- lifecycle ---------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        return self._token_pattern.sub("[token]", text)

    async def start(self, bridge: BridgeLink) -> None:
        self._bridge = bridge
        try:
            bot, self._poll_request = make_bot(self._token, self._cfg)
            # Chat actions skip the rate limiter: renewing "typing" every 4 s would otherwise
            # use up a group's 20 messages a minute and hold back the answers themselves.
            self._action_request = request(self._cfg, 8, read=10.0)
        except (RuntimeError, ValueError) as exc:
            # An unknown proxy scheme, or SOCKS without its optional support installed.
            bridge.fatal(self.platform, f"cannot use telegram.proxy_url: {exc}")
            return
        self._bot = bot
        action_bot = Bot(self._token, base_url=self._cfg.base_url,
                         base_file_url=self._cfg.base_file_url, request=self._action_request,
                         get_updates_request=self._action_request)
        self._sender = Sender(bot, PartLog(bridge, self.platform), max_chunks=self._cfg.max_chunks,
                              scrub=self._scrub, on_revoked=self._revoked)
        self._progress = ProgressDisplay(bot, action_bot, stream=self._cfg.stream,
                                         show_tools=self._cfg.show_tools,
                                         typing_cap=self._typing_cap, scrub=self._scrub)
        if self._cfg.mode == "webhook":
            app = bridge.http_app()
            if app is None:
                bridge.fatal(self.platform, "telegram.mode = 'webhook' needs http.listen")
                return
            # Only a webhook bot loads aiohttp's server (with http.listen the daemon has).
            from picobridge.adapters.telegram.webhook import WebhookReceiver

            receiver = WebhookReceiver(self._dispatcher, self._webhook_secret(),
                                       lambda: bot if self._ready.is_set() else None,
                                       lambda: bridge.heard_from(self.platform))
            app.router.add_post(self._cfg.webhook_path, receiver.handle)
        # Supervised: whatever ends the loop is logged and the loop starts again (it goes on
        # where it was), and one that keeps failing makes the daemon unhealthy.
        bridge.keep_running(self._loop_name, self._run)
        self._running = True
        self._tasks.spawn(self._policy.cleanup_forever(), name="telegram-media-cleanup")

    async def stop(self) -> None:
        if self._running and self._bridge is not None:
            self._running = False
            await self._bridge.stop_running(self._loop_name)
        await self._tasks.close()
        await self._dispatcher.close()
        if self._pipeline is not None:
            await self._pipeline.close()
        if self._progress is not None:
            await self._progress.close()
        if self._bot is not None:
            bot, self._bot = self._bot, None
            with contextlib.suppress(Exception):
                await bot.shutdown()
            # shutdown() skips requests of a bot whose initialize() never succeeded.
            for request in (self._poll_request, self._action_request):
                if request is not None:
                    with contextlib.suppress(Exception):
                        await request.shutdown()
        self._ready.clear()
        if self._bridge is not None:
            self._bridge.connection_changed(self.platform, False)

    async def _run(self) -> None:
        bridge, bot = self._bridge, self._bot
        assert bridge is not None and bot is not None
        if self._pipeline is None and not await self._set_up(bridge, bot):
            await asyncio.Event().wait()  # refused for good: the daemon is stopping
        if self._cfg.mode == "webhook":
            if not self._webhook_up:
                await self._set_webhook(bridge, bot)
            await asyncio.Event().wait()
        if self._poller is None:
            await self._drop_webhook(bot)
            assert self._poll_request is not None
            self._poller = Poller(
                bot, self._poll_request, self._dispatcher, bridge,
                poll_timeout=self._cfg.poll_timeout, stall_timeout=self._cfg.stall_timeout,
                fatal=lambda reason: bridge.fatal(self.platform, reason), scrub=self._scrub,
                platform=self.platform)
        await self._poller.run()

    async def _set_up(self, bridge: BridgeLink, bot: Bot) -> bool:
        identity = await self._connect(bridge, bot)
        if identity is None:
            return False
        assert self._sender is not None
        # Polling holds an update whose commit the store refuses and offers it again; a
        # webhook answers 503 and Telegram sends it again.
        storage = StorageWait(hold=self._cfg.mode == "polling")
        clicks = Clicks(bot, bridge, self._asked, storage, self._scrub, self._shown,
                        platform=self.platform)
        self._pipeline = Pipeline(bot, bridge, self._policy, identity, self._sender.notice,
                                  COMMAND_NAMES, self._scrub, storage=storage,
                                  clicked=clicks.handle, proxy=self._cfg.proxy_url,
                                  platform=self.platform)
        self._menus = Menus(bot, self._scrub, self._sender.delivery_error)
        self._ready.set()
        log.info("connected to Telegram as @%s (%s mode)", identity.username, self._cfg.mode)
        self._tasks.spawn(self._menus.register(bridge.commands(bot=self.platform)),
                          name="telegram-commands")
        return True

    async def _connect(self, bridge: BridgeLink, bot: Bot) -> BotIdentity | None:
        backoff = Backoff()
        while True:
            try:
                await bot.initialize()
                me = bot.bot
                return BotIdentity(me.id, me.username or "")
            except InvalidToken:
                # The library's message quotes the token: never show it.
                bridge.fatal(self.platform, REVOKED)
                return None
            except RetryAfter as exc:
                check_cancelled()
                await asyncio.sleep(retry_seconds(exc))
            except TelegramError as exc:
                check_cancelled()
                log.warning("cannot reach Telegram (%s); retrying in %.0fs",
                            self._scrub(f"{exc.__class__.__name__}: {exc}"), backoff.delay)
                await backoff.wait()
            except UNREADABLE as exc:
                log.warning("Telegram answered getMe with something that is not a bot (%s); "
                            "retrying in %.0fs", exc.__class__.__name__, backoff.delay)
                await backoff.wait()

    async def _drop_webhook(self, bot: Bot) -> None:
        # getUpdates is refused while a webhook is set (e.g. after switching modes): a 409
        # that would stop the daemon. So the answer must be understood before polling.
        backoff = Backoff()
        while True:
            try:
                info = await bot.get_webhook_info()
                if info.url:
                    log.warning("removing the bot's webhook to receive updates by polling")
                    await bot.delete_webhook(drop_pending_updates=False)
                return
            except TelegramError as exc:
                check_cancelled()
                if isinstance(exc, BadRequest) or not isinstance(exc, NetworkError):
                    log.warning("could not check the bot's webhook: %s", self._scrub(str(exc)))
                    return
                reason = self._scrub(f"{exc.__class__.__name__}: {exc}")
            except UNREADABLE as exc:
                reason = f"an answer that is not webhook info ({exc.__class__.__name__})"
            log.warning("checking the bot's webhook failed (%s); retrying in %.0fs", reason,
                        backoff.delay)
            await backoff.wait()

    def _webhook_secret(self) -> str:
        if self._cfg.webhook_secret is not None:
            return self._cfg.webhook_secret.get_secret_value()
        # Telegram only sends the header when a secret is set; derive a stable one.
        return hashlib.sha256(b"picobridge-webhook\0" + self._token.encode()).hexdigest()

    async def _set_webhook(self, bridge: BridgeLink, bot: Bot) -> None:
        backoff = Backoff()
        while True:
            try:
                await bot.set_webhook(self._cfg.webhook_url or "",
                                      secret_token=self._webhook_secret(),
                                      allowed_updates=list(ALLOWED_UPDATES))
                break
            except BadRequest as exc:
                bridge.fatal(self.platform,
                             f"Telegram refused the webhook: {self._scrub(exc.message)}")
                return
            except TelegramError as exc:
                check_cancelled()
                log.warning("setting the webhook failed (%s); retrying in %.0fs",
                            self._scrub(str(exc)), backoff.delay)
                await backoff.wait()
        log.info("webhook set; updates arrive on %s", self._cfg.webhook_path)
        self._webhook_up = True
        bridge.connection_changed(self.platform, True)

    def _revoked(self) -> None:
        if self._bridge is not None:
            self._bridge.fatal(self.platform, REVOKED)

    async def _handle(self, updates: Sequence[Update]) -> None:
        assert self._pipeline is not None
        await self._pipeline.handle(updates)

    # -- the adapter contract -----------------------------------------------------------------

    async def _connected(self) -> None:
        # The outbox may start sending what a previous run left before we are connected.
        try:
            async with asyncio.timeout(READY_WAIT):
                await self._ready.wait()
        except TimeoutError:
            raise DeliveryError("not connected to Telegram yet") from None

    async def send_reply(self, chat: ChatRef, reply: OutgoingReply) -> None:
        await self._connected()
        assert self._sender is not None and self._progress is not None
        draft = None
        if reply.kind in (ReplyKind.ANSWER, ReplyKind.ERROR):
            self._progress.stop_typing(chat)
            draft = await self._progress.take_draft(chat, reply)
        markup = keyboard(reply.dialog, self._asked) if reply.kind is ReplyKind.QUESTION \
            else None
        with self._progress.settling(reply):
            carrier = await self._sender.send(chat, reply, edit=draft, markup=markup)
        if carrier is not None and reply.dialog is not None and self._bot is not None:
            self._closings.sent(self._bot, reply.dialog.id, carrier)

    async def show_progress(self, chat: ChatRef, event: ProgressEvent) -> None:
        if self._progress is not None and self._ready.is_set():
            self._progress.event(chat, event)

    async def clear_progress(self, chat: ChatRef, outcome: Outcome) -> None:
        if self._progress is not None:
            self._progress.clear(chat, outcome)

    async def dialog_closed(self, chat: ChatRef, closed: DialogClosed) -> None:
        await self._closings.closed(self._bot, closed)

    chat_menus = True

    async def show_commands(self, chat: ChatRef,
                            commands: tuple[BridgeCommand, ...] | None) -> None:
        await self._connected()
        assert self._menus is not None
        await self._menus.show(chat, commands)

    async def verify(self) -> str:
        try:
            bot, _ = make_bot(self._token, self._cfg)
        except (RuntimeError, ValueError) as exc:
            raise RuntimeError(f"cannot use telegram.proxy_url: {exc}") from None
        try:
            try:
                await bot.initialize()
            except InvalidToken:
                raise RuntimeError("Telegram refused the bot token (401 Unauthorized)") from None
            except TelegramError as exc:
                raise RuntimeError(f"cannot reach Telegram: {self._scrub(str(exc))}") from None
            except UNREADABLE as exc:
                raise RuntimeError(f"Telegram's answer to getMe is not a bot "
                                   f"({exc.__class__.__name__})") from None
            me = bot.bot
            text = f"bot @{me.username} ({me.first_name}), {self._cfg.mode} mode"
            with contextlib.suppress(TelegramError, *UNREADABLE):
                hook = (await bot.get_webhook_info()).url
                if self._cfg.mode == "polling" and hook:
                    text += "; a webhook is set and will be removed on start"
                elif self._cfg.mode == "webhook" and hook != self._cfg.webhook_url:
                    text += "; the webhook will be set on start"
            return text
        finally:
            with contextlib.suppress(Exception):
                await bot.shutdown()

    def connected(self) -> bool:
        if self._cfg.mode == "webhook":
            return self._webhook_up
        return self._poller is not None and self._poller.connected
