"""Encrypted room events opened for the pipeline (`matrix.e2ee`).

An m.room.encrypted event becomes the event it carries (a message, an edit, a file) and goes
on through normalise like any other. Its key may not be here yet: a room key travels as a
to-device message, which can arrive a sync after the message itself. Such an event waits for
its key (at most `matrix.e2ee_key_wait` seconds, its room's later events behind it), asking
the sending device for it halfway; an event that still cannot be read is reported, so its
sender hears of it instead of it being lost without a word. Later events of a session whose
key was waited for in vain are tried at once, without waiting again: one lost key must not
hold a room for `e2ee_key_wait` seconds per message.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from mautrix.crypto import OlmMachine
from mautrix.errors import DecryptionError, SessionNotFound
from mautrix.types import (
    JSON,
    DeviceID,
    EncryptedEvent,
    EncryptedMegolmEventContent,
    IdentityKey,
    SerializerError,
    UserID,
)

from picobridge.adapters.matrix.normalise import Unreadable

log = logging.getLogger("picobridge.matrix")

# Sessions whose key did not come in time, remembered so their later events do not wait.
GIVEN_UP = 1024


class Decryptor:
    def __init__(self, machine: OlmMachine, key_wait: float) -> None:
        self._machine = machine
        self._key_wait = key_wait
        self._given_up: dict[str, None] = {}

    async def open(self, room_id: str, raw: dict[str, Any]) -> dict[str, Any] | Unreadable:
        """The decrypted event in the /sync shape, or why it cannot be read."""
        try:
            event = EncryptedEvent.deserialize(cast(JSON, {**raw, "room_id": room_id}))
        except (SerializerError, KeyError, ValueError):
            return Unreadable("not an encrypted event of a known shape", None)
        content = event.content
        if not isinstance(content, EncryptedMegolmEventContent):
            return Unreadable("not encrypted for a room (no Megolm content)", None)
        session = str(content.session_id)
        try:
            return await self._decrypt(event)
        except SessionNotFound:
            if session in self._given_up:
                return Unreadable("SessionNotFound", session)
            log.info("waiting for the key of %s (session %s)", event.event_id, session)
        except DecryptionError as exc:
            return Unreadable(exc.__class__.__name__, session)
        if not await self._machine.wait_for_session(event.room_id, content.session_id,
                                                    timeout=self._key_wait / 2):
            await self._ask(event, content)
        try:
            return await self._decrypt(event)
        except SessionNotFound:
            self._given_up[session] = None
            if len(self._given_up) > GIVEN_UP:
                del self._given_up[next(iter(self._given_up))]
            return Unreadable("SessionNotFound", session)
        except DecryptionError as exc:
            return Unreadable(exc.__class__.__name__, session)

    async def _decrypt(self, event: EncryptedEvent) -> dict[str, Any]:
        opened = await self._machine.decrypt_megolm_event(event)
        data: dict[str, Any] = opened.serialize()
        data.pop("mautrix", None)
        return data

    async def _ask(self, event: EncryptedEvent, content: EncryptedMegolmEventContent) -> None:
        """Ask the device that sent it for the room key, and wait for the answer."""
        if not content.device_id or not content.sender_key:
            return
        devices = {UserID(event.sender): [DeviceID(content.device_id)]}
        log.info("asking %s for the key of %s", event.sender, event.event_id)
        try:
            await self._machine.request_room_key(
                event.room_id, IdentityKey(content.sender_key), content.session_id,
                from_devices=devices, timeout=self._key_wait / 2)
        except Exception as exc:  # a key request is best effort: the event is reported anyway
            log.info("the key request for %s failed (%s)", event.event_id,
                     exc.__class__.__name__)
