"""What the adapter knows about each room: how many are in it (a direct chat or a room with
more people), whether it is encrypted; and what it does with invitations and encrypted rooms.

Invitations are accepted from allowed users only (the config's allow list and the operator's
grants, through `BridgeLink.is_allowed`); any other is declined and logged. In an encrypted
room the bot cannot read a word without matrix.e2ee: it says so once per room, remembered in the
store so a restart does not repeat it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mautrix.client import ClientAPI
from mautrix.errors import MatrixError
from mautrix.types import EventType, RoomID, TextMessageEventContent
from mautrix.types import MessageType as MsgType

from picobridge.adapters.matrix.normalise import PLATFORM
from picobridge.adapters.matrix.parse import Invite, JoinedRoom
from picobridge.adapters.matrix.settings import MatrixSettings
from picobridge.contract import BridgeLink

log = logging.getLogger("picobridge.matrix")

ENCRYPTED_NOTICE = (
    "This room is end-to-end encrypted, and I cannot read encrypted messages: nothing you "
    "write here reaches me. Talk to me in a room without encryption (start a new chat with "
    "me and leave encryption off; encryption cannot be turned off in this room), or ask my "
    "operator to turn on end-to-end encryption (matrix.e2ee).")
ENCRYPTED_CURSOR = "matrix.encrypted-notice.{room}"


@dataclass(slots=True)
class RoomState:
    members: int | None = None
    encrypted: bool = False
    told: bool | None = None  # None: not looked up in the store yet


class Rooms:
    def __init__(self, client: ClientAPI, bridge: BridgeLink, settings: MatrixSettings,
                 me: str) -> None:
        self._client = client
        self._bridge = bridge
        self._settings = settings
        self._me = me
        self._rooms: dict[str, RoomState] = {}

    def state(self, room_id: str) -> RoomState:
        return self._rooms.setdefault(room_id, RoomState())

    def update(self, room: JoinedRoom) -> None:
        """Take in what a sync says about the room: its member count and encryption."""
        state = self.state(room.room_id)
        if room.joined_count is not None:
            state.members = room.joined_count
        for event in (*room.state, *room.events):
            kind = event.get("type")
            if kind == "m.room.encryption" and "state_key" in event:
                state.encrypted = True
            elif kind == "m.room.member" and room.joined_count is None:
                state.members = None  # someone came or went: count again when needed

    def forget(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)

    async def direct(self, room_id: str) -> bool:
        state = self.state(room_id)
        if state.members is None:
            members = await self._client.get_joined_members(RoomID(room_id))
            state.members = len(members)
        return state.members <= 2

    async def invited(self, invite: Invite) -> None:
        """Join when an allowed user invites us (and the rooms policy lets us), else decline."""
        s = self._settings
        room = RoomID(invite.room_id)
        allowed = invite.inviter is not None and await self._bridge.is_allowed(
            PLATFORM, invite.inviter)
        fits = invite.is_direct or (s.rooms != "direct" and (
            not s.allowed_rooms or invite.room_id in s.allowed_rooms))
        if allowed and fits:
            await self._client.join_room_by_id(room)
            log.info("joined %s on the invitation of %s", invite.room_id, invite.inviter)
            return
        why = "not an allowed user" if not allowed else "the rooms policy"
        log.info("declined the invitation to %s from %s (%s)", invite.room_id,
                 invite.inviter, why)
        try:
            await self._client.leave_room(room)
        except MatrixError as exc:
            log.info("could not decline the invitation to %s (%s)", invite.room_id,
                     exc.__class__.__name__)

    async def tell_encrypted(self, room_id: str) -> None:
        """Say once per room that its encrypted messages cannot be read."""
        state = self.state(room_id)
        key = ENCRYPTED_CURSOR.format(room=room_id)
        if state.told is None:
            state.told = bool(await self._bridge.get_cursor(key))
        if state.told:
            return
        content = TextMessageEventContent(msgtype=MsgType.NOTICE, body=ENCRYPTED_NOTICE)
        await self._client.send_message_event(RoomID(room_id), EventType.ROOM_MESSAGE, content)
        await self._bridge.set_cursor(key, "told")
        state.told = True
        log.info("told %s that its encrypted messages cannot be read", room_id)


def sender_of(event: Any) -> str | None:
    sender = getattr(event, "sender", None)
    return str(sender) if sender else None
