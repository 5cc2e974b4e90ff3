"""End-to-end encryption (`matrix.e2ee`): mautrix's OlmMachine, fed from our own /sync loop.

mautrix's Client would run its own sync loop and feed the machine itself; ours stores the sync
token only after a batch is committed (receive.py), so the parts of each /sync answer the
machine needs are handed to it here, before the next /sync is made: to-device events (room
keys arrive that way, and the homeserver deletes them once a later token is used, so they are
taken before that), device list changes, the one-time key count, and the membership and
encryption state of rooms. Sending needs nothing here: mautrix's Client encrypts every event
for an encrypted room in `send_message_event` and shares the room's group session with its
members' devices first.

Keys live in <state_dir>/matrix/crypto.db (mautrix's SQL crypto store and its state store of
the members of encrypted rooms, on SQLite through aiosqlite), their pickles encrypted with the
key in <state_dir>/matrix/crypto.key; both files 0600. The device keys are uploaded once: a
restart finds the account in the store and keeps the device. When the device changes (a new
access token), the old keys cannot serve it: they are dropped and a new account made.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, cast

from mautrix.client import Client
from mautrix.client.state_store.asyncpg.upgrade import upgrade_table as state_upgrades
from mautrix.crypto import OlmMachine, PgCryptoStateStore, PgCryptoStore
from mautrix.types import (
    JSON,
    DeviceLists,
    DeviceOTKCount,
    EventType,
    SerializerError,
    StateEvent,
    ToDeviceEvent,
    UserID,
)
from mautrix.util.async_db import Database
from mautrix.util.logging import TraceLogger

from picobridge.adapters.matrix.parse import JoinedRoom, as_dict
from picobridge.private import open_private, private_dir

log = logging.getLogger("picobridge.matrix")

CRYPTO_DB = "crypto.db"
PICKLE_KEY = "crypto.key"
ROOM_STATE = frozenset({"m.room.member", "m.room.encryption"})


class EncryptionUnavailable(Exception):
    """The crypto store cannot be opened or the device keys cannot be set up; no secret in
    the message."""


def _pickle_key(path: Path) -> str:
    """The key the store's pickles are encrypted with: made once, kept 0600 beside them."""
    try:
        key = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        key = ""
    if key:
        return key
    key = secrets.token_urlsafe(32)
    fd = open_private(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(key + "\n")
    return key


class Encryption:
    def __init__(self, client: Client, machine: OlmMachine, store: PgCryptoStore,
                 state: PgCryptoStateStore, db: Database) -> None:
        self.client = client
        self.machine = machine
        self._store = store
        self._state = state
        self._db = db

    @classmethod
    async def open(cls, client: Client, state_dir: Path) -> Encryption:
        """Open (or make) the store; no homeserver call yet (`start` makes them)."""
        folder = private_dir(state_dir / "matrix")
        path = folder / CRYPTO_DB
        os.close(open_private(path, os.O_RDWR))  # SQLite's -wal and -shm files take its mode
        db_log = cast(TraceLogger, logging.getLogger("mau.picobridge.crypto.db"))
        db = Database.create(f"sqlite://{path}", upgrade_table=PgCryptoStore.upgrade_table,
                             log=db_log)
        state_db = Database.create(f"sqlite://{path}", upgrade_table=state_upgrades,
                                   log=db_log)
        state_db.override_pool(db)
        try:
            await db.start()
            await state_db.start()
        except Exception as exc:
            await db.stop()
            raise EncryptionUnavailable(f"the crypto store {path} cannot be opened "
                                        f"({exc.__class__.__name__})") from None
        store = PgCryptoStore(str(client.mxid), _pickle_key(folder / PICKLE_KEY), db)
        state = PgCryptoStateStore(state_db)
        client.state_store = state
        crypto_log = logging.getLogger("mau.picobridge.crypto")
        # Without cross-signing (not built) every device draws an "isn't cross-signed"
        # warning; failures that matter reach us as exceptions and are logged here.
        crypto_log.setLevel(logging.ERROR)
        machine = OlmMachine(client, store, state, log=cast(TraceLogger, crypto_log))
        return cls(client, machine, store, state, db)

    async def start(self) -> None:
        """Load the account (a new one for a new device) and upload what the homeserver
        lacks: the device keys once, one-time keys as they run low."""
        client, store, machine = self.client, self._store, self.machine
        await store.open()
        stored = await store.get_device_id()
        if stored and stored != client.device_id:
            log.warning("the Matrix device changed (%s, was %s): new encryption keys are made; "
                        "messages encrypted for the old device cannot be read here",
                        client.device_id, stored)
            await store.delete()
            stored = None
        await machine.load()
        assert machine.account is not None
        if machine.account.shared and not await self._keys_on_server():
            log.warning("the homeserver has no keys of device %s: new encryption keys are "
                        "made", client.device_id)
            await store.delete()
            machine.account = None
            await machine.load()
            stored = None
        if not stored:
            await store.put_device_id(client.device_id)
        await machine.share_keys()
        client.crypto = machine
        # Reactions too: in an encrypted room everything the bot posts is encrypted.
        client.encryption_blacklist = set()
        assert machine.account is not None
        log.info("end-to-end encryption on for device %s (identity key %s)", client.device_id,
                 machine.account.identity_key)

    async def _keys_on_server(self) -> bool:
        me = UserID(self.client.mxid)
        answer = await self.client.query_keys([me])
        device = answer.device_keys.get(me, {}).get(self.client.device_id)
        return device is not None and bool(device.keys)

    # -- what a /sync answer brings ---------------------------------------------------------

    async def take(self, data: dict[str, Any], rooms: list[JoinedRoom]) -> None:
        """Hand the machine what one /sync answer brings for it, before the next /sync."""
        for room in rooms:
            await self._room_state(room)
        for raw in as_dict(data.get("to_device")).get("events") or ():
            if isinstance(raw, dict):
                await self._to_device(raw)
        lists = as_dict(data.get("device_lists"))
        if lists.get("changed") or lists.get("left"):
            await self._guarded("device list change", self.machine.handle_device_lists(
                DeviceLists.deserialize(cast(JSON, lists))))
        counts = data.get("device_one_time_keys_count")
        if isinstance(counts, dict):
            await self._guarded("one-time key upload", self.machine.handle_otk_count(
                DeviceOTKCount.deserialize(cast(JSON, counts))))

    async def _room_state(self, room: JoinedRoom) -> None:
        for raw in (*room.state, *room.events):
            if raw.get("type") not in ROOM_STATE or "state_key" not in raw:
                continue
            try:
                event = StateEvent.deserialize(cast(JSON, {**raw, "room_id": room.room_id}))
            except SerializerError:
                continue
            await self._state.update_state(event)
            if event.type == EventType.ROOM_MEMBER:
                # A member came or went: the next message gets a new group session.
                await self._guarded("membership change", self.machine.handle_member_event(event))

    async def _to_device(self, raw: dict[str, Any]) -> None:
        try:
            event = ToDeviceEvent.deserialize(cast(JSON, raw))
        except SerializerError:
            log.warning("a to-device event of an unexpected shape was skipped")
            return
        if event.type == EventType.TO_DEVICE_ENCRYPTED:
            await self._guarded(f"to-device event from {event.sender}",
                                self.machine.handle_to_device_event(event))
        elif event.type == EventType.ROOM_KEY_REQUEST:
            await self._guarded("key request", self.machine.handle_room_key_request(event))

    async def _guarded(self, what: str, step: Awaitable[Any]) -> None:
        try:
            await step
        except Exception as exc:  # olm's errors too: one event never stops the sync
            log.warning("encryption: %s not taken (%s)", what, exc.__class__.__name__)

    async def close(self) -> None:
        await self._store.close()
        await self._db.stop()
