"""Receiving updates: long polling with a durable offset, or a webhook.

Polling does not use python-telegram-bot's Updater, which confirms updates as soon as it has
fetched them. Here the offset (which confirms every update below it to Telegram) only moves
past an update once the bridge has committed it, and is saved in the store first, so a
SIGKILL at any moment loses nothing; what is fetched again after a restart is deduplicated
by the bridge on the message's platform id.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.request import BaseRequest

from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.telegram.errors import check_cancelled, retry_seconds
from picobridge.adapters.telegram.intake import Dispatcher, IntakeRetry
from picobridge.adapters.telegram.normalise import ALLOWED_UPDATES, PLATFORM
from picobridge.contract import BridgeLink

log = logging.getLogger("picobridge.telegram")

CURSOR = "telegram.offset"
# After a week without updates Telegram restarts update ids at a random value, possibly
# below a saved offset, which would then confirm (drop) new updates unseen.
CURSOR_MAX_AGE = 6 * 86400.0
# While an album's parts may still arrive, poll briefly instead of parking a long poll.
ALBUM_POLL_INTERVAL = 0.3
# A handler that keeps failing for another reason than the network is a bug; after this many
# tries its update is skipped so that it cannot block every chat behind it.
MAX_HANDLER_FAILURES = 5
BACKOFF_CAP = 30.0
CURSOR_SAVE_EVERY = 5.0
# After a poll that brought updates, wait this long before the next one: under load an
# immediate poll returns one update per request, a short pause lets a burst arrive in one
# response (a quarter of the getUpdates calls at 20 chats, for at most 20 ms of latency,
# small beside Telegram's own round trip).
BATCH_PAUSE = 0.02

Fatal = Callable[[str], None]


class Poller:
    def __init__(self, bot: Bot, request: BaseRequest, dispatcher: Dispatcher,
                 bridge: BridgeLink, *, poll_timeout: int, stall_timeout: float,
                 fatal: Fatal, scrub: Callable[[str], str]) -> None:
        self._bot = bot
        self._request = request
        self._dispatcher = dispatcher
        self._bridge = bridge
        self._poll_timeout = poll_timeout
        # A long poll legitimately takes poll_timeout (plus some network time); only longer
        # than that is a stall.
        self._stall_after = max(stall_timeout, poll_timeout + min(5.0, poll_timeout))
        self._fatal = fatal
        self._scrub = scrub
        self._offset: int | None = None
        self._inflight: dict[int, asyncio.Future[None]] = {}
        self._failures: dict[int, int] = {}
        self._backoff = Backoff(cap=BACKOFF_CAP)
        self._saved: int | None = None
        self._saved_at = float("-inf")
        self._stopped = False
        self.connected = False
        self.reconnects = 0

    async def run(self) -> None:
        self._offset = await self._load_offset()
        log.info("polling for updates (offset %s)", self._offset)
        try:
            while True:
                if await self._settle():
                    await self._backoff.wait()
                await self._save_offset()
                updates = await self._poll()
                if updates is None:
                    if self._stopped:
                        return
                    continue
                for update in updates:
                    uid = update.update_id
                    if (self._offset is not None and uid < self._offset) or uid in self._inflight:
                        continue  # fetched again while an earlier one is still being handled
                    self._inflight[uid] = self._dispatcher.dispatch(update)
                if updates:
                    await asyncio.sleep(BATCH_PAUSE)
        finally:
            self._set_connected(False)
            self._advance()  # what was committed since the last poll counts too
            with contextlib.suppress(Exception):
                await asyncio.shield(self._save_offset(force=True))

    async def _poll(self) -> tuple[Update, ...] | None:
        # A short poll first (and after trouble) answers at once, so the connection is known
        # to be up without waiting out a long poll on a quiet bot.
        short = self._dispatcher.albums_open or not self.connected
        timeout = 0 if short else self._poll_timeout
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation
            # that arrives just as the call completes, and stop() would then never end.
            async with asyncio.timeout(self._stall_after):
                updates = await self._bot.get_updates(
                    offset=self._offset, timeout=timeout, allowed_updates=list(ALLOWED_UPDATES))
        except TimeoutError:
            log.warning("getUpdates gave no answer for %.0fs; reconnecting", self._stall_after)
            await self._reconnect()
            return None
        except InvalidToken:
            self._stopped = True
            self._fatal("Telegram refused the bot token (401 Unauthorized): it is wrong or was "
                        "revoked. Get the current token from @BotFather and set telegram.token.")
            return None
        except Conflict:
            self._stopped = True
            self._fatal("another process is receiving this bot's updates (409 Conflict): only "
                        "one picobridge (or other bot program) may poll with one token, and no "
                        "webhook may be set.")
            return None
        except RetryAfter as exc:
            check_cancelled()
            log.warning("getUpdates hit flood control; waiting %.0fs", retry_seconds(exc))
            await asyncio.sleep(retry_seconds(exc))
            return None
        except (NetworkError, TelegramError) as exc:
            check_cancelled()
            log.warning("getUpdates failed: %s; retrying in %.0fs",
                        self._scrub(f"{exc.__class__.__name__}: {exc}"), self._backoff.delay)
            self._set_connected(False)
            await self._backoff.wait()
            await self._reconnect()
            return None
        self._backoff.reset()
        self._set_connected(True)
        return updates

    async def _settle(self) -> bool:
        """Wait for handlers, advance the offset past what is committed; True after a failure
        (then everything from the failed update on is fetched and handled again)."""
        pending = [t for t in self._inflight.values() if not t.done()]
        if pending:
            if self._dispatcher.albums_open:
                await asyncio.wait(pending, timeout=ALBUM_POLL_INTERVAL)
            else:
                await asyncio.wait(pending)
        failed = [uid for uid, t in self._inflight.items()
                  if t.done() and (t.cancelled() or t.exception() is not None)]
        if failed:
            # Let everything in flight end so that nothing is handled twice at once.
            await asyncio.wait(list(self._inflight.values()))
            first = min(failed)
            task = self._inflight[first]
            error = task.exception() if not task.cancelled() else None
            transient = isinstance(error, IntakeRetry) or error is None
            count = self._failures[first] = self._failures.get(first, 0) + 1
            if transient or count < MAX_HANDLER_FAILURES:
                if not transient:
                    log.error("handling update %d failed (attempt %d)", first, count,
                              exc_info=error)
                else:
                    log.warning("update %d not handled yet: %s", first, error)
                self._offset = first
                self._inflight.clear()
                return True
            log.error("skipping update %d after %d failed attempts", first, count,
                      exc_info=error)
            skipped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            skipped.set_result(None)
            self._inflight[first] = skipped
        self._advance()
        return False

    def _advance(self) -> None:
        for uid in sorted(self._inflight):
            task = self._inflight[uid]
            if not task.done() or task.cancelled() or task.exception() is not None:
                # Ask from here on: Telegram keeps (and resends) this one and what follows.
                self._offset = uid if self._offset is None else max(self._offset, uid)
                break
            del self._inflight[uid]
            self._failures.pop(uid, None)
            self._offset = uid + 1

    async def _reconnect(self) -> None:
        self.reconnects += 1
        self._set_connected(False)
        # A fresh HTTP client: the old connection may be half-open and would hang again.
        try:
            await self._request.shutdown()
            await self._request.initialize()
        except Exception as exc:
            check_cancelled()
            log.warning("resetting the polling connection failed: %s",
                        self._scrub(str(exc)))

    def _set_connected(self, up: bool) -> None:
        if up != self.connected:
            self.connected = up
            self._bridge.connection_changed(PLATFORM, up)

    async def _load_offset(self) -> int | None:
        raw = await self._bridge.get_cursor(CURSOR)
        if not raw:
            return None
        try:
            data = json.loads(raw)
            offset, saved = int(data["offset"]), float(data["saved"])
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring an unreadable saved Telegram offset")
            return None
        if time.time() - saved > CURSOR_MAX_AGE:
            log.info("saved Telegram offset is older than a week; letting Telegram decide")
            return None
        return offset

    async def _save_offset(self, force: bool = False) -> None:
        # Telegram itself remembers what was confirmed, so a saved offset that lags behind
        # only means asking from an older point (Telegram answers from its own); saving it
        # every few seconds instead of every poll keeps a write off the hot path.
        now = time.monotonic()
        if self._offset is None or self._offset == self._saved:
            return
        if not force and now - self._saved_at < CURSOR_SAVE_EVERY:
            return
        await self._bridge.set_cursor(
            CURSOR, json.dumps({"offset": self._offset, "saved": int(time.time())}))
        self._saved, self._saved_at = self._offset, now


class WebhookReceiver:
    """The webhook endpoint on the daemon's HTTP server: answers 200 only after the commit,
    so Telegram keeps (and resends) whatever was not stored."""

    def __init__(self, dispatcher: Dispatcher, secret: str,
                 bot: Callable[[], Bot | None]) -> None:
        self._dispatcher = dispatcher
        self._secret = secret.encode()
        self._bot = bot

    async def handle(self, request: web.Request) -> web.StreamResponse:
        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.warning("webhook call with a wrong secret token refused")
            return web.Response(status=403)
        bot = self._bot()
        if bot is None:
            return web.Response(status=503)  # not connected yet; Telegram retries
        try:
            data = await request.json()
            update = Update.de_json(data, bot)
        except (ValueError, TypeError, KeyError):
            return web.Response(status=400)
        task = self._dispatcher.dispatch(update)
        # Shielded: Telegram closing the connection must not abort a commit half way.
        error = await _outcome(asyncio.shield(task))
        if error is not None:
            log.warning("webhook update %d not handled yet: %s", update.update_id, error)
            return web.Response(status=500)
        return web.json_response({})


async def _outcome(awaitable: Awaitable[None]) -> BaseException | None:
    try:
        await awaitable
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return exc
    return None
