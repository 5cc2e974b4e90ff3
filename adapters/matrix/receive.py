"""Receiving by /sync long polling, with a durable sync token.

Like Telegram's offset: the `next_batch` token is stored (in the bridge's cursors) only once
every event of its batch and of all batches before it is committed, so a SIGKILL at any moment
loses nothing; events a /sync brings again after a restart are dropped by the store on their
event id. Batches are handled in tasks, rooms side by side and in order within a room
(ChatSerial); polling goes on meanwhile, so one slow room (a large file) delays no other.

The very first sync of a new bot (no token stored) only takes the token and the invitations:
answering a room's whole history would surprise everyone in it. A timeline the server cut
short ("limited": more happened while the bot was away than one sync returns) is filled in
with /messages back to the stored token, so nothing sent meanwhile is skipped.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from mautrix.api import Method, Path
from mautrix.client import ClientAPI
from mautrix.errors import MatrixConnectionError, MatrixRequestError, MUnknownToken
from mautrix.types import FilterID, SyncToken

from picobridge.adapters.common.backoff import Backoff
from picobridge.adapters.common.serial import ChatSerial
from picobridge.adapters.common.tasks import TaskSet
from picobridge.adapters.matrix.client import LimitExceeded
from picobridge.adapters.matrix.intake import RoomIntake
from picobridge.adapters.matrix.normalise import PLATFORM
from picobridge.adapters.matrix.parse import JoinedRoom, Malformed, parse_sync
from picobridge.adapters.matrix.rooms import Rooms
from picobridge.contract import BridgeLink, StorageUnavailable

log = logging.getLogger("picobridge.matrix")

CURSOR = "matrix.sync"
# Only what the bridge reads: messages, encryption and membership in rooms; no presence,
# receipts, typing or account data.
TIMELINE_TYPES = ["m.room.message", "m.room.encrypted", "m.room.member", "m.room.encryption"]
FILTER = json.dumps({
    "presence": {"not_types": ["*"]},
    "account_data": {"not_types": ["*"]},
    "room": {
        "timeline": {"types": TIMELINE_TYPES, "limit": 50},
        "state": {"types": ["m.room.encryption", "m.room.member"], "lazy_load_members": True},
        "ephemeral": {"not_types": ["*"]},
        "account_data": {"not_types": ["*"]},
    },
}, separators=(",", ":"))
GAP_PAGES = 20
STALL_GRACE = 30.0

Fatal = Callable[[str], None]
# matrix.e2ee: what a /sync answer brings for the crypto machine, taken before the next one.
CryptoStep = Callable[[dict[str, Any], list[JoinedRoom]], Awaitable[None]]


class SyncLoop:
    def __init__(self, client: ClientAPI, bridge: BridgeLink, intake: RoomIntake,
                 rooms: Rooms, me: str, *, timeout: float, fatal: Fatal,
                 connected: Callable[[bool], None], crypto: CryptoStep | None = None) -> None:
        self._client = client
        self._crypto = crypto
        self._bridge = bridge
        self._intake = intake
        self._rooms = rooms
        self._me = me
        self._timeout = timeout
        self._fatal = fatal
        self._set_connected = connected
        self._tasks = TaskSet(log)
        self._serial = ChatSerial(self._tasks, name="matrix-room")
        self._loaded = False
        self._since: str | None = None  # the token of the newest batch fetched
        self._saved: str | None = None
        self._pending: deque[tuple[str, list[asyncio.Task[None]]]] = deque()
        self._backoff = Backoff(cap=30.0)
        self.connected = False

    async def run(self) -> None:
        """Sync until cancelled; run again after it raised, it goes on where it was."""
        if not self._loaded:
            self._since = self._saved = await self._bridge.get_cursor(CURSOR) or None
            self._loaded = True
            log.info("syncing with the homeserver (%s)",
                     "resuming" if self._since else "first sync")
        try:
            while True:
                since = self._since
                data = await self._sync()
                if data is not None:
                    await self._take(data, since)
                await self._commit()
        finally:
            self._up(False)

    async def _sync(self) -> Any:
        try:
            async with asyncio.timeout(self._timeout + STALL_GRACE):
                data = await self._client.sync(since=SyncToken(self._since or ""),
                                               filter_id=FilterID(FILTER),
                                               timeout=int(self._timeout * 1000) if
                                               self.connected else 0)
        except MUnknownToken:
            self._fatal("the homeserver refused the access token (M_UNKNOWN_TOKEN): it was "
                        "logged out or revoked; set a current matrix.access_token")
            await asyncio.Event().wait()
        except LimitExceeded as exc:
            await asyncio.sleep(exc.retry_after)
            return None
        except (MatrixConnectionError, MatrixRequestError, aiohttp.ClientError,
                TimeoutError, ValueError) as exc:
            log.warning("sync failed (%s); retrying in %.0fs", exc.__class__.__name__,
                        self._backoff.delay)
            self._up(False)
            await self._backoff.wait()
            return None
        self._backoff.reset()
        self._up(True)
        self._bridge.heard_from(PLATFORM)  # a completed sync, even an empty one
        return data

    async def _take(self, data: Any, since: str | None) -> None:
        try:
            batch = parse_sync(data, self._me)
        except Malformed as exc:
            log.warning("a sync answer skipped: %s", exc)
            return
        if self._crypto is not None:
            # Room keys come as to-device events, which the next /sync's token deletes on
            # the homeserver: into the crypto store first.
            await self._crypto(data, batch.joined)
        if batch.skipped:
            log.warning("%d room(s) of a sync answer skipped: not of the expected shape",
                        batch.skipped)
        first = since is None
        tasks = [self._serial.run(invite.room_id, functools.partial(self._rooms.invited, invite))
                 for invite in batch.invites]
        for room_id in batch.left:
            self._rooms.forget(room_id)
        for room in batch.joined:
            self._rooms.update(room)
            if not first:
                tasks.append(self._serial.run(room.room_id,
                                              functools.partial(self._room, room, since)))
        self._since = batch.next_batch
        self._pending.append((batch.next_batch, tasks))

    async def _room(self, room: JoinedRoom, since: str | None) -> None:
        if room.limited and room.prev_batch and since is not None:
            room = await self._fill_gap(room, since)
        await self._intake.room(room)

    async def _fill_gap(self, room: JoinedRoom, since: str) -> JoinedRoom:
        """The room's events between the stored token and this timeline, oldest first."""
        earlier: list[dict[str, Any]] = []
        token = room.prev_batch
        try:
            for page_number in range(1, GAP_PAGES + 1):
                page = await self._client.api.request(
                    Method.GET, Path.v3.rooms[room.room_id].messages,
                    query_params={"dir": "b", "from": token or "", "to": since, "limit": "100",
                                  "filter": json.dumps({"types": TIMELINE_TYPES})})
                chunk = [e for e in page.get("chunk") or () if isinstance(e, dict)]
                earlier.extend(chunk)
                token = page.get("end")
                if not chunk or not isinstance(token, str):
                    break
                if page_number == GAP_PAGES:
                    log.warning("the gap in %s is longer than %d events: older ones are not "
                                "read back", room.room_id, len(earlier))
        except (MatrixRequestError, MatrixConnectionError) as exc:
            log.warning("the gap in %s could not be filled (%s)", room.room_id,
                        exc.__class__.__name__)
            raise
        if earlier:
            log.info("filled a gap of %d events in %s", len(earlier), room.room_id)
        seen = {e.get("event_id") for e in room.events}
        older = [e for e in reversed(earlier) if e.get("event_id") not in seen]
        return JoinedRoom(room.room_id, older + room.events, room.state)

    async def _commit(self) -> None:
        """Store the token of the newest batch whose events, and all before, are committed."""
        token = None
        while self._pending and all(t.done() for t in self._pending[0][1]):
            token, tasks = self._pending.popleft()
            failed = [t for t in tasks if t.cancelled() or t.exception() is not None]
            if failed:
                log.warning("a room's events were not taken; fetching them again")
                await self._rewind()
                return
        if token is None or token == self._saved:
            return
        try:
            await self._bridge.set_cursor(CURSOR, token)
        except StorageUnavailable:
            log.debug("the sync token is not saved now: the store cannot write")
            self._pending.appendleft((token, []))
            return
        self._saved = token

    async def _rewind(self) -> None:
        """Let everything in flight end, then sync again from the stored token."""
        await asyncio.gather(*(t for _, ts in self._pending for t in ts),
                             return_exceptions=True)
        self._pending.clear()
        self._since = self._saved

    def _up(self, up: bool) -> None:
        if up != self.connected:
            self.connected = up
            self._set_connected(up)

    async def close(self) -> None:
        await self._tasks.close()

