"""From a room's timeline events to committed bridge messages.

`RoomIntake.room` handles one room's events of one /sync batch, in order; rooms run side by
side (the sync loop runs them through a ChatSerial keyed by room). It returns only once every
event is committed or given up, so the sync token that covers them is stored after them. A
store that cannot write holds the room's events (tried again after a pause) rather than
skipping any; an event whose handling keeps failing otherwise is given up after a few tries
(logged, never with content), so it cannot hold its room for ever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
from mautrix.client import ClientAPI
from mautrix.errors import MatrixConnectionError, MatrixError, MatrixUnknownRequestError
from mautrix.types import EventID, RoomID

from picobridge.adapters.common.attachments import AttachmentRefused
from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.matrix.client import Identity, LimitExceeded
from picobridge.adapters.matrix.context import earlier
from picobridge.adapters.matrix.files import MatrixFiles
from picobridge.adapters.matrix.normalise import (
    PLATFORM,
    Candidate,
    Edit,
    Encrypted,
    Room,
    Skip,
    Unreadable,
    normalise,
    thread_root,
)
from picobridge.adapters.matrix.parse import JoinedRoom, as_dict
from picobridge.adapters.matrix.rooms import Rooms
from picobridge.adapters.matrix.settings import MatrixSettings
from picobridge.contract import Attachment, BridgeLink, InboundMessage, StorageUnavailable

if TYPE_CHECKING:
    from picobridge.adapters.matrix.decrypt import Decryptor

log = logging.getLogger("picobridge.matrix")

T = TypeVar("T")
MAX_FAILURES = 3
LOST_TEXT = ("⚠️ I could not take a message of this room (an error on my side); it did not "
             "reach the agent. Please send it again, perhaps in another form.")
UNREADABLE_TEXT = (
    "⚠️ I could not decrypt a message you sent here (its key never reached my device), so it "
    "did not reach the agent. Please send it again; if this keeps happening, make sure your "
    "client shares keys with unverified devices, or start a new chat with me.")
# Undecryptable events already reported in rooms with more people (one report per group
# session there: the bot may not even have been addressed).
REPORTED_SESSIONS = 1024
MESSAGE_TYPES = frozenset({"m.room.message", "m.room.encrypted"})


def transient(exc: Exception) -> bool:
    """The homeserver failing in a way that passes (unreachable, 5xx, rate limited): waited
    out, never a reason to drop an event."""
    if isinstance(exc, MatrixConnectionError | aiohttp.ClientError | TimeoutError
                  | LimitExceeded):
        return True
    return isinstance(exc, MatrixUnknownRequestError) and exc.http_status >= 500
STORAGE_RETRY_CAP = 5.0

Notify = Callable[[str, str | None, str], Awaitable[None]]


class RoomIntake:
    def __init__(self, client: ClientAPI, bridge: BridgeLink, settings: MatrixSettings,
                 me: Identity, rooms: Rooms, files: MatrixFiles, notify: Notify,
                 ours: Callable[[str], bool], decryptor: Decryptor | None = None) -> None:
        """`notify(room, thread, text)` posts a note at once; `ours(event_id)` tells an
        event the bot sent in this run (a reply to it needs no lookup); `decryptor` opens
        encrypted events (matrix.e2ee), else the room is told the bot cannot read them."""
        self._client = client
        self._bridge = bridge
        self._settings = settings
        self._me = me
        self._rooms = rooms
        self._files = files
        self._notify = notify
        self._ours = ours
        self._decryptor = decryptor
        self._reported: dict[tuple[str, str], None] = {}
        self._storage_down = False

    async def room(self, joined: JoinedRoom) -> None:
        for event in joined.events:
            await self._event(joined.room_id, event)

    async def _event(self, room_id: str, event: dict[str, Any]) -> None:
        """Take one event. The homeserver failing (unreachable, 5xx, rate limited) is waited
        out however long it lasts; anything else is tried a few times, then given up and
        its sender told, so one event cannot hold its room for ever."""
        backoff = Backoff(cap=30.0)
        attempt = 0
        while True:
            try:
                await self._held(lambda: self._take(room_id, event))
                return
            except Exception as exc:
                if isinstance(exc, asyncio.CancelledError):
                    raise
                failure, counts = exc.__class__.__name__, not transient(exc)
            attempt += counts
            if attempt >= MAX_FAILURES:
                break
            log.warning("event %s in %s not taken yet (%s); trying again in %.0fs",
                        event.get("event_id"), room_id, failure, backoff.delay)
            await backoff.wait()
        log.error("giving up event %s in %s after %d attempts (%s)", event.get("event_id"),
                  room_id, MAX_FAILURES, failure)
        if event.get("type") in MESSAGE_TYPES and event.get("sender") != self._me.user_id:
            await self._notify(room_id, thread_root(as_dict(event.get("content"))), LOST_TEXT)

    async def _held(self, step: Callable[[], Awaitable[T]]) -> T:
        """`step()`, again after a pause for as long as the store cannot write."""
        backoff = Backoff(0.5, STORAGE_RETRY_CAP)
        while True:
            try:
                result = await step()
            except StorageUnavailable as exc:
                if not self._storage_down:
                    log.warning("cannot store Matrix events (%s): they are held and offered "
                                "again until the store takes writes", exc)
                self._storage_down = True
                await asyncio.sleep(backoff.next())
                continue
            self._storage_down = False
            return result

    async def _take(self, room_id: str, event: dict[str, Any]) -> None:
        room = Room(room_id, await self._rooms.direct(room_id), self._settings.rooms)
        if event.get("type") == "m.room.encrypted" and self._decryptor is not None \
                and event.get("sender") != self._me.user_id:
            opened = await self._decryptor.open(room_id, event)
            if isinstance(opened, Unreadable):
                await self._unreadable(room, event, opened)
                return
            event = opened
        found = normalise(room, event, self._me, prefix=self._settings.command_prefix)
        if isinstance(found, Skip):
            log.debug("matrix event %s skipped: %s", event.get("event_id"), found.reason)
        elif isinstance(found, Encrypted):
            await self._rooms.tell_encrypted(room_id)
        elif isinstance(found, Edit):
            if await self._bridge.update_queued(PLATFORM, found.original, found.text):
                log.info("queued message %s updated by an edit", found.original)
        elif await self._for_us(found):
            message = await self._prepare(found)
            if message is not None:
                result = await self._bridge.submit(message)
                log.debug("matrix event %s -> %s", found.event_id, result.value)

    async def _unreadable(self, room: Room, event: dict[str, Any], why: Unreadable) -> None:
        """Tell the sender once: every such message in a direct chat, once per group session
        in a room with more people."""
        log.warning("encrypted event %s in %s could not be decrypted (%s)",
                    event.get("event_id"), room.room_id, why.reason)
        if not room.direct:
            key = (room.room_id, why.session or str(event.get("event_id")))
            if key in self._reported:
                return
            self._reported[key] = None
            if len(self._reported) > REPORTED_SESSIONS:
                del self._reported[next(iter(self._reported))]
        await self._notify(room.room_id, thread_root(as_dict(event.get("content"))),
                           UNREADABLE_TEXT)

    async def _for_us(self, found: Candidate) -> bool:
        if found.needs_known_thread:
            return await self._bridge.knows_chat(found.chat)
        quoted = found.needs_reply_to_me
        if quoted is None:
            return True
        if self._ours(quoted):
            return True
        try:
            event = await self._client.get_event(RoomID(found.chat.chat_id), EventID(quoted))
        except MatrixError:
            return False
        return str(event.sender) == self._me.user_id

    async def _prepare(self, found: Candidate) -> InboundMessage | None:
        text = found.text
        attachments: list[Attachment] = []
        allowed = await self._bridge.is_allowed(PLATFORM, found.sender)
        if found.files and allowed:
            # Strangers' files are not fetched: the bridge refuses them anyway.
            attachments, refused = await self._fetch(found)
            if refused and not text and not attachments:
                return None
        elif found.files and not text:
            text = "(a file)"  # still submitted, so the stranger hears why nothing happens
        if not text and not attachments:
            text = "/help"  # a bare mention: say what the bot does rather than nothing
        if found.wants_context and allowed and not text.startswith("/") \
                and not await self._bridge.knows_chat(found.chat):
            context = await earlier(self._client, self._me.user_id, found.chat.chat_id,
                                    found.chat.thread_id, found.event_id)
            text = context + text if context else text
        return InboundMessage(
            chat=found.chat, sender_id=found.sender, text=text,
            platform_message_id=found.event_id, sender_name=found.sender[1:].split(":")[0],
            attachments=tuple(attachments), reply_to=found.event_id, sent_at=found.sent_at,
            chat_kind="private" if found.direct else "group")

    async def _fetch(self, found: Candidate) -> tuple[list[Attachment], list[str]]:
        attachments: list[Attachment] = []
        refused: list[str] = []
        for ref in found.files:
            try:
                attachments.append(await self._files.fetch(ref))
            except AttachmentRefused as exc:
                refused.append(str(exc))
        for reason in refused:
            await self._notify(found.chat.chat_id, found.chat.thread_id, f"⚠️ {reason}")
        return attachments, refused
