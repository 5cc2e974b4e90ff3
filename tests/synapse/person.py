"""A person on the homeserver, driven over the client-server API with plain aiohttp: creates
rooms, invites, sends messages and files, and watches every room it is in with its own /sync
loop, so a test can wait for what the bot posts."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any, Self
from urllib.parse import quote

import aiohttp

from tests.synapse.server import Account

Event = dict[str, Any]


async def wait_on(changed: asyncio.Condition, predicate: Callable[[], Any], timeout: float,
                  what: str) -> Any:
    """The truthy value of `predicate()`, re-checked each time `changed` is notified; an
    AssertionError naming `what` after `timeout` seconds."""
    try:
        async with asyncio.timeout(timeout), changed:
            await changed.wait_for(predicate)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
    return predicate()


class Person:
    def __init__(self, url: str, account: Account) -> None:
        self.url = url
        self.account = account
        self.user_id = account.user_id
        self.session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {account.access_token}"})
        self.events: dict[str, list[Event]] = {}
        self.invites: list[str] = []
        # Everyone this person saw typing, in the order the homeserver said so.
        self.typing: list[str] = []
        self.left: list[str] = []
        self._changed = asyncio.Condition()
        self._txn = itertools.count()
        self._syncer: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._syncer = asyncio.create_task(self._sync_forever())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._syncer is not None:
            self._syncer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._syncer
        await self.session.close()

    async def call(self, method: str, path: str, body: Any = None,
                   **params: str) -> dict[str, Any]:
        async with self.session.request(method, self.url + path, json=body,
                                        params=params or None) as resp:
            data: dict[str, Any] = await resp.json(content_type=None)
            if resp.status >= 400:
                raise AssertionError(f"{method} {path}: {resp.status} {data}")
            return data

    async def _sync_forever(self) -> None:
        since: str | None = None
        while True:
            params = {"timeout": "5000"}
            if since:
                params["since"] = since
            try:
                data = await self.call("GET", "/_matrix/client/v3/sync", **params)
            except (aiohttp.ClientError, AssertionError, ValueError):
                await asyncio.sleep(0.5)  # the homeserver restarting
                continue
            since = data["next_batch"]
            rooms = data.get("rooms", {})
            async with self._changed:
                for room_id, room in rooms.get("join", {}).items():
                    self.events.setdefault(room_id, []).extend(
                        room.get("timeline", {}).get("events", []))
                    for event in room.get("ephemeral", {}).get("events", []):
                        if event.get("type") == "m.typing":
                            self.typing.extend(event["content"].get("user_ids", []))
                self.invites.extend(rooms.get("invite", {}))
                self.left.extend(rooms.get("leave", {}))
                self._changed.notify_all()

    async def wait_until(self, predicate: Callable[[], Any], timeout: float = 30,
                         what: str = "condition") -> Any:
        return await wait_on(self._changed, predicate, timeout, what)

    def from_bot(self, room: str, bot: str) -> list[Event]:
        return [e for e in self.events.get(room, []) if e.get("sender") == bot]

    def messages_from(self, room: str, bot: str) -> list[Event]:
        """The bot's messages in `room` (edits not counted)."""
        return [e for e in self.from_bot(room, bot) if e.get("type") == "m.room.message"
                and e["content"].get("m.relates_to", {}).get("rel_type") != "m.replace"]

    async def wait_for_message(self, room: str, bot: str,
                               predicate: Callable[[Event], bool] = lambda e: True,
                               timeout: float = 30, what: str = "a message") -> Event:
        def found() -> Event | None:
            return next((e for e in self.messages_from(room, bot) if predicate(e)), None)

        event: Event = await self.wait_until(found, timeout, f"{what} from {bot} in {room}")
        return event

    async def create_room(self, invite: list[str], *, direct: bool = False,
                          encrypted: bool = False, name: str | None = None) -> str:
        body: dict[str, Any] = {"invite": invite, "is_direct": direct,
                                "preset": "trusted_private_chat" if direct else "private_chat"}
        if name:
            body["name"] = name
        if encrypted:
            body["initial_state"] = [{"type": "m.room.encryption", "state_key": "",
                                      "content": {"algorithm": "m.megolm.v1.aes-sha2"}}]
        room: str = (await self.call("POST", "/_matrix/client/v3/createRoom", body))["room_id"]
        return room

    async def wait_joined(self, room: str, user: str, timeout: float = 30) -> None:
        def joined() -> bool:
            return any(e.get("type") == "m.room.member" and e.get("state_key") == user
                       and e["content"].get("membership") == "join"
                       for e in self.events.get(room, []))

        await self.wait_until(joined, timeout, f"{user} to join {room}")

    async def join(self, room: str) -> None:
        await self.call("POST", f"/_matrix/client/v3/join/{quote(room)}", {})

    async def invite(self, room: str, user: str) -> None:
        await self.call("POST", f"/_matrix/client/v3/rooms/{quote(room)}/invite",
                        {"user_id": user})

    async def send(self, room: str, content: dict[str, Any],
                   kind: str = "m.room.message") -> str:
        txn = f"t{next(self._txn)}"
        path = f"/_matrix/client/v3/rooms/{quote(room)}/send/{kind}/{txn}"
        event_id: str = (await self.call("PUT", path, content))["event_id"]
        return event_id

    async def say(self, room: str, text: str, **extra: Any) -> str:
        return await self.send(room, {"msgtype": "m.text", "body": text, **extra})

    async def upload(self, data: bytes, name: str, mime: str) -> str:
        async with self.session.post(self.url + "/_matrix/media/v3/upload", data=data,
                                     params={"filename": name},
                                     headers={"Content-Type": mime}) as resp:
            uri: str = (await resp.json())["content_uri"]
            return uri

    async def download(self, mxc: str) -> bytes:
        server, media = mxc.removeprefix("mxc://").split("/", 1)
        async with self.session.get(
                f"{self.url}/_matrix/client/v1/media/download/{server}/{media}") as resp:
            assert resp.status == 200, resp.status
            return await resp.read()


def dumps(event: Event) -> str:
    return json.dumps(event, ensure_ascii=False)[:500]
