"""Receiving updates by long polling, with a durable offset.

Polling does not use python-telegram-bot's Updater, which confirms updates as soon as it has
fetched them. Here the offset (which confirms every update below it to Telegram) only moves
past an update once the bridge has committed it (or it was given up as unreadable), and is
saved in the store, so a SIGKILL at any moment loses nothing; what is fetched again after a
restart is deduplicated by the bridge on the message's platform id.

Updates are handled in tasks (intake.Dispatcher): in order within a chat, side by side across
chats. The loop keeps polling while some are still running, so one slow update (a large file,
a store that cannot write yet) delays no other chat; the offset waits on it meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence

from telegram import Bot
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError
from telegram.request import BaseRequest

from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.telegram.errors import check_cancelled, retry_seconds
from picobridge.adapters.telegram.intake import Dispatcher
from picobridge.adapters.telegram.normalise import ALLOWED_UPDATES, PLATFORM
from picobridge.adapters.telegram.parse import (
    UNREADABLE,
    Malformed,
    describe_failure,
    parse_update,
    update_id_of,
)
from picobridge.contract import BridgeLink, StorageUnavailable

log = logging.getLogger("picobridge.telegram")

# The offset of the bot named "default"; another bot's is "<its platform name>.offset".
CURSOR = f"{PLATFORM}.offset"
# After a week without updates Telegram restarts update ids at a random value, possibly
# below a saved offset, which would then confirm (drop) new updates unseen.
CURSOR_MAX_AGE = 6 * 86400.0
# While an album's parts may still arrive, poll briefly instead of parking a long poll.
ALBUM_POLL_INTERVAL = 0.3
# While an update is still being handled, poll again this often: a new message of another
# chat must not wait for it. (Telegram answers at once then: the unconfirmed update is there.)
PENDING_POLL_INTERVAL = 0.5
BACKOFF_CAP = 30.0
CURSOR_SAVE_EVERY = 5.0

Fatal = Callable[[str], None]


class Poller:
    def __init__(self, bot: Bot, request: BaseRequest, dispatcher: Dispatcher,
                 bridge: BridgeLink, *, poll_timeout: int, stall_timeout: float,
                 fatal: Fatal, scrub: Callable[[str], str], platform: str = PLATFORM) -> None:
        self._bot = bot
        self._platform = platform
        self._cursor = f"{platform}.offset"
        self._request = request
        self._dispatcher = dispatcher
        self._bridge = bridge
        self._poll_timeout = poll_timeout
        # A long poll legitimately takes poll_timeout (plus some network time); only longer
        # than that is a stall.
        self._stall_after = max(stall_timeout, poll_timeout + min(5.0, poll_timeout))
        self._fatal = fatal
        self._scrub = scrub
        self._loaded = False
        self._offset: int | None = None
        self._inflight: dict[int, asyncio.Future[None]] = {}
        self._backoff = Backoff(cap=BACKOFF_CAP)
        self._saved: int | None = None
        self._saved_at = float("-inf")
        self._saving: asyncio.Task[None] | None = None
        self._stopped = False
        self.connected = False
        self.reconnects = 0

    async def run(self) -> None:
        """Poll until cancelled. Run again after it raised (the daemon's supervisor does), it
        goes on where it was: the offset and the updates in flight are kept."""
        if not self._loaded:
            self._offset = await self._load_offset()
            self._loaded = True
            log.info("polling for updates (offset %s)", self._offset)
        try:
            while not self._stopped:
                if await self._settle():
                    await self._backoff.wait()
                self._save_offset()
                # No pause before the next poll: _settle already holds it until the updates
                # in hand are committed, and what arrived meanwhile comes in one answer, so
                # a burst is batched without a wait that every message would sit out.
                batch = await self._poll()
                if batch:
                    self._take(batch)
            # Refused for good: the daemon is stopping; ending here would count as a crash.
            await asyncio.Event().wait()
        finally:
            self._set_connected(False)
            self._advance()  # what was committed since the last poll counts too
            with contextlib.suppress(Exception):
                await asyncio.shield(self._final_save())

    def _take(self, batch: Sequence[object]) -> None:
        """Dispatch the updates not yet in hand; an unreadable one is confirmed and skipped."""
        nameless = 0
        for raw in batch:
            uid = update_id_of(raw)
            if uid is None:
                nameless += 1
                continue
            if (self._offset is not None and uid < self._offset) or uid in self._inflight:
                continue  # fetched again while an earlier one is still being handled
            try:
                update = parse_update(raw, self._bot)
            except Malformed as exc:
                log.warning("update %d skipped: %s (its content is not logged)", uid, exc)
                self._inflight[uid] = _finished()
                continue
            self._inflight[uid] = self._dispatcher.dispatch(update)
        if nameless:
            # Confirmed with the next update that has an id: nothing else can confirm them.
            log.warning("getUpdates brought %d item(s) without an update_id; skipped", nameless)

    async def _poll(self) -> Sequence[object] | None:
        # A short poll first (and after trouble) answers at once, so the connection is known
        # to be up without waiting out a long poll on a quiet bot.
        short = self._dispatcher.albums_open or not self.connected
        timeout = 0 if short else self._poll_timeout
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation
            # that arrives just as the call completes, and stop() would then never end.
            async with asyncio.timeout(self._stall_after):
                result = await self._get_updates(timeout)
        except TimeoutError:
            log.warning("getUpdates gave no answer for %.0fs; reconnecting", self._stall_after)
            await self._reconnect()
            return None
        except (InvalidToken, Conflict) as exc:
            self._refused(exc)
            return None
        except RetryAfter as exc:
            check_cancelled()
            log.warning("getUpdates hit flood control; waiting %.0fs", retry_seconds(exc))
            await asyncio.sleep(retry_seconds(exc))
            return None
        except TelegramError as exc:
            check_cancelled()
            await self._failed(self._scrub(f"{exc.__class__.__name__}: {exc}"), reconnect=True)
            return None
        except UNREADABLE as exc:
            # An answer without the Bot API's envelope (a proxy, an API change).
            await self._failed(f"an answer of the wrong shape ({exc.__class__.__name__})",
                               reconnect=False)
            return None
        if not isinstance(result, list) or (result and all(update_id_of(r) is None
                                                          for r in result)):
            await self._failed("its answer is not a list of updates", reconnect=False)
            return None
        self._backoff.reset()
        self._set_connected(True)
        self._bridge.heard_from(self._platform)  # a completed poll, even an empty one
        return result

    async def _get_updates(self, timeout: int) -> object:
        # Bot.get_updates parses the whole batch at once (one odd update fails them all) and
        # logs it raw, users' messages included, when that fails; Bot._post is the same call
        # without the parsing, which parse.py then does one update at a time.
        params: dict[str, object] = {"timeout": timeout,
                                     "allowed_updates": list(ALLOWED_UPDATES)}
        if self._offset is not None:
            params["offset"] = self._offset
        # As Bot.get_updates: the read timeout grows by the time Telegram may hold the poll.
        read = (self._request.read_timeout or 0) + timeout
        return await self._bot._post("getUpdates", params, read_timeout=read)

    def _refused(self, exc: TelegramError) -> None:
        self._stopped = True
        if isinstance(exc, InvalidToken):
            self._fatal("Telegram refused the bot token (401 Unauthorized): it is wrong or was "
                        "revoked. Get the current token from @BotFather and set telegram.token.")
        else:
            self._fatal("another process is receiving this bot's updates (409 Conflict): only "
                        "one picobridge (or other bot program) may poll with one token, and no "
                        "webhook may be set.")

    async def _failed(self, reason: str, *, reconnect: bool) -> None:
        log.warning("getUpdates failed: %s; retrying in %.0fs", reason, self._backoff.delay)
        self._set_connected(False)
        await self._backoff.wait()
        if reconnect:
            await self._reconnect()

    async def _settle(self) -> bool:
        """Give running handlers a moment, advance the offset past what is done; True after a
        failure (then everything from the failed update on is fetched and handled again)."""
        pending = [t for t in self._inflight.values() if not t.done()]
        if pending:
            wait = ALBUM_POLL_INTERVAL if self._dispatcher.albums_open \
                else PENDING_POLL_INTERVAL
            await asyncio.wait(pending, timeout=wait)
        failed = [uid for uid, t in self._inflight.items()
                  if t.done() and (t.cancelled() or t.exception() is not None)]
        if not failed:
            self._advance()
            return False
        # Handlers give up or hold by themselves; a task fails only when it was cancelled or
        # by a bug. Let everything in flight end so that nothing is handled twice at once,
        # then take it all again from the failed update on: never skipped.
        await asyncio.wait(list(self._inflight.values()))
        first = min(failed)
        task = self._inflight[first]
        error = None if task.cancelled() else task.exception()
        log.warning("update %d not handled yet (%s); fetching it again", first,
                    "cancelled" if error is None else describe_failure(error))
        self._advance()
        self._inflight.clear()
        return True

    def _advance(self) -> None:
        for uid in sorted(self._inflight):
            task = self._inflight[uid]
            if not task.done() or task.cancelled() or task.exception() is not None:
                # Ask from here on: Telegram keeps (and resends) this one and what follows.
                self._offset = uid if self._offset is None else max(self._offset, uid)
                break
            del self._inflight[uid]
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
            self._bridge.connection_changed(self._platform, up)

    async def _load_offset(self) -> int | None:
        try:
            raw = await self._bridge.get_cursor(self._cursor)
        except StorageUnavailable:
            log.info("the saved Telegram offset cannot be read now; letting Telegram decide")
            return None
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

    def _save_offset(self) -> None:
        # Telegram itself remembers what was confirmed, so a saved offset that lags behind
        # only means asking from an older point (Telegram answers from its own); saving it
        # every few seconds instead of every poll keeps a write off the hot path, and saving
        # in a task keeps a store that cannot write (a lock held for seconds) off the loop.
        if self._offset is None or self._offset == self._saved:
            return
        if self._saving is not None and not self._saving.done():
            return
        if time.monotonic() - self._saved_at < CURSOR_SAVE_EVERY:
            return
        self._saved_at = time.monotonic()
        self._saving = asyncio.create_task(self._store_offset(), name="telegram-offset")

    async def _store_offset(self) -> None:
        offset = self._offset
        if offset is None or offset == self._saved:
            return
        try:
            await self._bridge.set_cursor(
                self._cursor, json.dumps({"offset": offset, "saved": int(time.time())}))
        except StorageUnavailable:
            log.debug("the Telegram offset is not saved now: the store cannot write")
            return
        except Exception as exc:
            # Only a hint is lost; polling must not end over it.
            log.warning("saving the Telegram offset failed (%s)", describe_failure(exc))
            return
        self._saved = offset

    async def _final_save(self) -> None:
        if self._saving is not None:
            await asyncio.wait([self._saving])
        await self._store_offset()


def _finished() -> asyncio.Future[None]:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done
