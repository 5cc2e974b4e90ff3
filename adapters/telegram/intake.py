"""From Telegram updates to committed bridge messages.

`Pipeline` handles one update (or one album): decides whether it is for the bot, downloads
its files and submits it; it returns only after the bridge committed it. `Dispatcher` runs
pipelines concurrently across chats but in order within a chat, and gathers the parts of an
album (one update per photo, all with one media_group_id) into one message. Polling and
webhooks both feed the dispatcher and confirm an update to Telegram only once its task is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from telegram import Bot, Message, Update
from telegram.error import BadRequest, InvalidToken, NetworkError, RetryAfter, TelegramError

from picobridge.adapters.common.attachments import AttachmentPolicy, AttachmentRefused
from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.telegram.errors import check_cancelled
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
from picobridge.contract import Attachment, BridgeLink, ChatRef, InboundMessage

log = logging.getLogger("picobridge.telegram")

# Bots may download at most 20 MB through getFile, whatever attachments.max_bytes says.
DOWNLOAD_LIMIT = 20 * 1024 * 1024
# Telegram posts the parts of an album as separate updates within a moment of each other.
ALBUM_WAIT = 1.0

Notify = Callable[[ChatRef, str | None, str], Awaitable[None]]
Scrub = Callable[[str], str]


class IntakeRetry(Exception):
    """A transient failure (network, flood control): handle the update again later."""


class Pipeline:
    def __init__(self, bot: Bot, bridge: BridgeLink, policy: AttachmentPolicy,
                 identity: BotIdentity, notify: Notify, commands: Sequence[str],
                 scrub: Scrub) -> None:
        self._bot = bot
        self._bridge = bridge
        self._policy = policy
        self._identity = identity
        self._notify = notify
        self._commands = tuple(commands)
        self._scrub = scrub

    async def handle(self, updates: Sequence[Update]) -> None:
        """One update, or all parts of one album; returns once the bridge has committed it."""
        first = updates[0]
        if first.edited_message is not None:
            await self._edited(first.edited_message)
            return
        messages = sorted((u.message for u in updates if u.message is not None),
                          key=lambda m: m.message_id)
        if messages:
            await self._message(messages)

    async def _message(self, parts: list[Message]) -> None:
        first = parts[0]
        user = sender(first)
        if user is None or not any(addressed(m, self._identity, self._commands) for m in parts):
            return
        chat = chat_ref(first)
        refs = [ref for m in parts for ref in media_of(m)]
        has_text = any((m.text or m.caption or "").strip() for m in parts)
        if not refs and not has_text:
            kind = unsupported_kind(first)
            if kind is not None and is_private(first):
                await self._notify(chat, str(first.message_id),
                                   f"I can't read a {kind}. Please send text or a file.")
            return
        sender_id = str(user.id)
        attachments: list[Attachment] = []
        refused: list[str] = []
        # Strangers' files are not fetched: the bridge refuses them anyway, and downloading
        # first would let anyone fill the disk.
        if refs and await self._bridge.is_allowed(PLATFORM, sender_id):
            for ref in refs:
                try:
                    attachments.append(await self._fetch(ref))
                except AttachmentRefused as exc:
                    refused.append(str(exc))
        files = len(attachments) if attachments or refused else len(refs)
        text = message_text(parts, self._identity, files)
        if refused:
            await self._notify(chat, str(first.message_id), "\n".join(refused))
            if not text and not attachments:
                return
            text += (f"\n\n[{len(refused)} attached file(s) could not be received: "
                     f"{'; '.join(refused)}]")
        await self._bridge.submit(InboundMessage(
            chat=chat, sender_id=sender_id, sender_name=display_name(user), text=text,
            platform_message_id=platform_id(first), attachments=tuple(attachments),
            reply_to=str(first.message_id)))

    async def _edited(self, message: Message) -> None:
        if sender(message) is None or not addressed(message, self._identity, self._commands):
            return
        text = message_text([message], self._identity)
        if await self._bridge.update_queued(PLATFORM, platform_id(message), text):
            log.info("queued message %s updated by an edit", platform_id(message))
        else:
            log.debug("edit of %s ignored: already answered or unknown", platform_id(message))

    async def _fetch(self, ref: MediaRef) -> Attachment:
        self._policy.check_size(ref.name, ref.size, DOWNLOAD_LIMIT)
        try:
            file = await self._bot.get_file(ref.file_id)
            self._policy.check_size(ref.name, file.file_size, DOWNLOAD_LIMIT)
            data = bytes(await file.download_as_bytearray())
        except BadRequest as exc:
            if "too big" in exc.message.lower():
                raise AttachmentRefused(f"The file {ref.name!r} is over the 20 MB that "
                                        "Telegram lets bots download.") from None
            raise AttachmentRefused(f"Telegram would not hand over the file {ref.name!r} "
                                    f"({self._scrub(exc.message)}).") from None
        except InvalidToken:
            # A download URL Telegram no longer knows answers 404, which the library reports
            # like a bad token; the token itself is checked by getUpdates.
            raise AttachmentRefused(f"The file {ref.name!r} is no longer available on "
                                    "Telegram.") from None
        except (RetryAfter, NetworkError) as exc:
            check_cancelled()
            raise IntakeRetry(f"downloading {ref.kind} failed: "
                              f"{self._scrub(str(exc))}") from None
        except TelegramError as exc:
            check_cancelled()
            raise IntakeRetry(f"downloading {ref.kind} failed: "
                              f"{self._scrub(str(exc))}") from None
        try:
            return await asyncio.to_thread(self._policy.accept, PLATFORM, ref.name, data,
                                           ref.mime)
        except OSError as exc:
            log.error("cannot save a received file: %s", exc)
            raise AttachmentRefused(f"I could not store the file {ref.name!r}.") from None


@dataclass(slots=True)
class _Album:
    key: tuple[int, str]
    touched: asyncio.Event = field(default_factory=asyncio.Event)
    updates: list[Update] = field(default_factory=list)
    closed: bool = False
    task: asyncio.Task[None] | None = None


class Dispatcher:
    """Runs `handle` for each update: in order within a chat, concurrently across chats."""

    def __init__(self, handle: Callable[[Sequence[Update]], Awaitable[None]],
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
