"""From Telegram updates to committed bridge messages.

`Pipeline` handles one update (or one album): decides whether it is for the bot, downloads
its files and submits it; it returns only after the bridge committed it, or once it gave the
update up (malformed, or failing the same way again and again: logged, never with content).
`Dispatcher` runs pipelines concurrently across chats but in order within a chat, and gathers
the parts of an album (one update per photo, all with one media_group_id) into one message.
Polling and webhooks both feed the dispatcher and confirm an update to Telegram only once its
task is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from telegram import Bot, CallbackQuery, Message, Update, User

from picobridge.adapters.common.attachments import AttachmentPolicy, AttachmentRefused
from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.telegram.errors import check_cancelled
from picobridge.adapters.telegram.files import Fetcher
from picobridge.adapters.telegram.normalise import (
    PLATFORM,
    BotIdentity,
    MediaRef,
    addressed,
    chat_ref,
    display_name,
    is_private,
    media_of,
    message_text,
    platform_id,
    sender,
    unsupported_kind,
)
from picobridge.adapters.telegram.parse import Malformed, describe_failure
from picobridge.adapters.telegram.storage import StorageWait
from picobridge.contract import Attachment, BridgeLink, ChatRef, InboundMessage, StorageUnavailable

log = logging.getLogger("picobridge.telegram")

# Telegram posts the parts of an album as separate updates within a moment of each other.
ALBUM_WAIT = 1.0
# An update whose handling keeps failing for another reason than storage (a bug, content the
# bridge cannot cope with) is given up after this many tries, so that it cannot hold its
# chat's later messages for ever; its sender is told in a private chat.
MAX_HANDLER_FAILURES = 5
LOST_TEXT = ("⚠️ I could not take this message (an error on my side); it did not reach the "
             "agent. Please send it again, perhaps in another form.")

Notify = Callable[[ChatRef, str | None, str], Awaitable[None]]
Clicked = Callable[[CallbackQuery], Awaitable[None]]
Scrub = Callable[[str], str]


class IntakeRetry(Exception):
    """A transient failure: handle the update again later (Telegram sends it again)."""


@dataclass(frozen=True, slots=True)
class _Reading:
    """What normalising a message found, before anything is fetched or stored."""

    chat: ChatRef
    user: User
    refs: list[MediaRef]
    has_text: bool
    unsupported: str | None


class Pipeline:
    def __init__(self, bot: Bot, bridge: BridgeLink, policy: AttachmentPolicy,
                 identity: BotIdentity, notify: Notify, commands: Sequence[str],
                 scrub: Scrub, *, storage: StorageWait | None = None,
                 clicked: Clicked | None = None, proxy: str | None = None,
                 platform: str = PLATFORM) -> None:
        """`storage` decides what a storage outage does (polling holds the update and tries
        again; a webhook answers 503): by default it holds. `clicked` answers a button's
        callback query (buttons.py), which must use the same `storage`."""
        self._bridge = bridge
        self._platform = platform
        self._clicked = clicked
        self._identity = identity
        self._notify = notify
        self._commands = tuple(commands)
        self._storage = storage if storage is not None else StorageWait(hold=True)
        self._fetcher = Fetcher(bot, policy, self._storage, scrub, proxy, platform)

    async def close(self) -> None:
        await self._fetcher.close()

    async def handle(self, updates: Sequence[Update]) -> None:
        """One update, or all parts of one album; returns once the bridge has committed it or
        it was given up. Raises StorageUnavailable only when storage outages do not hold."""
        backoff = Backoff()
        ids = ",".join(str(u.update_id) for u in updates)
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._handle_once(updates)
                return
            except StorageUnavailable:
                raise
            except Malformed as exc:
                log.warning("update %s skipped: %s (its content is not logged)", ids, exc)
                await self._tell_lost(updates)
                return
            except Exception as exc:
                check_cancelled()
                failure = describe_failure(exc)
            if attempt >= MAX_HANDLER_FAILURES:
                log.error("skipping update %s after %d failed attempts (%s)", ids, attempt,
                          failure)
                await self._tell_lost(updates)
                return
            log.error("handling update %s failed (attempt %d: %s); trying again in %.0fs", ids,
                      attempt, failure, backoff.delay)
            await backoff.wait()

    async def _handle_once(self, updates: Sequence[Update]) -> None:
        first = updates[0]
        if first.callback_query is not None:
            if self._clicked is not None:
                await self._clicked(first.callback_query)
            return
        if first.edited_message is not None:
            await self._edited(first.edited_message)
            return
        messages = sorted((u.message for u in updates if u.message is not None),
                          key=lambda m: m.message_id)
        if messages:
            await self._message(messages)

    def _read(self, parts: list[Message]) -> _Reading | None:
        """Normalise without side effects: anything here that fails means the update cannot
        be read (content of an unexpected shape), which no retry changes."""
        try:
            first = parts[0]
            user = sender(first)
            if user is None or not any(addressed(m, self._identity, self._commands)
                                       for m in parts):
                return None
            refs = [ref for m in parts for ref in media_of(m)]
            has_text = any((m.text or m.caption or "").strip() for m in parts)
            unsupported = unsupported_kind(first) if is_private(first) else None
            message_text(parts, self._identity, len(refs))
            return _Reading(chat_ref(first, self._platform), user, refs, has_text, unsupported)
        except Malformed:
            raise
        except Exception as exc:
            raise Malformed(f"it could not be read ({describe_failure(exc)})") from None

    async def _message(self, parts: list[Message]) -> None:
        reading = self._read(parts)
        if reading is None:
            return
        first, chat = parts[0], reading.chat
        if not reading.refs and not reading.has_text:
            if reading.unsupported is not None:
                await self._notify(chat, str(first.message_id), f"I can't read a "
                                   f"{reading.unsupported}. Please send text or a file.")
            return
        sender_id = str(reading.user.id)
        attachments: list[Attachment] = []
        refused: list[str] = []
        # Strangers' files are not fetched: the bridge refuses them anyway, and downloading
        # first would let anyone fill the disk.
        if reading.refs and await self._allowed(sender_id):
            for ref in reading.refs:
                try:
                    attachments.append(await self._fetcher.fetch(ref))
                except AttachmentRefused as exc:
                    refused.append(str(exc))
        files = len(attachments) if attachments or refused else len(reading.refs)
        text = message_text(parts, self._identity, files)
        if refused:
            await self._notify(chat, str(first.message_id), "\n".join(refused))
            if not text and not attachments:
                return
            text += (f"\n\n[{len(refused)} attached file(s) could not be received: "
                     f"{'; '.join(refused)}]")
        message = InboundMessage(
            chat=chat, sender_id=sender_id, sender_name=display_name(reading.user), text=text,
            platform_message_id=platform_id(first), attachments=tuple(attachments),
            reply_to=str(first.message_id),
            chat_kind="private" if is_private(first) else "group")
        await self._storage.run("receiving a message", lambda: self._bridge.submit(message))

    async def _allowed(self, sender_id: str) -> bool:
        return await self._storage.run(
            "checking a sender", lambda: self._bridge.is_allowed(self._platform, sender_id),
            writes=False)

    async def _edited(self, message: Message) -> None:
        try:
            if sender(message) is None or not addressed(message, self._identity,
                                                        self._commands):
                return
            text = message_text([message], self._identity)
        except Exception as exc:
            raise Malformed(f"an edit that could not be read ({describe_failure(exc)})") \
                from None
        key = platform_id(message)
        if await self._storage.run("applying an edit",
                                   lambda: self._bridge.update_queued(self._platform, key, text)):
            log.info("queued message %s updated by an edit", key)
        else:
            log.debug("edit of %s ignored: already answered or unknown", key)

    async def _tell_lost(self, updates: Sequence[Update]) -> None:
        """Best effort: a private chat hears that its message did not get through."""
        message = updates[0].message or updates[0].edited_message
        try:
            if message is not None and is_private(message):
                await self._notify(chat_ref(message, self._platform), str(message.message_id),
                                   LOST_TEXT)
        except Exception as exc:
            check_cancelled()
            log.debug("could not tell the sender of a lost update (%s)", describe_failure(exc))


@dataclass(slots=True)
class _Album:
    key: tuple[int, str]
    touched: asyncio.Event = field(default_factory=asyncio.Event)
    updates: list[Update] = field(default_factory=list)
    closed: bool = False
    task: asyncio.Task[None] | None = None


class Dispatcher:
    """Runs `handle` for each update: in order within a chat, concurrently across chats."""

    def __init__(self, handle: Callable[[Sequence[Update]], Coroutine[Any, Any, None]],
                 album_wait: float = ALBUM_WAIT) -> None:
        self._handle = handle
        self._album_wait = album_wait
        self._albums: dict[tuple[int, str], _Album] = {}
        self._tasks = TaskSet(log)
        # Going ahead after a failed update would commit a message before an earlier one of
        # its chat, which Telegram sends again.
        self._serial = ChatSerial(
            self._tasks, name="telegram-intake",
            after_failure=lambda: IntakeRetry("an earlier update of this chat is not handled yet"))

    @property
    def albums_open(self) -> bool:
        return bool(self._albums)

    def dispatch(self, update: Update) -> asyncio.Task[None]:
        """Start handling `update`; the task ends after the commit (or raises to retry)."""
        message = update.message or update.edited_message
        if message is None and update.callback_query is not None:
            # A click waits for the chat's messages before it (a typed answer may be there).
            where = update.callback_query.message
            return self._serial.run(where.chat.id if where is not None else 0,
                                    lambda: self._handle([update]))
        if message is None:
            return self._serial.run(0, _nothing)
        chat_id = message.chat.id
        group = update.message.media_group_id if update.message is not None else None
        if group is None:
            return self._serial.run(chat_id, lambda: self._handle([update]))
        key = (chat_id, group)
        album = self._albums.get(key)
        if album is None or album.closed:
            album = _Album(key)
            self._albums[key] = album
            album.task = self._serial.run(chat_id, lambda: self._run_album(album))
        album.updates.append(update)
        album.touched.set()
        assert album.task is not None
        return album.task

    async def _run_album(self, album: _Album) -> None:
        # Quiet for album_wait since the last part: the album is complete.
        while True:
            album.touched.clear()
            try:
                async with asyncio.timeout(self._album_wait):
                    await album.touched.wait()
            except TimeoutError:
                break
        album.closed = True
        if self._albums.get(album.key) is album:
            del self._albums[album.key]
        await self._handle(album.updates)

    async def close(self) -> None:
        await self._tasks.close()
        self._albums.clear()


async def _nothing() -> None:
    return None
