"""A person whose client encrypts, for the Matrix E2EE tests: mautrix's own Client and
OlmMachine (its sync loop, its SQL crypto store on SQLite in the test's tmp folder), the way a
real encrypting client behaves: it uploads its device keys, shares its room keys with the
bot's device and reads what the bot sends only after decrypting it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, cast

import aiohttp
from mautrix.api import HTTPAPI, Method
from mautrix.api import Path as APIPath
from mautrix.client import Client
from mautrix.client.state_store.asyncpg.upgrade import upgrade_table as state_upgrades
from mautrix.crypto import OlmMachine, PgCryptoStateStore, PgCryptoStore
from mautrix.crypto.attachments import decrypt_attachment, encrypt_attachment
from mautrix.types import (
    JSON,
    ContentURI,
    DeviceID,
    Event,
    EventType,
    RoomCreatePreset,
    RoomID,
    UserID,
)
from mautrix.util.async_db import Database

from tests.synapse.person import wait_on
from tests.synapse.server import Account

Seen = dict[str, Any]


class CryptoPerson:
    def __init__(self, url: str, account: Account, store_dir: Path) -> None:
        self.account = account
        self.user_id = account.user_id
        self._url = url
        self._path = store_dir / f"{account.user_id[1:].split(':')[0]}-crypto.db"
        store_dir.mkdir(parents=True, exist_ok=True)
        # Every event seen in each room, decrypted where it was encrypted (then marked so).
        self.events: dict[str, list[Seen]] = {}
        # The ids of the events that arrived encrypted.
        self.encrypted_ids: set[str] = set()
        self._changed = asyncio.Condition()
        self._session: aiohttp.ClientSession | None = None
        self._db: Database | None = None
        self._sync: asyncio.Future[None] | None = None
        self.client: Client | None = None

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession()
        api = HTTPAPI(self._url, self.account.access_token, client_session=self._session)
        db = self._db = Database.create(f"sqlite://{self._path}",
                                        upgrade_table=PgCryptoStore.upgrade_table)
        state_db = Database.create(f"sqlite://{self._path}", upgrade_table=state_upgrades)
        state_db.override_pool(db)
        await db.start()
        await state_db.start()
        state = PgCryptoStateStore(state_db)
        store = PgCryptoStore(self.user_id, "test pickle key", db)
        await store.open()
        client = self.client = Client(UserID(self.user_id), DeviceID(self.account.device_id),
                                      api=api, state_store=state, sync_store=store)
        machine = OlmMachine(client, store, state)
        await machine.load()
        await store.put_device_id(DeviceID(self.account.device_id))
        await machine.share_keys()
        client.crypto = machine
        client.add_event_handler(EventType.ALL, self._seen)
        self._sync = client.start(None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.stop()
        if self._sync is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sync
        if self._db is not None:
            await self._db.stop()
        if self._session is not None:
            await self._session.close()

    async def _seen(self, event: Event) -> None:
        room = getattr(event, "room_id", None)
        if not room:
            return
        data = cast(dict[str, Any], event.serialize())
        decrypted = bool((data.pop("mautrix", None) or {}).get("was_encrypted"))
        if event.type == EventType.ROOM_ENCRYPTED:
            self.encrypted_ids.add(str(event.event_id))
            return  # its decrypted copy follows, when it can be read
        data["decrypted"] = decrypted
        async with self._changed:
            self.events.setdefault(str(room), []).append(data)
            self._changed.notify_all()

    async def wait_until(self, predicate: Callable[[], Any], timeout: float = 60,
                         what: str = "condition") -> Any:
        return await wait_on(self._changed, predicate, timeout, what)

    def from_user(self, room: str, user: str, kind: str = "m.room.message") -> list[Seen]:
        return [e for e in self.events.get(room, []) if e.get("sender") == user
                and e.get("type") == kind]

    async def wait_for(self, room: str, user: str, predicate: Callable[[Seen], bool],
                       kind: str = "m.room.message", what: str = "an event") -> Seen:
        def found() -> Seen | None:
            return next((e for e in self.from_user(room, user, kind) if predicate(e)), None)

        event: Seen = await self.wait_until(found, what=f"{what} from {user} in {room}")
        return event

    async def create_encrypted_dm(self, bot: str) -> str:
        room = await self.create_encrypted_room([bot], direct=True)
        await self.wait_joined(room, bot)
        return room

    async def create_encrypted_room(self, invite: list[str], *, direct: bool = False) -> str:
        assert self.client is not None
        room = await self.client.create_room(
            preset=RoomCreatePreset.TRUSTED_PRIVATE if direct else RoomCreatePreset.PRIVATE,
            is_direct=direct, invitees=[UserID(user) for user in invite],
            initial_state=[cast(dict[str, JSON], {
                "type": "m.room.encryption", "state_key": "",
                "content": {"algorithm": "m.megolm.v1.aes-sha2"}})])
        return str(room)

    async def wait_joined(self, room: str, user: str) -> None:
        await self.wait_until(lambda: self._joined(room, user), what=f"{user} to join {room}")

    async def join(self, room: str) -> None:
        assert self.client is not None
        await self.client.join_room_by_id(RoomID(room))

    async def invite(self, room: str, user: str) -> None:
        assert self.client is not None
        await self.client.invite_user(RoomID(room), UserID(user))

    def _joined(self, room: str, user: str) -> bool:
        return any(e.get("type") == "m.room.member" and e.get("state_key") == user
                   and e["content"].get("membership") == "join"
                   for e in self.events.get(room, []))

    async def say(self, room: str, text: str) -> str:
        """An encrypted text message (mautrix's Client encrypts for an encrypted room)."""
        assert self.client is not None
        return str(await self.client.send_text(RoomID(room), text))

    async def new_group_session(self, room: str) -> None:
        """The next message starts a new group session (its key sent to the bot anew)."""
        assert self.client is not None and self.client.crypto is not None
        await self.client.crypto.crypto_store.remove_outbound_group_session(RoomID(room))

    async def send(self, room: str, content: dict[str, Any]) -> str:
        """An encrypted m.room.message with this content."""
        assert self.client is not None
        event_id = await self.client.send_message_event(RoomID(room), EventType.ROOM_MESSAGE,
                                                         cast(Any, content))
        return str(event_id)

    async def upload_encrypted(self, data: bytes, name: str) -> dict[str, Any]:
        """`data` encrypted and uploaded: the `file` an encrypted event carries."""
        assert self.client is not None
        ciphertext, key = encrypt_attachment(data)
        key.url = await self.client.upload_media(ciphertext, "application/octet-stream",
                                                 filename=name)
        return cast(dict[str, Any], key.serialize())

    async def download_decrypted(self, file: dict[str, Any]) -> bytes:
        """An encrypted file an event points to, fetched and decrypted as a client does."""
        assert self.client is not None
        ciphertext = await self.client.download_media(ContentURI(file["url"]))
        return decrypt_attachment(ciphertext, file["key"]["k"], file["hashes"]["sha256"],
                                  file["iv"])

    async def send_raw(self, room: str, kind: str, content: dict[str, Any]) -> str:
        """An event sent as it is, unencrypted (a forged or broken encrypted one)."""
        assert self.client is not None
        event_id = await self.client.send_message_event(
            RoomID(room), EventType.find(kind), cast(Any, content), disable_encryption=True)
        return str(event_id)

    async def send_to_device_raw(self, user: str, kind: str, content: dict[str, Any]) -> None:
        """A to-device event to every device of `user`, as it is (a broken one)."""
        assert self.client is not None
        await self.client.api.request(
            Method.PUT, APIPath.v3.sendToDevice[kind][self.client.api.get_txn_id()],
            {"messages": {user: {"*": content}}})

    async def bot_devices(self, bot: str) -> dict[str, str]:
        """The bot's devices as the homeserver lists them, each with its ed25519 key."""
        assert self.client is not None
        answer = await self.client.query_keys([UserID(bot)])
        devices = answer.device_keys.get(UserID(bot), {})
        return {str(device): str(keys.ed25519) for device, keys in devices.items()}

